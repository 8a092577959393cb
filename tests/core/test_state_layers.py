"""State layers (Mamba, gated delta net, KDA): every config spelling, vLLM's sizing rules, and
the refusals. Layer counts come from the published configs' own fields; state sizes from
vLLM's MambaStateShapeCalculator worked by hand (the vLLM oracle checks them end to end)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.core.errors import FieldError, ModelConfigError
from planner.core.model import shape_from_config
from planner.core.schema import PlanRequest
from planner.core.specs_state import (
    GatedDeltaNetSpec,
    KimiDeltaSpec,
    Mamba1Spec,
    Mamba2Spec,
    StateSpec,
)
from planner.service import plan

HYBRID = {
    m["id"]: m["config"]
    for m in json.loads(
        (Path(__file__).parents[1] / "fixtures" / "hybrid_models.json").read_text()
    )["models"]
}


def _counts(config: dict[str, Any]) -> dict[str, int]:
    shape = shape_from_config(config)
    out: dict[str, int] = {}
    for g in shape.groups:
        key = g.spec.mixer if isinstance(g.spec, StateSpec) else g.spec.kind
        out[key] = out.get(key, 0) + g.layers
    return out


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # full_attention_interval 4 over 48 layers.
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", {"gdn": 36, "full": 12}),
        # layer_types: "attention" at 5, 15, 25, 35.
        ("ibm-granite/granite-4.0-h-tiny", {"mamba2": 36, "full": 4}),
        ("ibm-granite/granite-4.0-h-small", {"mamba2": 36, "full": 4}),
        # Falcon-H1: attention and Mamba2 side by side in all 44 layers.
        ("tiiuae/Falcon-H1-7B-Instruct", {"full": 44, "mamba2": 44}),
        # hybrid_override_pattern: 27 "M", 4 "*", the rest MLP ("-").
        ("nvidia/NVIDIA-Nemotron-Nano-9B-v2", {"mamba2": 27, "full": 4}),
        # attn_layer_period 8, offset 4 over 32 layers.
        ("ai21labs/AI21-Jamba-Mini-1.6", {"mamba1": 28, "full": 4}),
        # linear_attn_config: 20 kda_layers, 7 full_attn_layers (1-based).
        ("moonshotai/Kimi-Linear-48B-A3B-Instruct", {"kda": 20, "mla": 7}),
        # layer_types: 22 "conv", 8 "full_attention".
        ("LiquidAI/LFM2-2.6B", {"short_conv": 22, "full": 8}),
        # Qwen3.5 architecture (text_config layer_types): 3 linear_attention, 1 full, repeated.
        ("Qwen/Qwen3.6-27B", {"gdn": 48, "full": 16}),
        ("Qwen/Qwen3.6-35B-A3B", {"gdn": 30, "full": 10}),
    ],
)
def test_published_configs_layer_mix(model: str, expected: dict[str, int]) -> None:
    assert _counts(HYBRID[model]) == expected


def test_every_spelling_of_the_same_jamba_layout() -> None:
    jamba = HYBRID["ai21labs/AI21-Jamba-Mini-1.6"]
    period = {k: v for k, v in jamba.items() if not k.startswith("attn_layer")}
    attn = [i for i in range(32) if i % 8 == 4]
    forms = [
        jamba,
        {**period, "attn_layer_indices": attn},
        {**period, "layers_block_type": ["attention" if i in attn else "mamba" for i in range(32)]},
        # transformers 5's JambaConfig.layer_types
        {
            **period,
            "layer_types": [
                "full_attention" if i in attn else "linear_attention" for i in range(32)
            ],
        },
    ]
    shapes = [shape_from_config(f) for f in forms]
    assert all(s.layers == shapes[0].layers for s in shapes)
    assert isinstance(shapes[0].layers[0], Mamba1Spec)


def test_nemotron_pattern_and_layers_block_type_agree() -> None:
    nemo = HYBRID["nvidia/NVIDIA-Nemotron-Nano-9B-v2"]
    table = {"M": "mamba", "*": "attention", "-": "mlp"}
    words = [table[c] for c in nemo["hybrid_override_pattern"]]
    other = {k: v for k, v in nemo.items() if k != "hybrid_override_pattern"}
    a = shape_from_config(nemo)
    b = shape_from_config({**other, "layers_block_type": words})
    assert a.layers == b.layers
    # NemotronH keeps its SSM state in fp32 unless the config says otherwise.
    state = next(s for s in a.layers if isinstance(s, Mamba2Spec))
    assert state.ssm_dtype == "fp32"


def test_qwen3_5_recurrent_state_is_float32() -> None:
    # vLLM 0.33 Qwen3_5ForConditionalGenerationConfig sets mamba_ssm_cache_dtype from the
    # text config's mamba_ssm_dtype ("float32"); gated_delta_net_state_dtype keeps the conv in
    # the model dtype. Qwen3.6-27B: conv (3, 2·16·128 + 48·128) bf16, recurrent (48, 128, 128)
    # fp32 = 61,440 + 3,145,728 (the 0.33 oracle's MambaSpec.real_page_size_bytes).
    for config in (HYBRID["Qwen/Qwen3.6-27B"], HYBRID["Qwen/Qwen3.6-27B"]["text_config"]):
        shape = shape_from_config(config)
        gdn = next(s for s in shape.layers if isinstance(s, GatedDeltaNetSpec))
        assert gdn.ssm_dtype == "fp32"
        assert gdn.bind(model_dtype="bf16").state_bytes == 3_207_168
    # Qwen3-Next has no such field: its recurrent state is in the model dtype.
    qwen = shape_from_config(HYBRID["Qwen/Qwen3-Next-80B-A3B-Instruct"])
    assert next(s for s in qwen.layers if isinstance(s, GatedDeltaNetSpec)).ssm_dtype == "model"
    bad = {**HYBRID["Qwen/Qwen3.6-27B"]["text_config"], "mamba_ssm_dtype": "fp8"}
    with pytest.raises(ModelConfigError) as err:
        shape_from_config(bad)
    assert err.value.problems[0].loc == ("model", "mamba_ssm_dtype")


def test_state_bytes_follow_vllms_shape_calculator() -> None:
    # gated_delta_net_state_shape: conv (kernel − 1, 2·16·128 + 32·128) = (3, 8192), recurrent
    # (32, 128, 128), bf16: 3·8192·2 + 32·128·128·2 = 49,152 + 1,048,576.
    qwen = shape_from_config(HYBRID["Qwen/Qwen3-Next-80B-A3B-Instruct"])
    gdn = next(s for s in qwen.layers if isinstance(s, GatedDeltaNetSpec))
    assert gdn.bind(model_dtype="bf16").state_bytes == 1_097_728
    # kda_state_shape at TP 2: conv (3, 3·32·128 / 2), recurrent (16, 128, 128) in fp32.
    kimi = shape_from_config(HYBRID["moonshotai/Kimi-Linear-48B-A3B-Instruct"])
    kda = next(s for s in kimi.layers if isinstance(s, KimiDeltaSpec))
    assert kda.on_rank(2, 1) != kda
    ranked = kda.on_rank(2, 1)
    assert isinstance(ranked, StateSpec)
    assert ranked.bind(model_dtype="bf16").state_bytes == 3 * 6144 * 2 + 16 * 128 * 128 * 4
    # mamba2_state_shape with n_groups 1 at TP 4: the group is replicated to 4.
    granite = shape_from_config(HYBRID["ibm-granite/granite-4.0-h-tiny"])
    m2 = next(s for s in granite.layers if isinstance(s, Mamba2Spec)).on_rank(4, 1)
    assert isinstance(m2, StateSpec)
    conv = 3 * (3072 + 2 * 4 * 128) // 4
    assert m2.bind(model_dtype="bf16").state_bytes == (conv + 12 * 64 * 128) * 2
    # Speculative tokens widen the conv window by one column each.
    wide = m2.bind(model_dtype="bf16", num_spec=2).state_bytes
    assert wide - m2.bind(model_dtype="bf16").state_bytes == 2 * (3072 + 2 * 4 * 128) // 4 * 2


def _plan(model: dict[str, Any], **kw: Any) -> Any:
    body = {"model": model, "kv_budget_bytes": 10 << 30, "context_tokens": 32768, **kw}
    return plan(PlanRequest.model_validate(body))


def test_vllm_raises_the_block_and_pads_the_state_page() -> None:
    # Kimi-Linear TP 2, bf16: state 1,085,440 B; MLA token 1,152 B; alignment 128 (MLA hybrid)
    # → 128 · cdiv(1,085,440, 128 · 1,152) = 1,024 tokens, overriding --block-size 16.
    p = _plan(HYBRID["moonshotai/Kimi-Linear-48B-A3B-Instruct"], tensor_parallel_size=2,
              block_size=16)  # fmt: skip
    assert p.block_size == 1024
    assert p.capacity is not None
    kinds = {g.kind for g in p.capacity.kv_groups}
    assert kinds == {"mamba", "mla"}
    # align mode (prefix caching on by default): 2 blocks per KDA group (KDA has no checkpoint).
    assert {g.blocks_per_request for g in p.capacity.kv_groups if g.kind == "mamba"} == {2}
    off = _plan(HYBRID["moonshotai/Kimi-Linear-48B-A3B-Instruct"], tensor_parallel_size=2,
                enable_prefix_caching=False)  # fmt: skip
    assert off.capacity is not None
    assert {g.blocks_per_request for g in off.capacity.kv_groups if g.kind == "mamba"} == {1}
    # mamba_block_size = max_model_len without prefix caching.
    assert {g.block_size for g in off.capacity.kv_groups if g.kind == "mamba"} == {32768}
    codes = {n.code for n in p.notes_detail}
    assert {"block.vllm_hybrid_raised", "state.vllm_mode"} <= codes


@pytest.mark.parametrize(
    ("model", "spec", "prefix_caching", "expected"),
    [
        # vLLM 0.33 (the hybrid oracle's harness, 40 GiB, 32,768 tokens, mnbt 8,192, async):
        # Qwen3-Next with one MTP token: the MTP layer joins the 12 attention layers (13; the
        # state groups get one padding layer), conv rows 3 + 1, 2 + 1 + 1 GDN blocks.
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", {"method": "mtp", "num_speculative_tokens": 1},
         None, (576, 2800, 40.58, 13, 4)),
        # vLLM's older method name is the same draft.
        ("Qwen/Qwen3-Next-80B-A3B-Instruct",
         {"method": "qwen3_next_mtp", "num_speculative_tokens": 1}, None,
         (576, 2800, 40.58, 13, 4)),
        # Qwen3.6-27B, 3 MTP tokens, prefix caching off: 1 + 3 state blocks.
        ("Qwen/Qwen3.6-27B", {"method": "mtp", "num_speculative_tokens": 3}, False,
         (800, 771, 14.55, 17, 4)),
    ],
)  # fmt: skip
def test_mtp_drafts_on_gated_delta_net_hybrids(
    model: str, spec: dict[str, Any], prefix_caching: bool | None, expected: tuple[Any, ...]
) -> None:
    body: dict[str, Any] = {"kv_budget_bytes": 40 << 30, "max_num_batched_tokens": 8192}
    if prefix_caching is not None:
        body["enable_prefix_caching"] = prefix_caching
    p = _plan(HYBRID[model], speculative_config=spec, **body)
    cap = p.capacity
    assert cap is not None and p.model.draft is not None
    full = next(g for g in cap.kv_groups if g.kind == "full")
    state = next(g for g in cap.kv_groups if g.kind == "mamba")
    got = (p.block_size, cap.num_blocks, cap.engine_reported_concurrency, full.layers)
    assert (*got, state.blocks_per_request) == expected
    assert p.model.draft.kv_layers == 1


def test_model_output_names_the_mixers() -> None:
    p = _plan(HYBRID["Qwen/Qwen3-Next-80B-A3B-Instruct"])
    state = [g for g in p.model.groups if g.kind == "mamba"]
    assert [g.mixer for g in state] == ["gdn"] and state[0].layers == 36
    assert state[0].state_bytes_per_request == 1_097_728
    assert "state layers hold 36 × 1,097,728 B per request" in p.kv_bytes_per_token_formula


@pytest.mark.parametrize(
    ("config", "loc", "words"),
    [
        (
            {**HYBRID["ibm-granite/granite-4.0-h-tiny"],
             "layer_types": ["mamba"] * 3 + ["retention"] + ["attention"] * 36},
            ("model", "layer_types", 3),
            ("'retention'", "layer 3"),
        ),
        (
            {**HYBRID["nvidia/NVIDIA-Nemotron-Nano-9B-v2"],
             "hybrid_override_pattern": "M-M?" + "M-" * 26},
            ("model", "hybrid_override_pattern", 3),
            ("'?'", "layer 3"),
        ),
        (
            {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
             "hidden_size": 64, "layer_types": ["full_attention", "mamba"]},
            ("model", "layer_types", 1),
            ("'mamba'", "llama"),
        ),
    ],
)  # fmt: skip
def test_unknown_layer_type_is_refused_by_name_and_index(
    config: dict[str, Any], loc: tuple[Any, ...], words: tuple[str, ...]
) -> None:
    with pytest.raises(ModelConfigError) as err:
        shape_from_config(config)
    problem = err.value.problems[0]
    assert problem.loc == loc
    assert all(w in problem.msg for w in words), problem.msg


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"engine": "trtllm"}, "engine"),
        # 0.12 – 0.13: not yet checked against their own code (0.14 and newer are).
        ({"engine": "vllm", "engine_version": "0.12.0"}, "engine_version"),
        ({"pipeline_parallel_size": 2}, "pipeline_parallel_size"),
        ({"tensor_parallel_size": 16}, "tensor_parallel_size"),  # 12 attention heads
    ],
)
def test_setups_kvplan_cannot_size_are_refused(kw: dict[str, Any], field: str) -> None:
    with pytest.raises(FieldError) as err:
        _plan(HYBRID["ibm-granite/granite-4.0-h-tiny"], **kw)
    assert err.value.problems[0].field == field


def test_vllm_0_16_refuses_async_scheduling_with_mamba_prefix_caching() -> None:
    # VllmConfig.__post_init__ of 0.16.0 alone (0.15.1 and 0.17.1 start; all three oracles).
    granite = HYBRID["ibm-granite/granite-4.0-h-tiny"]
    body = {"enable_prefix_caching": True, "async_scheduling": True}
    with pytest.raises(FieldError) as err:
        _plan(granite, engine_version="0.16.0", **body)
    assert err.value.problems[0].field == "async_scheduling"
    assert _plan(granite, engine_version="0.16.0", enable_prefix_caching=True).capacity
    for version in ("0.15.1", "0.17.1"):
        assert _plan(granite, engine_version=version, **body).capacity


def test_vllm_0_14_runs_speculation_on_state_layers_for_qwen3_next_only() -> None:
    # MambaBase.get_kv_cache_spec of 0.14.1: "Mamba with speculative decoding is not supported
    # yet" for any speculative config unless the model is qwen3_next (0.15.1 drops the check).
    granite = HYBRID["ibm-granite/granite-4.0-h-tiny"]
    body = {"speculative_config": {"method": "ngram", "num_speculative_tokens": 2}}
    with pytest.raises(FieldError) as err:
        _plan(granite, engine_version="0.14.1", async_scheduling=False, **body)
    assert err.value.problems[0].field == "speculative_config.method"
    assert _plan(granite, engine_version="0.15.1", async_scheduling=False, **body).capacity


def test_sglang_plans_mamba2_and_refuses_short_convolutions() -> None:
    # SGLang's state pool is checked against its own code for Mamba2 / GDN / KDA hybrids
    # (tests/oracle/fixtures/sglang/0.5.23/sglang_hybrid.json); LFM2's short convolutions are
    # not, so they stay refused.
    cap = _plan(HYBRID["ibm-granite/granite-4.0-h-tiny"], engine="sglang").capacity
    assert cap is not None and cap.state_pool_slots and cap.state_bytes_per_slot
    with pytest.raises(FieldError) as err:
        _plan(HYBRID["LiquidAI/LFM2-2.6B"], engine="sglang")
    assert err.value.problems[0].field == "engine"


@pytest.mark.parametrize(
    "version",
    ["0.14.1", "0.15.1", "0.16.0", "0.17.1", "0.18.1", "0.19.1", "0.20.2", "0.21.0", "0.27.1"],
)
def test_vllm_0_14_to_0_27_hybrids_are_planned(version: str) -> None:
    # Each release's own sizing code agrees on the hybrid grid
    # (tests/oracle/fixtures/vllm/<release>/vllm_hybrid_sizing_0_*.json: 192/192 for each of
    # 0.14 – 0.20, 288/288 for 0.21, 368/368 for 0.27).
    assert _plan(HYBRID["Qwen/Qwen3-Next-80B-A3B-Instruct"], engine_version=version).capacity


def test_vllm_0_28_hybrids_are_planned() -> None:
    # 0.28.0's own sizing code gives 0.29's answers for every hybrid its transformers loads
    # (tests/oracle/fixtures/vllm/0.28.0/vllm_hybrid_sizing.json, 192/192).
    assert _plan(HYBRID["ibm-granite/granite-4.0-h-tiny"], engine_version="0.28.0").capacity


def test_vllm_0_27_mamba_prefix_caching_keeps_a_state_block_per_chunk() -> None:
    # vLLM 0.27.1 (MambaModelConfig, Platform._align_hybrid_block_size, MambaSpec): granite
    # declares Mamba prefix caching, so prefix caching picks mamba_cache_mode "all". State:
    # conv (4 − 1) × (3,072 + 2 × 128) + SSM 48 × 64 × 128, × 2 B = 806,400 B; an attention
    # token 2 × 4 × 128 × 2 B = 2,048 B → cdiv(806,400, 2,048) = 394 tokens, in whole chunks of
    # lcm(mamba_chunk_size 256, 16) → 512; then cdiv(8,192, 512) = 16 state blocks per group.
    # The 0.27.1 oracle gives the same (tests/oracle/fixtures/vllm/0.27.1, "all" cases).
    granite = HYBRID["ibm-granite/granite-4.0-h-tiny"]
    p = _plan(granite, engine_version="0.27.1", enable_prefix_caching=True, context_tokens=8192)
    assert p.block_size == 512
    assert p.capacity is not None
    assert {(g.kind, g.block_size, g.blocks_per_request) for g in p.capacity.kv_groups} == {
        ("mamba", 512, 16),
        ("full", 512, 16),
    }
    # Hybrids opt in to prefix caching before 0.28 (EngineArgs defaults: `not is_hybrid`):
    # mode "none", the block 16 × cdiv(806,400, 16 × 2,048) = 400, one state block per group.
    p = _plan(granite, engine_version="0.27.1", context_tokens=8192)
    assert p.block_size == 400
    assert p.capacity is not None
    assert {g.blocks_per_request for g in p.capacity.kv_groups if g.kind == "mamba"} == {1}


@pytest.mark.parametrize(("version", "state_bytes"), [("0.28.0", 8192), ("0.29.0", 16384)])
def test_short_conv_rows_grow_with_speculative_tokens_from_0_29(
    version: str, state_bytes: int
) -> None:
    # LFM2-2.6B (conv_dim 2,048, conv_L_cache 3, bf16), 2 speculative tokens: ShortConv's
    # get_state_shape passes num_spec to short_conv_state_shape from 0.29 (read in the 0.28.0
    # and 0.29.0 wheels): (3 − 1) × 2,048 × 2 B = 8,192 B before, (3 − 1 + 2) × … = 16,384 B.
    spec = {"method": "ngram", "num_speculative_tokens": 2}
    p = _plan(HYBRID["LiquidAI/LFM2-2.6B"], engine_version=version, speculative_config=spec)
    assert [g.state_bytes_per_request for g in p.model.groups if g.mixer] == [state_bytes]


def _qwen36_text() -> dict[str, Any]:
    wrapper = HYBRID["Qwen/Qwen3.6-27B"]
    return dict(wrapper["text_config"], architectures=["Qwen3_5ForCausalLM"])


@pytest.mark.parametrize(
    ("version", "text_only", "state_bytes"),
    [
        # conv 3 × (2 × 16 × 128 + 48 × 128) × 2 B = 61,440 B, recurrent 48 × 128 × 128 in the
        # config's float32 (3,145,728 B) or the model's bf16 (1,572,864 B).
        ("0.24.0", False, 3_207_168),
        # 0.21-0.24 look the Qwen3.5 config hook up by the config's own architecture, which a
        # text-only config (Qwen3_5ForCausalLM) lacks; 0.25 normalizes it first (read in the
        # 0.24.0 / 0.25.1 wheels' VllmConfig; the 0.24.0 and 0.25.1 oracles show the same).
        ("0.24.0", True, 1_634_304),
        ("0.25.1", True, 3_207_168),
    ],
)
def test_vllm_qwen3_5_text_only_state_dtype_by_release(
    version: str, text_only: bool, state_bytes: int
) -> None:
    model = _qwen36_text() if text_only else HYBRID["Qwen/Qwen3.6-27B"]
    p = _plan(model, engine_version=version)
    assert {g.state_bytes_per_request for g in p.model.groups if g.mixer} == {state_bytes}


def test_vllm_0_27_refuses_mtp_on_a_text_only_qwen3_5() -> None:
    # SpeculativeConfig.hf_config_override maps only qwen3_5 / qwen3_5_moe to an MTP draft
    # before 0.28 (qwen3_5_text from 0.28): vLLM 0.27.1 raises "Unsupported speculative method:
    # 'mtp'" (its oracle, tests/oracle/fixtures/vllm/0.27.1, text-only MTP cases).
    spec = {"method": "mtp", "num_speculative_tokens": 1}
    with pytest.raises(FieldError) as err:
        _plan(_qwen36_text(), engine_version="0.27.1", speculative_config=spec)
    assert err.value.problems[0].field == "speculative_config.method"
    assert _plan(_qwen36_text(), engine_version="0.28.0", speculative_config=spec).capacity
    assert _plan(HYBRID["Qwen/Qwen3.6-27B"], engine_version="0.27.1", speculative_config=spec)


def test_state_heads_tp_must_divide() -> None:
    # Attention heads allow TP 4; the gated delta net's 2 key heads do not (vLLM `divide`).
    cfg = {**HYBRID["Qwen/Qwen3-Next-80B-A3B-Instruct"], "linear_num_key_heads": 2,
           "num_key_value_heads": 4}  # fmt: skip
    with pytest.raises(FieldError) as err:
        _plan(cfg, tensor_parallel_size=4)
    problem = err.value.problems[0]
    assert problem.field == "tensor_parallel_size" and "linear_num_key_heads" in problem.msg


def test_granite_micro_as_published_is_dense() -> None:
    # granite-4.0-micro: the hybrid architecture with every layer "attention" (no state).
    cfg = {**HYBRID["ibm-granite/granite-4.0-h-tiny"], "layer_types": ["attention"] * 40}
    shape = shape_from_config(cfg)
    assert not shape.has_state and {g.spec.kind for g in shape.groups} == {"full"}


def test_plain_configs_take_no_hybrid_path() -> None:
    llama = {"model_type": "llama", "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 8, "hidden_size": 4096}  # fmt: skip
    shape = shape_from_config(llama)
    assert not shape.has_state and shape.attention_spec is shape.layers[0]


def test_vllm_011_switches_prefix_caching_off_for_hybrids() -> None:
    # 0.11 MambaModelConfig: "Hybrid or mamba-based model detected: disabling prefix caching".
    kimi = HYBRID["moonshotai/Kimi-Linear-48B-A3B-Instruct"]
    body = {"requests": [{"context_tokens": 8192, "count": 4, "prefix_tokens": 4096}]}
    old = _plan(kimi, engine_version="0.11", tensor_parallel_size=2, **body)
    new = _plan(kimi, engine_version="0.33", tensor_parallel_size=2, **body)
    assert old.totals.prefix_shared_bytes_saved == 0
    assert new.totals.prefix_shared_bytes_saved > 0


def test_vllm_011_has_no_qwen3_5_and_no_checked_gdn_drafts() -> None:
    # vLLM 0.11.0's wheel has no qwen3_5.py and its registry no Qwen3_5 architecture; MTP on a
    # gated-delta-net hybrid is sized as 0.33 does only.
    with pytest.raises(FieldError) as err:
        _plan(HYBRID["Qwen/Qwen3.6-27B"], engine_version="0.11")
    assert err.value.problems[0].field == "engine_version"
    with pytest.raises(FieldError) as err:
        _plan(HYBRID["Qwen/Qwen3-Next-80B-A3B-Instruct"], engine_version="0.11",
              speculative_config={"method": "mtp", "num_speculative_tokens": 1})  # fmt: skip
    assert err.value.problems[0].field == "speculative_config.method"
