"""vLLM 0.11–0.20's own KV-cache sizing, run on CPU: the older-release oracle (see vllm_sizing.py).

Runs INSIDE a release's oracle virtualenv (0.11.0, 0.12.0 … 0.20.2). Same input and output as
`vllm_sizing.py`; these releases size through `kv_cache_utils` (no `kv_cache_planning` module
yet), so this is their own script, with small switches where a release moved or changed a step:
- vLLM's: `EngineArgs(...).create_engine_config()`; the block size: up to 0.17
  `CudaPlatform.check_and_update_config` (16 by default, FlashMLA's 64 forced for MLA on
  Hopper), from 0.18 `Platform.update_block_size_for_backend` phase 1 (the first layer's
  backend's `get_preferred_block_size`, unless --block-size is given); the attention backend from
  the release's SM90 priority list by each backend's declared support (0.12+; as in
  vllm_sizing.py, without the kernel probes that need CUDA); each layer class's own
  `get_kv_cache_spec` (0.11: the model runner's `GPUModelRunner.get_kv_cache_spec`);
  `get_kv_cache_configs`, whose one-request memory check is observed to read the release's own
  max-length estimate (0.11: `estimate_max_model_len` per stage), and whose
  `_report_kv_cache_config` lines "GPU KV cache size" and "Maximum concurrency" are captured
  as logged.
- Ours (no GPU): layer objects made without their constructors, with the attributes those set;
  the platform reports compute capability 9.0 (H100/H200) and FlashMLA as supported.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import re
import sys
import tempfile
import traceback
import types
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# cuda.py imports the compiled ops only to register them; empty modules stand in (no libcuda).
sys.modules.setdefault("vllm._C", types.ModuleType("vllm._C"))
sys.modules.setdefault("vllm._C_stable_libtorch", types.ModuleType("vllm._C_stable_libtorch"))

import torch  # noqa: E402
import vllm  # noqa: E402
from vllm.platforms import current_platform  # noqa: E402

current_platform.device_type = "cuda"
type(current_platform).support_hybrid_kv_cache = classmethod(lambda cls: True)  # type: ignore

RELEASE = tuple(int(p) for p in re.findall(r"\d+", vllm.__version__)[:2])


def _imp(*paths: str) -> Any:
    """The first of "module:name" that this release has (modules moved between releases)."""
    for p in paths:
        mod, _, name = p.partition(":")
        try:
            return getattr(importlib.import_module(mod), name)
        except (ImportError, AttributeError):
            continue
    return None


# isort: off
Attention = _imp(
    "vllm.model_executor.layers.attention.attention:Attention",  # 0.17+
    "vllm.attention.layer:Attention",
)
MLAAttention = _imp(
    "vllm.model_executor.layers.attention.mla_attention:MLAAttention",  # 0.17+
    "vllm.attention.layer:MLAAttention",  # 0.12–0.16; 0.11 has none (the runner sizes MLA)
)
ChunkedLocalAttention = _imp(
    "vllm.model_executor.layers.attention.chunked_local_attention:ChunkedLocalAttention",
    "vllm.attention.layers.chunked_local_attention:ChunkedLocalAttention",
)
AttentionType = _imp(
    "vllm.v1.attention.backend:AttentionType",  # 0.14+
    "vllm.attention.backends.abstract:AttentionType",
    "vllm.attention:AttentionType",
)
STR_DTYPE_TO_TORCH_DTYPE = _imp(
    "vllm.utils.torch_utils:STR_DTYPE_TO_TORCH_DTYPE", "vllm.utils:STR_DTYPE_TO_TORCH_DTYPE"
)
kv_cache_dtype_str_to_dtype = _imp("vllm.utils.torch_utils:kv_cache_dtype_str_to_dtype")
cdiv = _imp("vllm.utils.math_utils:cdiv", "vllm.utils:cdiv")
set_current_vllm_config = _imp("vllm.config:set_current_vllm_config")
from vllm.distributed.utils import get_pp_indices  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.platforms.interface import DeviceCapability, Platform  # noqa: E402
from vllm.v1.core import kv_cache_utils as kvu  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
)
# isort: on

SM90 = DeviceCapability(9, 0)
# 0.18+: the block size comes from the chosen backend (update_block_size_for_backend), not from
# CudaPlatform.check_and_update_config; an explicit --block-size filters the backends.
BACKEND_BLOCK_FLOW = hasattr(Platform, "update_block_size_for_backend")
# 0.11's runner builds the specs itself; from 0.12 each layer class does (get_kv_cache_spec).
LAYER_SPECS = RELEASE >= (0, 12)

try:
    from vllm.platforms import cuda as _cuda

    _cuda.CudaPlatform.get_device_capability = classmethod(  # type: ignore[method-assign]
        lambda cls, device_id=0: SM90
    )
    for _name in ("vllm.v1.attention.ops.flashmla", "vllm.attention.ops.flashmla"):
        try:
            _fm = importlib.import_module(_name)
        except ImportError:
            continue
        for _fn in ("is_flashmla_supported", "is_flashmla_dense_supported"):
            if hasattr(_fm, _fn):
                setattr(_fm, _fn, lambda: (True, None))
    CUDA = _cuda.CudaPlatform
    _get_backend_priorities = getattr(_cuda, "_get_backend_priorities", None)
except Exception:  # pragma: no cover - reported per configuration
    CUDA = None
    _get_backend_priorities = None


def _fa_mla_shim() -> None:
    """FLASH_ATTN_MLA (SM90's first MLA choice from 0.12) imports two kernel entry points from
    vllm.vllm_flash_attn, whose package refuses to import without its CUDA extensions. Import the
    backend's module once with those names standing in as absent, so its class (its declared
    dtypes and block sizes) loads; nothing here calls a kernel, and the stand-in is removed
    again (the standard FlashAttention backend still sees the real package)."""
    if not LAYER_SPECS:
        return
    name = "vllm.v1.attention.backends.mla.flashattn_mla"
    try:
        importlib.import_module(name)
        return
    except ImportError:
        sys.modules.pop(name, None)
    saved = sys.modules.get("vllm.vllm_flash_attn")
    stub = types.ModuleType("vllm.vllm_flash_attn")
    stub.flash_attn_varlen_func = None  # type: ignore[attr-defined]
    stub.get_scheduler_metadata = None  # type: ignore[attr-defined]
    sys.modules["vllm.vllm_flash_attn"] = stub
    try:
        importlib.import_module(name)
    except ImportError:
        sys.modules.pop(name, None)
    finally:
        if saved is None:
            sys.modules.pop("vllm.vllm_flash_attn", None)
        else:
            sys.modules["vllm.vllm_flash_attn"] = saved


_fa_mla_shim()


class _Capture:
    """Stands in for kv_cache_utils' logger: keeps every message (info_once would drop a line
    that repeats an earlier case's) and hands everything else to the real logger."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.lines: list[str] = []

    def _keep(self, msg: str, *args: Any, **_: Any) -> None:
        self.lines.append(msg % args if args else msg)

    info = info_once = debug = debug_once = warning = warning_once = _keep

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


