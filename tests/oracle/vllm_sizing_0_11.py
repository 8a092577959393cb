"""vLLM 0.11's own KV-cache sizing, run on CPU: the older-release oracle (see vllm_sizing.py).

Runs INSIDE the 0.11 oracle virtualenv. Same input and output as `vllm_sizing.py`; 0.11's code
paths differ, so this is its own script:
- vLLM's: `EngineArgs(...).create_engine_config()`, `CudaPlatform.check_and_update_config` (its
  MLA block-size forcing: FlashMLA's 64 on Hopper), the model runner's own
  `GPUModelRunner.get_kv_cache_spec` over the attention layers in the static forward context,
  `get_kv_cache_configs` (whose per-worker `get_kv_cache_config_from_groups` logs "GPU KV cache
  size" and "Maximum concurrency": both lines are captured as logged), and
  `estimate_max_model_len`.
- Ours (no GPU): layer objects made without their constructors, with the attributes those set;
  the platform reports compute capability 9.0 (H100/H200) and FlashMLA as supported.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import tempfile
import traceback
import types
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# cuda.py imports the compiled ops only to register them; an empty module stands in (no libcuda).
sys.modules.setdefault("vllm._C", types.ModuleType("vllm._C"))

import torch  # noqa: E402
import vllm  # noqa: E402
from vllm.platforms import current_platform  # noqa: E402

current_platform.device_type = "cuda"
type(current_platform).support_hybrid_kv_cache = classmethod(lambda cls: True)  # type: ignore

from vllm.attention import Attention, AttentionType  # noqa: E402
from vllm.attention.layers.chunked_local_attention import ChunkedLocalAttention  # noqa: E402
from vllm.distributed.utils import get_pp_indices  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.platforms.interface import DeviceCapability  # noqa: E402
from vllm.utils import STR_DTYPE_TO_TORCH_DTYPE, cdiv  # noqa: E402
from vllm.v1.core import kv_cache_utils as kvu  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
)
from vllm.v1.worker.gpu_model_runner import GPUModelRunner  # noqa: E402

try:
    from vllm.platforms import cuda as _cuda

    _cuda.CudaPlatform.get_device_capability = classmethod(  # type: ignore[method-assign]
        lambda cls, device_id=0: DeviceCapability(9, 0)
    )
    import vllm.attention.ops.flashmla as _flashmla

    _flashmla.is_flashmla_supported = lambda: (True, None)
    CUDA = _cuda.CudaPlatform
except Exception:  # pragma: no cover - reported per configuration
    CUDA = None


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


_capture = _Capture()
_kv_logger = logging.getLogger(kvu.__name__)
_kv_logger.addHandler(_capture)
_kv_logger.setLevel(logging.INFO)


def _kind_of(spec: Any) -> str:
    if isinstance(spec, MLAAttentionSpec):
        return "mla"
    if isinstance(spec, SlidingWindowSpec):
        return "sliding"
    if isinstance(spec, ChunkedLocalAttentionSpec):
        return "chunked"
    if isinstance(spec, FullAttentionSpec):
        return "full"
    return type(spec).__name__


def _layers(cfg: Any, tp: int) -> list[dict[str, Any]]:
    """Per decoder layer, what the model file's attention constructor is given (0.11 files)."""
    mc, cc = cfg.model_config, cfg.cache_config
    hf = mc.hf_text_config
    mtype = getattr(hf, "model_type", "")
    total_kv = mc.get_total_num_kv_heads()
    out = []
    for i in range(hf.num_hidden_layers):
        if mc.use_mla:
            out.append(
                {
                    "index": i,
                    "cls": "attn",
                    "kv_heads": 1,
                    "head_size": mc.get_head_size(),
                    "sliding_window": None,
                }
            )
            continue
        if mtype == "gpt_oss":
            kv_heads = total_kv // tp
            per_layer = hf.sliding_window if i % 2 == 0 else None
        else:
            if total_kv >= tp:
                assert total_kv % tp == 0, f"num_key_value_heads {total_kv} % tp {tp} != 0"
            else:
                assert tp % total_kv == 0, f"tp {tp} % num_key_value_heads {total_kv} != 0"
            kv_heads = max(1, total_kv // tp)
            layer_types = getattr(hf, "layer_types", None)
            per_layer = None
            if layer_types and layer_types[i] == "sliding_attention":
                per_layer = hf.sliding_window
        if kv_heads == 0:
            raise ZeroDivisionError(f"num_kv_heads = {total_kv} // {tp} = 0 (gpt_oss.py)")
        q_heads = hf.num_attention_heads // tp
        assert q_heads % kv_heads == 0, f"num_heads {q_heads} % num_kv_heads {kv_heads}"
        chunk = getattr(hf, "attention_chunk_size", None)
        no_rope = getattr(hf, "no_rope_layers", None)
        chunked = mtype.startswith("llama4") and chunk and no_rope and no_rope[i] != 0
        out.append(
            {
                "index": i,
                "cls": "chunked" if chunked else "attn",
                "kv_heads": kv_heads,
                "head_size": mc.get_head_size(),
                "sliding_window": per_layer if per_layer is not None else cc.sliding_window,
            }
        )
    return out


def _stage_specs(cfg: Any, layers: list[dict[str, Any]]) -> dict[str, Any]:
    """The runner's own get_kv_cache_spec over a static forward context of these layers."""
    ctx = cfg.compilation_config.static_forward_context
    ctx.clear()
    for layer in layers:
        klass = ChunkedLocalAttention if layer["cls"] == "chunked" else Attention
        obj = klass.__new__(klass)
        torch.nn.Module.__init__(obj)
        obj.attn_type = AttentionType.DECODER
        obj.kv_sharing_target_layer_name = None
        obj.sliding_window = None if layer["cls"] == "chunked" else layer["sliding_window"]
        obj.num_kv_heads = layer["kv_heads"]
        obj.head_size = layer["head_size"]
        ctx[f"model.layers.{layer['index']}.self_attn.attn"] = obj
    runner = types.SimpleNamespace(
        vllm_config=cfg,
        kv_cache_dtype=_kv_torch_dtype(cfg),
        attention_chunk_size=cfg.model_config.attention_chunk_size,  # as GPUModelRunner.__init__
        shared_kv_cache_layers={},
        speculative_config=None,
    )
    return GPUModelRunner.get_kv_cache_spec(runner)  # type: ignore[arg-type]


def _kv_torch_dtype(cfg: Any) -> torch.dtype:
    # GPUModelRunner.__init__: "auto" is the model dtype, else the named cache dtype.
    cache_dtype = cfg.cache_config.cache_dtype
    if cache_dtype == "auto":
        return cfg.model_config.dtype
    return STR_DTYPE_TO_TORCH_DTYPE[cache_dtype]


def _one(c: dict[str, Any], root: str) -> dict[str, Any]:
    out: dict[str, Any] = {"id": c["id"], "accepted": False, "stage": None, "error": None}
    key = hashlib.sha1(json.dumps(c["config"], sort_keys=True).encode()).hexdigest()[:16]
    path = os.path.join(root, key)
    if not os.path.isdir(path):
        os.makedirs(path)
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(c["config"], f)
    kw: dict[str, Any] = dict(
        model=path,
        skip_tokenizer_init=True,
        tensor_parallel_size=c["tensor_parallel_size"],
        pipeline_parallel_size=c["pipeline_parallel_size"],
        kv_cache_dtype=c["kv_cache_dtype"],
        dtype=c["dtype"],
        max_model_len=c["context_tokens"],
        kv_cache_memory_bytes=c["kv_budget_bytes"],
        max_num_batched_tokens=c["max_num_batched_tokens"],
        async_scheduling=c["async_scheduling"],
        # CPU swap space is checked against this machine's RAM (4 GiB x TP by default); it has
        # nothing to do with the GPU KV cache.
        swap_space=0,
    )
    if c.get("block_size") is not None:
        kw["block_size"] = c["block_size"]
    try:
        cfg = EngineArgs(**kw).create_engine_config()
        if CUDA is None:
            raise RuntimeError("vllm.platforms.cuda could not be imported here")
        CUDA.check_and_update_config(cfg)
    except Exception as e:
        out.update(stage="config", error=f"{type(e).__name__}: {e}"[:2000])
        return out
    mc, cc, pc, sc = cfg.model_config, cfg.cache_config, cfg.parallel_config, cfg.scheduler_config
    saved = mc.max_model_len
    out.update(
        async_scheduling=bool(sc.async_scheduling),
        max_model_len=mc.max_model_len,
        model_max_len=int(mc.get_and_verify_max_len(None)),
        block_size=cc.block_size,
    )
    tp, pp = pc.tensor_parallel_size, pc.pipeline_parallel_size
    try:
        layers = _layers(cfg, tp)
    except (AssertionError, ZeroDivisionError) as e:
        out.update(stage="model", error=f"{type(e).__name__}: {e}")
        return out
    specs = []
    for rank in range(pp):
        lo, hi = get_pp_indices(len(layers), rank, pp)
        specs.append(_stage_specs(cfg, layers[lo:hi]))
    first = next(iter(specs[0].values()))
    out["kv_heads_per_rank"] = first.num_kv_heads
    out["page_bytes_per_layer"] = first.page_size_bytes
    budget = c["kv_budget_bytes"]
    # Longest context: 0.11's own estimate (the search its "needs more memory" error runs), up to
    # the caller's cap; the worst PP stage binds.
    mc.max_model_len = int(c["longest_search_cap"])
    try:
        out["longest_context_tokens"] = min(
            kvu.estimate_max_model_len(cfg, s, budget) for s in specs
        )
    finally:
        mc.max_model_len = saved
    _capture.lines.clear()
    try:
        configs = kvu.get_kv_cache_configs(cfg, specs, [budget] * pp)
    except Exception as e:
        out.update(stage="kv_cache", error=f"{type(e).__name__}: {e}"[:2000])
        return out
    sched = kvu.generate_scheduler_kv_cache_config(configs)
    # What worker 0 logged (each worker logs from its own config, before the minimum is taken).
    tokens = conc = None
    for line in _capture.lines:
        if m := re.search(r"GPU KV cache size: ([\d,]+) tokens", line):
            tokens = tokens if tokens is not None else int(m.group(1).replace(",", ""))
        if m := re.search(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x", line):
            conc = conc if conc is not None else float(m.group(1))
    group_size = max(len(g.layer_names) for g in sched.kv_cache_groups)
    per_group = [
        cdiv(g.kv_cache_spec.max_memory_usage_bytes(cfg), g.kv_cache_spec.page_size_bytes)
        for g in sched.kv_cache_groups
    ]
    out["groups"] = [
        {
            "kind": _kind_of(g.kv_cache_spec),
            "layers": len(g.layer_names),
            "padding_layers": group_size - len(g.layer_names),
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
    with tempfile.TemporaryDirectory(prefix="vllm-oracle-") as root:
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
        json.dump(
            {
                "meta": {"vllm_version": vllm.__version__, "torch": torch.__version__},
                "results": results,
            },
            f,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
