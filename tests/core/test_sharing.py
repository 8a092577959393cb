"""KV sharing across layers (Gemma-3n) and DeepSeek-V3.2's indexer cache, as vLLM 0.33 sizes them.

Expected values are hand-computed from the published configs and vLLM's rules (gemma3n.py:
the last `num_kv_shared_layers` layers get `kv_sharing_target_layer_name` and no spec;
deepseek_v2.py: a 132 B/token uint8 indexer cache per layer, fp8 MLA as fp8_ds_mla 656 B), or are
the figures vLLM 0.33's own sizing code printed for the same deployment (tests/oracle)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.catalog import get_model
from planner.core.errors import FieldError
from planner.core.schema import PlanRequest
from planner.service import plan

DRAFT_MODELS = Path(__file__).resolve().parents[1] / "oracle" / "draft_models.json"


def _gemma3n(name: str = "google/gemma-3n-E2B-it") -> dict[str, Any]:
    models = json.loads(DRAFT_MODELS.read_text())["models"]
    return next(m["config"] for m in models if m["id"] == name)


def _plan(model: Any, **extra: Any) -> Any:
    body = {"model": model, "engine": "vllm", "kv_budget_bytes": round(51.63 * (1 << 30)),
            "context_tokens": 32768, "block_size": 16, **extra}  # fmt: skip
    return plan(PlanRequest.model_validate(body))


def test_gemma3n_shared_layers_keep_no_cache() -> None:
    p = _plan(_gemma3n())
    # 30 layers, the last 10 share: 20 keep K and V of 2 heads × 256 × 2 B = 2,048 B per token.
    assert p.model.kv_shared_layers == list(range(20, 30))
    assert p.kv_bytes_per_token == 20 * 2 * 2 * 256 * 2 == 40960
    assert sum(g.layers for g in p.model.groups) == 20
    assert any(n.startswith("10 of 30 layers read an earlier layer") for n in p.notes)


def test_gemma3n_capacity_matches_vllm() -> None:
    # vLLM 0.33 (tests/oracle/vllm_draft_sizing.py), async scheduling, 51.63 GiB, 32k context:
    # 4 sliding groups + 1 full group of 4 layers, 422,952 blocks, 67.39x.
    cap = _plan(_gemma3n()).capacity
    assert cap is not None
    assert cap.num_blocks == 422952
    assert sorted((g.kind, g.layers, g.blocks_per_request) for g in cap.kv_groups) == [
        ("full", 4, 2048),
        *[("sliding", 4, 1057)] * 4,
    ]
    assert cap.engine_reported_concurrency == 67.39
    assert cap.engine_reported_tokens == 2208300


def test_gemma3n_transformers_sizes_the_same_layers() -> None:
    p = plan(PlanRequest.model_validate(
        {"model": _gemma3n(), "engine": "transformers", "requests": [{"context_tokens": 1000}]}
    ))  # fmt: skip
    # 16 sliding layers keep W − 1 = 511 tokens, 4 full layers 1,000; 2,048 B per layer-token.
    assert p.requests[0].kv_bytes == (16 * 511 + 4 * 1000) * 2048


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_engines_without_sharing_rules_refuse(engine: str) -> None:
    with pytest.raises(FieldError) as exc:
        plan(PlanRequest.model_validate(
            {"model": _gemma3n(), "engine": engine, "kv_budget_bytes": 1 << 34,
             "context_tokens": 8192}
        ))  # fmt: skip
    assert exc.value.problems[0].field == "model.num_kv_shared_layers"


def test_vllm_runs_gemma3n_without_pipeline_parallelism() -> None:
    with pytest.raises(FieldError) as exc:
        _plan(_gemma3n(), pipeline_parallel_size=2)
    assert exc.value.problems[0].field == "pipeline_parallel_size"


def test_sharing_on_an_unknown_model_type_is_refused() -> None:
    cfg = {**dict(get_model("meta-llama/Llama-3.1-8B").config), "num_kv_shared_layers": 4}
    with pytest.raises(FieldError) as exc:
        _plan(cfg)
    assert exc.value.problems[0].field == "model.num_kv_shared_layers"
    assert "llama" in exc.value.problems[0].msg


def _v32(**over: Any) -> dict[str, Any]:
    cfg = dict(get_model("deepseek-ai/DeepSeek-V3").config)
    cfg.update(model_type="deepseek_v32", architectures=["DeepseekV32ForCausalLM"],
               index_head_dim=128, index_n_heads=64, index_topk=2048, **over)  # fmt: skip
    return cfg


@pytest.mark.parametrize(
    ("kv_dtype", "mla_bytes"), [("auto", (512 + 64) * 2), ("fp8", 656)], ids=["bf16", "fp8"]
)
def test_deepseek_v32_indexer_joins_the_mla_group(kv_dtype: str, mla_bytes: int) -> None:
    p = _plan(_v32(), kv_cache_dtype=kv_dtype, block_size=None, tensor_parallel_size=8)
    # 61 layers × (MLA latent + 128 fp8 indexer values + one fp32 scale)
    assert p.kv_bytes_per_token == 61 * (mla_bytes + 132)
    assert p.block_size == 64  # FlashMLA-sparse's only block size on Hopper
    cap = p.capacity
    assert cap is not None
    # One group (UniformTypeKVCacheSpecs): a block id costs 61 MLA pages + 61 indexer pages.
    assert [(g.kind, g.layers) for g in cap.kv_groups] == [("mla", 122)]
    assert cap.num_blocks == round(51.63 * (1 << 30)) // (64 * 61 * (mla_bytes + 132))


def test_deepseek_v32_refuses_blocks_sparse_mla_cannot_use() -> None:
    with pytest.raises(FieldError) as exc:
        _plan(_v32(), block_size=16)
    assert exc.value.problems[0].field == "block_size"


@pytest.mark.parametrize(("model_type", "field"), [
    ("deepseek_v4", "model.model_type"), ("whisper", "model.model_type"),
])  # fmt: skip
def test_caches_kvplan_does_not_size_are_refused(model_type: str, field: str) -> None:
    cfg = {**dict(get_model("meta-llama/Llama-3.1-8B").config), "model_type": model_type}
    with pytest.raises(FieldError) as exc:
        _plan(cfg)
    assert exc.value.problems[0].field == field
    assert model_type in exc.value.problems[0].msg


def test_static_sinks_and_sliding_window_mla_are_refused() -> None:
    llama = dict(get_model("meta-llama/Llama-3.1-8B").config)
    with pytest.raises(FieldError) as exc:
        _plan({**llama, "param_sink_number": 128})
    assert exc.value.problems[0].field == "model.param_sink_number"
    deepseek = dict(get_model("deepseek-ai/DeepSeek-V3").config)
    with pytest.raises(FieldError) as exc:
        _plan({**deepseek, "interleaved_sliding_window": 4096})
    assert exc.value.problems[0].field == "model.interleaved_sliding_window"


def test_gpt_oss_sinks_do_not_change_sizing() -> None:
    # gpt-oss's attention sinks are learned per-head logits: the cache is K and V only,
    # 24 layers × 8 KV heads × (64 + 64) × 2 B.
    p = _plan("openai/gpt-oss-20b")
    assert p.kv_bytes_per_token == 24 * 8 * 128 * 2