_capture = _Capture(kvu.logger)
kvu.logger = _capture


class _Estimates:
    """What vLLM's one-request memory check would say is the longest context: the check is
    wrapped, and each call's own estimate runs up to the caller's search cap (0.12–0.13:
    `check_enough_kv_cache_memory` per worker; 0.14+: `_check_enough_kv_cache_memory`, given
    the release's estimate over the groups it checks)."""

    def __init__(self) -> None:
        self.cap = 0
        self.cfg: Any = None
        self.values: list[int] = []

    def _capped(self, fn: Any, *args: Any) -> None:
        mc = self.cfg.model_config
        saved = mc.max_model_len
        mc.max_model_len = self.cap
        try:
            self.values.append(int(fn(*args)))
        finally:
            mc.max_model_len = saved


_estimates = _Estimates()
if LAYER_SPECS and hasattr(kvu, "_check_enough_kv_cache_memory"):
    _check_inner = kvu._check_enough_kv_cache_memory

    def _check_wrapped(available_memory: int, needed: Any, max_model_len: int, estimate: Any):
        if available_memory > 0:
            _estimates._capped(estimate, available_memory)
        return _check_inner(available_memory, needed, max_model_len, estimate)

    kvu._check_enough_kv_cache_memory = _check_wrapped
elif LAYER_SPECS:
    _check_public = kvu.check_enough_kv_cache_memory

    def _check_public_wrapped(vllm_config: Any, spec: Any, available_memory: int):
        if spec and available_memory > 0:
            _estimates._capped(kvu.estimate_max_model_len, vllm_config, spec, available_memory)
        return _check_public(vllm_config, spec, available_memory)

    kvu.check_enough_kv_cache_memory = _check_public_wrapped


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
    """Per decoder layer, what the model file's attention constructor is given."""
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
                    "cls": "mla",
                    "kv_heads": 1,
                    "num_heads": hf.num_attention_heads // tp,
                    "head_size": mc.get_head_size(),
                    "sliding_window": None,
                    "has_sink": False,
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
                "num_heads": q_heads,
                "head_size": mc.get_head_size(),
                "sliding_window": per_layer if per_layer is not None else cc.sliding_window,
                "chunk": chunk,
                "has_sink": mtype == "gpt_oss",
            }
        )
    return out


