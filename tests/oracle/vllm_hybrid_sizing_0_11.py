"""vLLM 0.11's own sizing of hybrid (state + attention) models, run on CPU: the older-release
hybrid oracle (see vllm_hybrid_sizing.py; same input and output).

What is vLLM's code and what is ours:
- vLLM's: `create_engine_config()` (0.11's HybridAttentionMambaModelConfig: prefix caching off,
  the attention block raised to cover the state page, the state page padded), the layer
  classes' own `get_state_shape` / `get_state_dtype` (MambaMixer2, MambaMixer,
  Qwen3NextGatedDeltaNet), the model runner's `GPUModelRunner.get_kv_cache_spec`, and the
  engine-core flow of vllm_sizing_0_11.py (logged lines captured as logged).
- Ours (no GPU): layer objects made without their constructors, with the attributes those set;
  tensor-parallel size answered from the config.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import traceback
import types
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# isort: off
import vllm_sizing_0_11 as base  # its platform stubs run on import, before vLLM's own

import torch
import vllm
from vllm.attention import Attention, AttentionType
from vllm.engine.arg_utils import EngineArgs
from vllm.model_executor.layers.mamba import mamba_mixer, mamba_mixer2
from vllm.utils import cdiv
from vllm.v1.core import kv_cache_utils as kvu
from vllm.v1.kv_cache_interface import MambaSpec
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

# isort: on

_TP = {"size": 1}
for _mod in (mamba_mixer, mamba_mixer2):
    _mod.get_tensor_model_parallel_world_size = lambda: _TP["size"]  # type: ignore[attr-defined]


def _slots(hf: Any) -> list[list[str]]:
    mtype, n = hf.model_type, hf.num_hidden_layers
    if mtype == "falcon_h1":
        return [["attn", "mamba2"] for _ in range(n)]
    if mtype == "nemotron_h":
        table = {"M": "mamba2", "*": "attn"}
        return [[table[c]] if c in table else [] for c in hf.hybrid_override_pattern]
    if mtype == "granitemoehybrid":
        return [["mamba2"] if t == "mamba" else ["attn"] for t in hf.layer_types]
    if mtype == "jamba":
        return [["mamba1"] if t == "mamba" else ["attn"] for t in hf.layers_block_type]
    if mtype == "qwen3_next":
        return [["gdn"] if t == "linear_attention" else ["attn"] for t in hf.layer_types]
    raise ValueError(f"harness: no layer plan for {mtype}")


def _mamba(kind: str, cfg: Any) -> Any:
    hf, tp = cfg.model_config.hf_text_config, _TP["size"]
    if kind == "mamba2":
        obj = mamba_mixer2.MambaMixer2.__new__(mamba_mixer2.MambaMixer2)
        if hf.model_type == "nemotron_h":
            obj.intermediate_size = hf.mamba_num_heads * hf.mamba_head_dim
            obj.n_groups, obj.num_heads, obj.head_dim = (
                hf.n_groups,
                hf.mamba_num_heads,
                hf.mamba_head_dim,
            )
            obj.ssm_state_size, obj.conv_kernel_size = hf.ssm_state_size, hf.conv_kernel
        else:
            obj.intermediate_size = (
                hf.mamba_d_ssm
                if hf.model_type == "falcon_h1" and hf.mamba_d_ssm is not None
                else int(hf.mamba_expand * hf.hidden_size)
            )
            obj.n_groups, obj.num_heads, obj.head_dim = (
                hf.mamba_n_groups,
                hf.mamba_n_heads,
                hf.mamba_d_head,
            )
            obj.ssm_state_size, obj.conv_kernel_size = hf.mamba_d_state, hf.mamba_d_conv
    elif kind == "mamba1":
        obj = mamba_mixer.MambaMixer.__new__(mamba_mixer.MambaMixer)
        obj.intermediate_size = hf.mamba_expand * hf.hidden_size
        obj.ssm_state_size, obj.conv_kernel_size = hf.mamba_d_state, hf.mamba_d_conv
    else:
        # Imported only here: 0.11's qwen3_next imports Triton kernels the CPU build lacks.
        from vllm.model_executor.models import qwen3_next

        klass = qwen3_next.Qwen3NextGatedDeltaNet
        obj = klass.__new__(klass)
        obj.tp_size, obj.num_spec = tp, 0
        obj.num_k_heads, obj.num_v_heads = hf.linear_num_key_heads, hf.linear_num_value_heads
        obj.head_k_dim, obj.head_v_dim = hf.linear_key_head_dim, hf.linear_value_head_dim
        obj.conv_kernel_size = hf.linear_conv_kernel_dim
    torch.nn.Module.__init__(obj)
    obj.model_config, obj.cache_config = cfg.model_config, cfg.cache_config
    return obj


def _attn(cfg: Any, tp: int) -> Any:
    mc = cfg.model_config
    obj = Attention.__new__(Attention)
    torch.nn.Module.__init__(obj)
    obj.attn_type = AttentionType.DECODER
    obj.kv_sharing_target_layer_name = None
    obj.sliding_window = None
    obj.num_kv_heads = max(1, mc.get_total_num_kv_heads() // tp)
    obj.head_size = mc.get_head_size()
    return obj


def _one(c: dict[str, Any], root: str) -> dict[str, Any]:
    out: dict[str, Any] = {"id": c["id"], "accepted": False, "stage": None, "error": None}
    path = os.path.join(root, str(abs(hash(json.dumps(c["config"], sort_keys=True)))))
    if not os.path.isdir(path):
        os.makedirs(path)
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(c["config"], f)
    kw: dict[str, Any] = dict(
        model=path,
        skip_tokenizer_init=True,
        tensor_parallel_size=c["tensor_parallel_size"],
        kv_cache_dtype=c["kv_cache_dtype"],
        dtype=c["dtype"],
        max_model_len=c["context_tokens"],
        kv_cache_memory_bytes=c["kv_budget_bytes"],
        max_num_batched_tokens=c["max_num_batched_tokens"],
        async_scheduling=c["async_scheduling"],
        swap_space=0,
    )
    if c.get("block_size") is not None:
        kw["block_size"] = c["block_size"]
    if c.get("enable_prefix_caching") is not None:
        kw["enable_prefix_caching"] = c["enable_prefix_caching"]
    try:
        cfg = EngineArgs(**kw).create_engine_config()
        if base.CUDA is None:
            raise RuntimeError("vllm.platforms.cuda could not be imported here")
        base.CUDA.check_and_update_config(cfg)
    except Exception as e:
        out.update(stage="config", error=f"{type(e).__name__}: {e}"[:2000])
        return out
    mc, cc = cfg.model_config, cfg.cache_config
    tp = cfg.parallel_config.tensor_parallel_size
    _TP["size"] = tp
    out.update(
        max_model_len=mc.max_model_len,
        model_max_len=int(mc.get_and_verify_max_len(None)),
        block_size=cc.block_size,
        enable_prefix_caching=cc.enable_prefix_caching,
        mamba_cache_mode="none",
    )
    ctx = cfg.compilation_config.static_forward_context
    ctx.clear()
    for i, per in enumerate(_slots(mc.hf_text_config)):
        for kind in per:
            if kind == "attn":
                ctx[f"model.layers.{i}.self_attn.attn"] = _attn(cfg, tp)
            else:
                ctx[f"model.layers.{i}.mixer"] = _mamba(kind, cfg)
    runner = types.SimpleNamespace(
        vllm_config=cfg,
        kv_cache_dtype=base._kv_torch_dtype(cfg),
        attention_chunk_size=None,
        shared_kv_cache_layers={},
        speculative_config=None,
    )
    try:
        specs = GPUModelRunner.get_kv_cache_spec(runner)  # type: ignore[arg-type]
    except Exception as e:
        out.update(stage="model", error=f"{type(e).__name__}: {e}"[:2000])
        return out
    attn = [s for s in specs.values() if not isinstance(s, MambaSpec)]
    out["page_bytes_per_layer"] = attn[0].page_size_bytes
    budget = c["kv_budget_bytes"]
    saved = mc.max_model_len
    mc.max_model_len = int(c["longest_search_cap"])
    try:
        out["longest_context_tokens"] = kvu.estimate_max_model_len(cfg, specs, budget)
    finally:
        mc.max_model_len = saved
    base._capture.lines.clear()
    try:
        configs = kvu.get_kv_cache_configs(cfg, [specs], [budget])
    except Exception as e:
        out.update(stage="kv_cache", error=f"{type(e).__name__}: {e}"[:2000])
        return out
    sched = kvu.generate_scheduler_kv_cache_config(configs)
    tokens = conc = None
    for line in base._capture.lines:
        if m := re.search(r"GPU KV cache size: ([\d,]+) tokens", line):
            tokens = tokens if tokens is not None else int(m.group(1).replace(",", ""))
        if m := re.search(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x", line):
            conc = conc if conc is not None else float(m.group(1))
    size = max(len(g.layer_names) for g in sched.kv_cache_groups)
    per_group = [
        cdiv(g.kv_cache_spec.max_memory_usage_bytes(cfg), g.kv_cache_spec.page_size_bytes)
        for g in sched.kv_cache_groups
    ]
    out["groups"] = [
        {
            "kind": "mamba"
            if isinstance(g.kv_cache_spec, MambaSpec)
            else base._kind_of(g.kv_cache_spec),
            "layers": len(g.layer_names),
            "padding_layers": size - len(g.layer_names),
            "block_size": g.kv_cache_spec.block_size,
            "blocks_per_request": need,
        }
        for g, need in zip(sched.kv_cache_groups, per_group, strict=True)
    ]
    bpr = sum(per_group)
    out.update(
        accepted=True,
        num_blocks=sched.num_blocks,
        blocks_per_request=bpr,
        resident_requests=(sched.num_blocks - 1) // bpr,
        logged_tokens=tokens,
        logged_concurrency=conc,
    )
    return out


def main() -> int:
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        configs = json.load(f)
    results = []
    with tempfile.TemporaryDirectory(prefix="vllm-oracle-hybrid-011-") as root:
        for c in configs:
            try:
                results.append(_one(c, root))
            except Exception:
                results.append(
                    {
                        "id": c["id"],
                        "accepted": False,
                        "stage": "harness",
                        "error": traceback.format_exc()[-3000:],
                    }
                )
    with open(dst, "w") as f:
        json.dump({"meta": {"vllm_version": vllm.__version__}, "results": results}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
