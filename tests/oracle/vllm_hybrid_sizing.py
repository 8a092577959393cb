"""vLLM's own sizing of hybrid (state + attention) models, run on CPU: the oracle for
tests/oracle/test_vllm_oracle_hybrid.py.

Runs INSIDE the oracle virtualenv, never in the service's. Usage:
`python vllm_hybrid_sizing.py IN.json OUT.json` with the same case format as vllm_sizing.py plus
`enable_prefix_caching` and an optional `speculative_config` ({method, num_speculative_tokens}:
an MTP draft of the target's own layers).

What is vLLM's code and what is ours:
- vLLM's: `EngineArgs(...).create_engine_config()` (MambaModelConfig sets mamba_cache_mode and
  mamba_block_size, NemotronH its SSM dtype), the layer classes' own `get_state_shape`,
  `get_state_dtype` and `get_kv_cache_spec` (MambaMixer2, MambaMixer, the GDN and KDA layers,
  Attention, MLAAttention), the platform's `update_block_size_for_backend` (the block-size
  raise, `_align_hybrid_block_size`, the state page padding), the model classes'
  `get_mamba_state_shape_from_config`, and the engine-core flow of vllm_sizing.py.
- Ours (no GPU): the layer objects are made without their constructors, given the attributes
  the model file's constructor sets, and registered in the static forward context as their
  constructors do; tensor-parallel size is answered from the config; GDN layers get the
  checkpoint alignment their constructor sets on SM90 (FlashInfer prefill: 64 in align mode).
  An MTP draft's layers are the MTP model file's (qwen3_next_mtp.py / qwen3_5_mtp.py: its
  `num_mtp_layers` full-attention decoder layers, shaped like the target's), marked `is_draft`
  as `speculator.load_model` does.
- Qwen3.5's model file imports Qwen3-VL's image processors, which need torchvision (see the
  torchvision shim in vllm_sizing.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import traceback
from dataclasses import replace
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
import vllm
import vllm_sizing as base
from vllm.config import set_current_vllm_config
from vllm.model_executor.layers.mamba import mamba_mixer, mamba_mixer2, short_conv
from vllm.model_executor.layers.mamba.gdn import base as gdn_base
from vllm.model_executor.layers.mamba.gdn.kimi_gdn_linear_attn import (
    KimiGatedDeltaNetAttention,
)
from vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn import (
    QwenGatedDeltaNetAttention,
)
from vllm.platforms.interface import Platform
from vllm.utils.math_utils import cdiv
from vllm.v1.core.kv_cache_utils import (
    generate_scheduler_kv_cache_config,
    get_kv_cache_capacity,
)
from vllm.v1.kv_cache_interface import MambaSpec

try:  # 0.33: GDN layers export prefill checkpoints with FlashInfer's prefill (SM90)
    from vllm.v1.attention.backends.gdn_attn import FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
except ImportError:  # 0.32 and older: no GDN prefill checkpoints
    FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = None

_TP = {"size": 1}


def _tp() -> int:
    return _TP["size"]


# The layers ask the distributed state for the TP size (no process group here).
for _mod in (mamba_mixer, mamba_mixer2, short_conv):
    _mod.get_tensor_model_parallel_world_size = _tp  # type: ignore[attr-defined]


def _kind(spec: Any) -> str:
    return "mamba" if isinstance(spec, MambaSpec) else base._kind_of(spec)


def _slots(hf: Any) -> list[list[str]]:
    """Per decoder layer, what the model file builds (its own selection logic)."""
    mtype = hf.model_type
    n = hf.num_hidden_layers
    if mtype == "falcon_h1":
        return [["attn", "mamba2"] for _ in range(n)]
    if mtype == "nemotron_h":
        pattern = getattr(hf, "hybrid_override_pattern", None)
        if pattern is None:  # transformers 5 NemotronHConfig keeps it as layers_block_type
            words = hf.layers_block_type
            table = {"mamba": "mamba2", "attention": "attn"}
            return [[table[w]] if w in table else [] for w in words]
        table = {"M": "mamba2", "*": "attn"}
        return [[table[c]] if c in table else [] for c in pattern]
    if mtype == "granitemoehybrid":
        return [
            ["mamba2"] if t in ("mamba", "linear_attention") else ["attn"] for t in hf.layer_types
        ]
    if mtype == "jamba":
        return [["mamba1"] if t == "mamba" else ["attn"] for t in hf.layers_block_type]
    if mtype in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
        return [["gdn"] if t == "linear_attention" else ["attn"] for t in hf.layer_types]
    if mtype == "lfm2":
        return [["attn"] if t == "full_attention" else ["short_conv"] for t in hf.layer_types]
    if mtype == "kimi_linear":
        return [["kda"] if hf.is_kda_layer(i) else ["mla"] for i in range(n)]
    raise ValueError(f"harness: no layer plan for {mtype}")


def _mamba_layer(kind: str, cfg: Any, prefix: str) -> Any:
    hf = cfg.model_config.hf_text_config
    mc, cc = cfg.model_config, cfg.cache_config
    if kind == "mamba2":
        obj = mamba_mixer2.MambaMixer2.__new__(mamba_mixer2.MambaMixer2)
        if hf.model_type == "nemotron_h":
            inter = hf.mamba_num_heads * hf.mamba_head_dim
            obj.n_groups, obj.num_heads, obj.head_dim = (
                hf.n_groups,
                hf.mamba_num_heads,
                hf.mamba_head_dim,
            )
            obj.ssm_state_size, obj.conv_kernel_size = hf.ssm_state_size, hf.conv_kernel
        else:
            if hf.model_type == "falcon_h1" and hf.mamba_d_ssm is not None:
                inter = hf.mamba_d_ssm
            else:
                inter = int(hf.mamba_expand * hf.hidden_size)
            obj.n_groups, obj.num_heads, obj.head_dim = (
                hf.mamba_n_groups,
                hf.mamba_n_heads,
                hf.mamba_d_head,
            )
            obj.ssm_state_size, obj.conv_kernel_size = hf.mamba_d_state, hf.mamba_d_conv
        obj.intermediate_size = inter
        obj.use_replayssm = False
        obj.num_spec = cfg.num_speculative_tokens
        obj.mamba_config = cfg.mamba_config
    elif kind == "mamba1":
        obj = mamba_mixer.MambaMixer.__new__(mamba_mixer.MambaMixer)
        obj.intermediate_size = hf.mamba_expand * hf.hidden_size
        obj.ssm_state_size, obj.conv_kernel_size = hf.mamba_d_state, hf.mamba_d_conv
    elif kind == "gdn":
        obj = QwenGatedDeltaNetAttention.__new__(QwenGatedDeltaNetAttention)
        obj.num_k_heads, obj.num_v_heads = hf.linear_num_key_heads, hf.linear_num_value_heads
        obj.head_k_dim, obj.head_v_dim = hf.linear_key_head_dim, hf.linear_value_head_dim
        obj.conv_kernel_size = hf.linear_conv_kernel_dim
        obj.vllm_config = cfg
        # The constructor on SM90 (FlashInfer GDN prefill) in align mode.
        obj._checkpoint_alignment = (
            FLASHINFER_GDN_CHECKPOINT_ALIGNMENT if cc.mamba_cache_mode == "align" else None
        )  # read by 0.33's layers only
    elif kind == "kda":
        obj = KimiGatedDeltaNetAttention.__new__(KimiGatedDeltaNetAttention)
        lac = hf.linear_attn_config
        obj.num_heads, obj.head_dim = lac["num_heads"], lac["head_dim"]
        obj.conv_size = lac["short_conv_kernel_size"]
    elif kind == "short_conv":
        obj = short_conv.ShortConv.__new__(short_conv.ShortConv)
        obj.conv_dim, obj.L_cache = hf.conv_dim, hf.conv_L_cache
        obj.num_spec = cfg.num_speculative_tokens
    else:
        raise ValueError(kind)
    if isinstance(obj, gdn_base.GatedDeltaNetAttention):
        obj.tp_size = _tp()
        obj.num_spec = cfg.num_speculative_tokens
        obj.speculative_config = cfg.speculative_config
    obj.model_config, obj.cache_config = mc, cc
    obj.prefix = prefix
    return obj


def _attn_layer(cfg: Any, tp: int, backend: Any, is_mla: bool) -> Any:
    mc = cfg.model_config
    hf = mc.hf_text_config
    if is_mla:
        layer = {"cls": "mla", "num_heads": hf.num_attention_heads // tp}
        layer["head_size"] = mc.get_head_size()
        return base._make_layer(cfg, layer, backend)
    total = mc.get_total_num_kv_heads()
    layer = {
        "cls": "attn",
        "num_heads": hf.num_attention_heads // tp,
        "kv_heads": max(1, total // tp),
        "head_size": mc.get_head_size(),
        "sliding_window": None,
    }
    return base._make_layer(cfg, layer, backend)


def _draft_attention_layers(cfg: Any) -> int:
    """How many decoder layers the MTP model file builds: qwen3_next_mtp.py reads
    num_nextn_predict_layers, qwen3_5_mtp.py mtp_num_hidden_layers (1 when absent)."""
    sc = cfg.speculative_config
    if sc is None or sc.draft_model_config is None:
        return 0
    if sc.method != "mtp":
        raise RuntimeError(f"harness: only MTP drafts are built for hybrids, not {sc.method}")
    hf = sc.draft_model_config.hf_text_config
    if sc.draft_model_config.hf_config.model_type == "qwen3_5_mtp":
        return int(getattr(hf, "mtp_num_hidden_layers", 1))
    return int(getattr(hf, "num_nextn_predict_layers", 1))


def _one(c: dict[str, Any], root: str) -> dict[str, Any]:
    out: dict[str, Any] = {"id": c["id"], "accepted": False, "stage": None, "error": None}
    arch = (c["config"].get("architectures") or [""])[0]
    if arch.startswith("Qwen3_5") and importlib.util.find_spec("torchvision") is None:
        raise RuntimeError("Qwen3.5's model file needs torchvision in the oracle virtualenv")
    try:
        kw: dict[str, Any] = {}
        if c.get("enable_prefix_caching") is not None:
            kw["enable_prefix_caching"] = c["enable_prefix_caching"]
        spec = c.get("speculative_config")
        if spec is not None:
            kw["speculative_config"] = {
                "method": spec["method"],
                "num_speculative_tokens": spec["num_speculative_tokens"],
            }
        cfg = _engine_config(c, base._model_dir(c["config"], root), kw)
    except Exception as e:
        base.raise_if_harness_error(e)
        out.update(stage="config", error=f"{type(e).__name__}: {e}"[:2000])
        return out
    mc, cc, pc = cfg.model_config, cfg.cache_config, cfg.parallel_config
    tp = pc.tensor_parallel_size
    _TP["size"] = tp
    out.update(
        max_model_len=mc.max_model_len,
        model_max_len=base._model_max_len(cfg),
        mamba_cache_mode=cc.mamba_cache_mode,
        enable_prefix_caching=cc.enable_prefix_caching,
        mamba_ssm_cache_dtype=cc.mamba_ssm_cache_dtype,
        num_speculative_tokens=cfg.num_speculative_tokens,
        num_lookahead_tokens=cfg.num_lookahead_tokens,
    )
    hf = mc.hf_text_config
    slots = _slots(hf)
    is_mla = bool(mc.use_mla)
    user_bs = cc.block_size if cc.user_specified_block_size else None
    try:
        attn_backend = base._select_backend(
            use_mla=is_mla,
            kv_cache_dtype=cc.cache_dtype,
            dtype=mc.dtype,
            head_size=mc.get_head_size(),
            block_size=user_bs,
            num_heads=hf.num_attention_heads // tp,
            has_sink=False,
        )
    except Exception as e:
        out.update(stage="backend", error=f"{type(e).__name__}: {e}"[:2000])
        return out
    ctx = cfg.compilation_config.static_forward_context
    ctx.clear()
    names: list[str] = []
    try:
        with set_current_vllm_config(cfg):
            for i, per in enumerate(slots):
                for kind in per:
                    if kind in ("attn", "mla"):
                        name = f"model.layers.{i}.self_attn.attn"
                        obj = _attn_layer(cfg, tp, attn_backend, kind == "mla")
                    else:
                        name = f"model.layers.{i}.mixer"
                        obj = _mamba_layer(kind, cfg, name)
                    ctx[name] = obj
                    names.append(name)
            # The drafter's decoder layers, after the target's (is_draft set on their specs).
            drafts = []
            for j in range(_draft_attention_layers(cfg)):
                name = f"mtp.layers.{len(slots) + j}.self_attn.attn"
                ctx[name] = _attn_layer(cfg, tp, attn_backend, is_mla)
                names.append(name)
                drafts.append(name)
            out["draft_layers"] = len(drafts)
            # After load: the real block-size choice and hybrid alignment.
            Platform.update_block_size_for_backend(cfg)
            cfg.validate_block_size()
            specs = {n: ctx[n].get_kv_cache_spec(cfg) for n in names}
            for n in drafts:
                specs[n] = replace(specs[n], is_draft=True)
    except (AssertionError, ValueError, ZeroDivisionError) as e:
        out.update(stage="model", error=f"{type(e).__name__}: {e}"[:2000])
        return out
    out["block_size"] = cc.block_size
    out["mamba_block_size"] = cc.mamba_block_size
    mamba = [s for s in specs.values() if isinstance(s, MambaSpec)]
    attn = [s for s in specs.values() if not isinstance(s, MambaSpec)]
    # The unpadded state page (real_page_size_bytes: 0.30+; reported, not compared).
    out["state_bytes"] = getattr(mamba[0], "real_page_size_bytes", None) if mamba else None
    out["page_bytes_per_layer"] = attn[0].page_size_bytes
    out["kv_heads_per_rank"] = getattr(attn[0], "num_kv_heads", None)
    budget = c["kv_budget_bytes"]
    try:
        if base.resolve_kv_cache_layout is not None:
            # EngineCore._initialize_kv_caches: the layout is resolved before grouping.
            layouts = [x.name for x in base.get_supported_kv_cache_layouts([attn_backend])]
            base.resolve_kv_cache_layout(cfg, [layouts], list(specs.values()))
        plan = base._plan_kv_cache if base.PLANNING_API else base._plan_kv_cache_in_one_call
        configs = plan(cfg, [specs], [budget], int(c["longest_search_cap"]), out)
    except Exception as e:
        out.update(stage="kv_cache", error=f"{type(e).__name__}: {e}"[:2000])
        return out
    sched = generate_scheduler_kv_cache_config(configs)
    tokens, concurrency = get_kv_cache_capacity(cfg, sched)
    per_group = [
        cdiv(g.kv_cache_spec.max_memory_usage_bytes(cfg), g.kv_cache_spec.page_size_bytes)
        for g in sched.kv_cache_groups
    ]
    groups_out = []
    for g, need in zip(sched.kv_cache_groups, per_group, strict=True):
        row = base._groups_out([g])[0]
        row["kind"] = _kind(g.kv_cache_spec)
        row["blocks_per_request"] = need
        groups_out.append(row)
    size = max(len(g.layer_names) for g in sched.kv_cache_groups)
    for g, row in zip(sched.kv_cache_groups, groups_out, strict=True):
        row["padding_layers"] = size - len(g.layer_names)
    out["groups"] = groups_out
    bpr = sum(per_group)
    out.update(
        accepted=True,
        num_blocks=sched.num_blocks,
        blocks_per_request=bpr,
        resident_requests=(sched.num_blocks - 1) // bpr,
        logged_tokens=tokens,
        logged_concurrency=round(concurrency, 2),
    )
    return out


def _engine_config(c: dict[str, Any], model_dir: str, extra: dict[str, Any]) -> Any:
    kw: dict[str, Any] = dict(
        model=model_dir,
        skip_tokenizer_init=True,
        trust_remote_code=False,
        tensor_parallel_size=c["tensor_parallel_size"],
        pipeline_parallel_size=1,
        kv_cache_dtype=c["kv_cache_dtype"],
        dtype=c["dtype"],
        max_model_len=c["context_tokens"],
        kv_cache_memory_bytes=c["kv_budget_bytes"],
        max_num_batched_tokens=c["max_num_batched_tokens"],
        async_scheduling=c["async_scheduling"],
        **extra,
    )
    if c.get("block_size") is not None:
        kw["block_size"] = c["block_size"]
    from vllm.engine.arg_utils import EngineArgs

    return EngineArgs(**kw).create_engine_config()


def main() -> int:
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        configs = json.load(f)
    results = []
    with tempfile.TemporaryDirectory(prefix="vllm-oracle-hybrid-") as root:
        for c in configs:
            try:
                results.append(_one(c, root))
            except Exception:  # a harness bug, not a vLLM refusal: say so loudly
                results.append(
                    {
                        "id": c["id"],
                        "accepted": False,
                        "stage": "harness",
                        "error": traceback.format_exc()[-3000:],
                    }
                )
    meta = {"vllm_version": vllm.__version__, "torch": torch.__version__}
    with open(dst, "w") as f:
        json.dump({"meta": meta, "results": results}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