def _backend_ok(cls: Any, *, kv_cache_dtype: str, dtype: Any, head_size: int,
                block_size: int | None, has_sink: bool) -> list[str]:  # fmt: skip
    """The declared-support subset of `AttentionBackend.validate_configuration`."""
    why = []
    if not cls.supports_compute_capability(SM90):
        why.append("compute capability")
    if not cls.supports_kv_cache_dtype(kv_cache_dtype):
        why.append("kv_cache_dtype")
    if not cls.supports_dtype(dtype):
        why.append("dtype")
    if not cls.supports_head_size(head_size):
        why.append("head_size")
    if block_size is not None and not cls.supports_block_size(block_size):
        why.append("block_size not supported")
    if has_sink and not cls.supports_sink():
        why.append("sink")
    return why


def _select_backend(*, use_mla: bool, kv_cache_dtype: str, dtype: Any, head_size: int,
                    block_size: int | None, num_heads: int, has_sink: bool) -> Any:  # fmt: skip
    """The release's SM90 priority list, first backend whose declared support fits (0.12+)."""
    if _get_backend_priorities is None:
        raise RuntimeError("vllm.platforms.cuda could not be imported on this machine")
    offered = dict(use_mla=use_mla, device_capability=SM90, num_heads=num_heads,
                   kv_cache_dtype=kv_cache_dtype)  # fmt: skip
    params = inspect.signature(_get_backend_priorities).parameters
    order = _get_backend_priorities(**{k: v for k, v in offered.items() if k in params})
    reasons = {}
    for backend in order:
        if use_mla and "SPARSE" in backend.name:
            continue  # sparse MLA is only for DeepSeek-V3.2-style indexers
        try:
            cls = backend.get_class()
        except (ImportError, OSError, AssertionError) as e:
            reasons[backend.name] = f"unavailable on CPU: {type(e).__name__}"
            continue
        why = _backend_ok(cls, kv_cache_dtype=kv_cache_dtype, dtype=dtype, head_size=head_size,
                          block_size=block_size, has_sink=has_sink)  # fmt: skip
        if not why:
            return cls
        reasons[backend.name] = ", ".join(why)
    raise ValueError(f"No valid attention backend found for cuda (SM90). Reasons: {reasons}")


def _make_layer(cfg: Any, layer: dict[str, Any], backend: Any) -> Any:
    """A 0.12+ attention layer object with the attributes its constructor sets."""
    kv_dtype = cfg.cache_config.cache_dtype
    if layer["cls"] == "mla":
        obj = MLAAttention.__new__(MLAAttention)
        torch.nn.Module.__init__(obj)
        obj.kv_cache_dtype = kv_dtype
        obj.head_size = layer["head_size"]
        obj.attn_backend = backend
        return obj
    klass = ChunkedLocalAttention if layer["cls"] == "chunked" else Attention
    obj = klass.__new__(klass)
    torch.nn.Module.__init__(obj)
    obj.attn_type = AttentionType.DECODER
    obj.kv_sharing_target_layer_name = None
    obj.kv_cache_dtype = kv_dtype
    obj.kv_cache_torch_dtype = kv_cache_dtype_str_to_dtype(kv_dtype, cfg.model_config)
    obj.num_heads = layer["num_heads"]
    obj.num_kv_heads = layer["kv_heads"]
    obj.head_size = layer["head_size"]
    obj.head_size_v = layer["head_size"]
    obj.sliding_window = None if layer["cls"] == "chunked" else layer["sliding_window"]
    obj.attn_backend = backend
    if layer["cls"] == "chunked":
        obj.attention_chunk_size = layer["chunk"]
    return obj


def _stage_specs_0_11(cfg: Any, layers: list[dict[str, Any]]) -> dict[str, Any]:
    """0.11: the runner's own get_kv_cache_spec over a static forward context of these layers."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

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


def _choose_backends(cfg: Any, layers: list[dict[str, Any]]) -> dict[tuple[bool, bool], Any]:
    """0.12+: each layer kind's backend; from 0.18 also the block size (phase 1 of
    update_block_size_for_backend: the first layer's backend's preferred size)."""
    cc, mc = cfg.cache_config, cfg.model_config
    user_bs = cc.block_size if BACKEND_BLOCK_FLOW and cc.user_specified_block_size else None
    backends: dict[tuple[bool, bool], Any] = {}
    # The layers choose while the model is built, inside the engine's config context (0.20's
    # backends read it when they declare support).
    with set_current_vllm_config(cfg):
        for layer in layers:
            key = (layer["cls"] == "mla", layer["has_sink"])
            if key not in backends:
                backends[key] = _select_backend(
                    use_mla=key[0], kv_cache_dtype=cc.cache_dtype, dtype=mc.dtype,
                    head_size=layer["head_size"], block_size=user_bs,
                    num_heads=layer["num_heads"], has_sink=key[1],
                )  # fmt: skip
        if BACKEND_BLOCK_FLOW and not cc.user_specified_block_size:
            from vllm.config.cache import CacheConfig

            first = backends[(layers[0]["cls"] == "mla", layers[0]["has_sink"])]
            cc.block_size = first.get_preferred_block_size(CacheConfig.DEFAULT_BLOCK_SIZE)
    return backends


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
    )
    if "swap_space" in inspect.signature(EngineArgs).parameters:
        # CPU swap space is checked against this machine's RAM (4 GiB x TP by default); it has
        # nothing to do with the GPU KV cache.
        kw["swap_space"] = 0
    if c.get("block_size") is not None:
        kw["block_size"] = c["block_size"]
    try:
        cfg = EngineArgs(**kw).create_engine_config()
        if CUDA is None:
            raise RuntimeError("vllm.platforms.cuda could not be imported here")
        if not BACKEND_BLOCK_FLOW:
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
    )
    tp, pp = pc.tensor_parallel_size, pc.pipeline_parallel_size
    try:
        layers = _layers(cfg, tp)
    except (AssertionError, ZeroDivisionError) as e:
        out.update(stage="model", error=f"{type(e).__name__}: {e}")
        return out
    backends: dict[tuple[bool, bool], Any] = {}
    if LAYER_SPECS:
        try:
            backends = _choose_backends(cfg, layers)
        except Exception as e:
            out.update(stage="backend", error=f"{type(e).__name__}: {e}"[:2000])
            return out
        out["backends"] = sorted({b.get_name() for b in backends.values()})
    out["block_size"] = cc.block_size
    specs = []
    for rank in range(pp):
        lo, hi = get_pp_indices(len(layers), rank, pp)
        if not LAYER_SPECS:
            specs.append(_stage_specs_0_11(cfg, layers[lo:hi]))
            continue
        stage = {}
        with set_current_vllm_config(cfg):
            for layer in layers[lo:hi]:
                obj = _make_layer(cfg, layer, backends[(layer["cls"] == "mla", layer["has_sink"])])
                stage[f"model.layers.{layer['index']}.self_attn.attn"] = obj.get_kv_cache_spec(cfg)
        specs.append(stage)
    first = next(iter(specs[0].values()))
    out["kv_heads_per_rank"] = first.num_kv_heads
    out["page_bytes_per_layer"] = first.page_size_bytes
    budget = c["kv_budget_bytes"]
    _estimates.cfg, _estimates.cap, _estimates.values = cfg, int(c["longest_search_cap"]), []
    if not LAYER_SPECS:
        # 0.11's own estimate (the search its "needs more memory" error runs), up to the
        # caller's cap; the worst PP stage binds.
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
        if _estimates.values:
            out["longest_context_tokens"] = min(_estimates.values)
        return out
    if _estimates.values:
        out["longest_context_tokens"] = min(_estimates.values)
    sched = kvu.generate_scheduler_kv_cache_config(configs)
    # What was logged first (0.11: worker 0, before the minimum is taken; 0.12+: after it).
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
    if LAYER_SPECS:
        out["resident_requests_allocated"] = _admitted_whole(cfg, sched, bpr)
    out.update(
        accepted=True,
        num_blocks=sched.num_blocks,
        blocks_per_request=bpr,
        resident_requests=(sched.num_blocks - 1) // bpr,
        logged_tokens=tokens,
        logged_concurrency=conc,
    )
    return out


def _admitted_whole(cfg: Any, sched: Any, blocks_per_request: int) -> int | None:
    """Self-check of `(num_blocks - 1) // blocks_per_request` with the release's own
    KVCacheManager (as vllm_sizing.py): admit requests of max_model_len tokens, each allocated
    whole, until allocate_slots refuses. Full-attention / MLA groups only, and only when cheap."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.request import Request

    kinds = {_kind_of(g.kv_cache_spec) for g in sched.kv_cache_groups}
    ctx = cfg.model_config.max_model_len
    expected = (sched.num_blocks - 1) // blocks_per_request
    if not kinds <= {"full", "mla"} or expected > 64 or ctx * (expected + 1) > (1 << 22):
        return None
    offered = dict(
        kv_cache_config=sched,
        max_model_len=ctx,
        hash_block_size=cfg.cache_config.block_size,
        max_num_batched_tokens=cfg.scheduler_config.max_num_batched_tokens,
        enable_caching=False,
    )
    params = inspect.signature(KVCacheManager).parameters
    manager = KVCacheManager(**{k: v for k, v in offered.items() if k in params})
    req_params = inspect.signature(Request).parameters
    admitted = 0
    while admitted <= expected + 1:
        rkw: dict[str, Any] = dict(
            request_id=f"r{admitted}",
            prompt_token_ids=[0] * ctx,
            sampling_params=SamplingParams(max_tokens=1),
            pooling_params=None,
        )
        if "eos_token_id" in req_params:
            rkw["eos_token_id"] = None
        if manager.allocate_slots(Request(**rkw), ctx) is None:
            break
        admitted += 1
    return admitted


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
