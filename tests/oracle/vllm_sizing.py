"""vLLM's own KV-cache sizing, run on CPU: the oracle for tests/oracle/test_vllm_oracle.py.

Runs INSIDE the oracle virtualenv (`make oracle`), never in the service's: it imports the real
vLLM wheel. Usage: `python vllm_sizing.py IN.json OUT.json`. IN is a list of configurations
(see `_one`), OUT the same length list of vLLM's figures, each `{"id", "accepted", ...}`.

What is vLLM's code and what is ours:
- vLLM's: `EngineArgs(...).create_engine_config()` (every config-time check and default),
  the spec classes and each attention layer class's own `get_kv_cache_spec`, the attention
  backends' declared kernel block sizes and dtypes, the block-size preference
  (`Platform._preferred_block_size_for_backends`), and the engine-core flow
  (`get_global_kv_cache_groups` → `get_kv_cache_configs` → `generate_scheduler_kv_cache_config`
  → `get_kv_cache_capacity`, `_estimate_max_model_len_from_groups`).
- Ours (no GPU here): the layer objects are made without their constructors (which need CUDA)
  and given the attributes the model file's constructor would set; the attention backend is
  picked from vLLM's SM90 (H100/H200) priority list by each backend's declared support
  (compute capability, kv-cache dtype, model dtype, head size, block size, sinks), because the
  CUDA backends' own `validate_configuration` probes kernels that do not load on CPU.
  Backends that cannot even be imported here (FlashInfer, FlashInfer-MLA, CUTLASS-MLA) are
  passed over; on SM90 they come after a backend that is chosen here with the same kernel block
  sizes for the settings the test generates (FlashInfer: 16/32/64; Triton: multiples of 16), so
  the sizes do not change. FlashAttention's sink support is probed from its kernel, so gpt-oss
  lands on Triton here (same block sizes).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import io
import json
import logging
import os
import sys
import tempfile
import traceback
import types
from typing import Any

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# cuda.py imports the compiled stable-ABI ops only to register them; the priority list it holds is
# plain Python. An empty module stands in for the shared library that needs libcuda.
sys.modules.setdefault("vllm._C_stable_libtorch", types.ModuleType("vllm._C_stable_libtorch"))

import torch  # noqa: E402

# torchvision (transformers imports it when installed; Qwen3.5's model file needs it): its
# compiled ops are CUDA builds that do not load on CPU torch, and its Python code then registers
# fake kernels for two ops that were never declared. Declare them; no op ever runs here.
if torch.version.cuda is None and importlib.util.find_spec("torchvision") is not None:
    _TORCHVISION_OPS = torch.library.Library("torchvision", "DEF")
    _TORCHVISION_OPS.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _TORCHVISION_OPS.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")

from vllm.platforms import current_platform  # noqa: E402

# Platform stubs (no GPU on this machine): the unspecified platform has device_type "" (refused
# by DeviceConfig) and no hybrid KV-cache support (VllmConfig would then size every layer as full
# attention). CudaPlatform answers "cuda" and True.
current_platform.device_type = "cuda"
type(current_platform).support_hybrid_kv_cache = classmethod(lambda cls: True)  # type: ignore

import vllm  # noqa: E402
import vllm.config.vllm as _vllm_config_module  # noqa: E402

# Triton has no active driver without a GPU, so HAS_TRITON is False here; on a CUDA machine it
# is True, and 0.32 and older pick the V1 model runner without it (0.33 asks only off the
# unspecified platform). Answer as the CUDA machine does.
if hasattr(_vllm_config_module, "HAS_TRITON"):
    _vllm_config_module.HAS_TRITON = True
from vllm.config import set_current_vllm_config  # noqa: E402
from vllm.distributed.utils import get_pp_indices  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.model_executor.layers.attention.attention import Attention  # noqa: E402
from vllm.model_executor.layers.attention.chunked_local_attention import (  # noqa: E402
    ChunkedLocalAttention,
)
from vllm.model_executor.layers.attention.mla_attention import MLAAttention  # noqa: E402
from vllm.model_executor.models import registry  # noqa: E402
from vllm.platforms.interface import DeviceCapability, Platform  # noqa: E402
from vllm.utils.math_utils import cdiv  # noqa: E402
from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype  # noqa: E402
from vllm.v1.attention.backend import AttentionType  # noqa: E402
from vllm.v1.core import kv_cache_utils  # noqa: E402
from vllm.v1.core.kv_cache_utils import (  # noqa: E402
    generate_scheduler_kv_cache_config,
    get_kv_cache_capacity,
)

try:  # 0.29+: the engine resolves the KV layout before grouping
    from vllm.v1.attention.backends.utils import (
        get_supported_kv_cache_layouts,
        resolve_kv_cache_layout,
    )
except ImportError:  # 0.21-0.28: no layout step
    get_supported_kv_cache_layouts = resolve_kv_cache_layout = None
try:  # 0.33: grouping and planning live in kv_cache_planning / kv_cache_config_builder
    from vllm.v1.core.kv_cache_config_builder import get_kv_cache_config_builder
    from vllm.v1.core.kv_cache_planning import (
        _estimate_max_model_len_from_groups,
        _pool_bytes_per_block_from_builder,
        _project_kv_cache_groups_to_worker,
        get_global_kv_cache_groups,
        get_kv_cache_configs,
    )

    PLANNING_API = True
except ImportError:  # 0.21-0.32: kv_cache_utils.get_kv_cache_configs does it all in one call
    PLANNING_API = False
from vllm.v1.kv_cache_interface import (  # noqa: E402
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
)

try:  # SM90 priorities; importable once the stub above stands in for the compiled ops
    from vllm.platforms.cuda import _get_backend_priorities
except Exception:  # pragma: no cover - reported per configuration below
    _get_backend_priorities = None

SM90 = DeviceCapability(9, 0)
logging.disable(logging.WARNING)
# vLLM inspects model classes in a subprocess to keep CUDA out of the parent process; there is
# no CUDA here, and in-process the torchvision shim above applies to the model files too.
registry._run_in_subprocess = lambda fn: fn()  # type: ignore[assignment]


def raise_if_harness_error(e: Exception) -> None:
    """A model class that cannot be imported here is the oracle's environment failing (a
    missing package), never vLLM refusing the configuration: fail loudly."""
    if "failed to be inspected" in str(e):
        raise RuntimeError(f"harness: vLLM could not import the model class: {e}") from e


def _fa_utils_shim() -> None:
    """FLASH_ATTN_MLA (SM90's first MLA choice) imports kernel entry points that the CPU build of
    fa_utils does not define. Define them as absent so its class (and its declared dtypes and
    block sizes) loads; nothing here ever calls a kernel."""
    from vllm.v1.attention.backends import fa_utils

    for name in ("flash_attn_varlen_func", "get_scheduler_metadata"):
        if not hasattr(fa_utils, name):
            setattr(fa_utils, name, None)


_fa_utils_shim()


def _flash_attn_mla_shim() -> None:
    """0.29 and older: FLASH_ATTN_MLA's module imports its kernels from vllm.vllm_flash_attn,
    which refuses to import without the CUDA extensions. Where (and only where) that stops the
    class from loading, stand in an empty module for it, as _fa_utils_shim does."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    try:
        AttentionBackendEnum.FLASH_ATTN_MLA.get_class()
        return
    except ImportError as e:
        if "vllm_flash_attn" not in str(e):
            return
    stub = types.ModuleType("vllm.vllm_flash_attn")
    for name in ("flash_attn_varlen_func", "get_scheduler_metadata"):
        setattr(stub, name, None)
    sys.modules["vllm.vllm_flash_attn"] = stub


_flash_attn_mla_shim()


def _declares(cls: Any, name: str, *args: Any) -> bool:
    fn = getattr(cls, name, None)
    return True if fn is None else bool(fn(*args))


def _backend_ok(
    cls: Any,
    *,
    kv_cache_dtype: str,
    dtype: torch.dtype,
    head_size: int,
    block_size: int | None,
    has_sink: bool,
) -> list[str]:
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


def _select_backend(
    *,
    use_mla: bool,
    kv_cache_dtype: str,
    dtype: torch.dtype,
    head_size: int,
    block_size: int | None,
    num_heads: int,
    has_sink: bool,
) -> Any:
    if _get_backend_priorities is None:
        raise RuntimeError("vllm.platforms.cuda could not be imported on this machine")
    kw: dict[str, Any] = dict(
        use_mla=use_mla,
        device_capability=SM90,
        num_heads=num_heads,
        kv_cache_dtype=kv_cache_dtype,
    )
    if "head_size" in inspect.signature(_get_backend_priorities).parameters:
        kw["head_size"] = head_size  # 0.30+: the priority list depends on it
    order = _get_backend_priorities(**kw)
    reasons = {}
    for backend in order:
        if use_mla and "SPARSE" in backend.name:
            continue  # sparse MLA is only for DeepSeek-V3.2-style indexers
        try:
            cls = backend.get_class()
        except (ImportError, OSError, AssertionError) as e:
            reasons[backend.name] = f"unavailable on CPU: {type(e).__name__}"
            continue
        why = _backend_ok(
            cls,
            kv_cache_dtype=kv_cache_dtype,
            dtype=dtype,
            head_size=head_size,
            block_size=block_size,
            has_sink=has_sink,
        )
        if not why:
            return cls
        reasons[backend.name] = ", ".join(why)
    raise ValueError(f"No valid attention backend found for cuda (SM90). Reasons: {reasons}")


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


def _layer_plan(cfg: Any, tp: int) -> list[dict[str, Any]]:
    """Per decoder layer: which attention class the model file builds and with what."""
    mc, cc = cfg.model_config, cfg.cache_config
    hf = mc.hf_text_config
    n = hf.num_hidden_layers
    mtype = getattr(hf, "model_type", "")
    out = []
    total_kv = mc.get_total_num_kv_heads()
    num_heads = hf.num_attention_heads
    for i in range(n):
        layer: dict[str, Any] = {"index": i}
        if mc.use_mla:
            layer.update(cls="mla", num_heads=num_heads // tp, head_size=mc.get_head_size())
            out.append(layer)
            continue
        if mtype == "gpt_oss":
            # gpt_oss.py: num_key_value_heads // tp_size, no max(1, ...); even layers slide.
            kv_heads = total_kv // tp
            per_layer = hf.sliding_window if i % 2 == 0 else None
        else:
            # llama.py / gemma2.py / qwen2.py ...: assert the split, then max(1, Hkv // tp).
            if total_kv >= tp:
                assert total_kv % tp == 0, f"num_key_value_heads {total_kv} % tp {tp} != 0"
            else:
                assert tp % total_kv == 0, f"tp {tp} % num_key_value_heads {total_kv} != 0"
            kv_heads = max(1, total_kv // tp)
            layer_types = getattr(hf, "layer_types", None)
            per_layer = None
            if layer_types and layer_types[i] == "sliding_attention":
                per_layer = hf.sliding_window
        q_heads = num_heads // tp
        if kv_heads == 0:
            raise ZeroDivisionError(
                f"num_kv_heads = {total_kv} // {tp} = 0 (gpt_oss.py); "
                "Attention.__init__: integer modulo by zero"
            )
        assert q_heads % kv_heads == 0, (
            f"num_heads ({q_heads}) is not divisible by num_kv_heads ({kv_heads})"
        )
        chunk = getattr(hf, "attention_chunk_size", None)
        no_rope = getattr(hf, "no_rope_layers", None)
        if mtype.startswith("llama4") and chunk and no_rope and no_rope[i] != 0:
            layer.update(cls="chunked", chunk=chunk)
        else:
            layer.update(cls="attn")
        sliding = per_layer if per_layer is not None else cc.sliding_window
        layer.update(
            num_heads=q_heads,
            kv_heads=kv_heads,
            head_size=mc.get_head_size(),
            sliding_window=sliding,
            has_sink=mtype == "gpt_oss",
        )
        out.append(layer)
    return out


def _make_layer(cfg: Any, layer: dict[str, Any], backend: Any) -> Any:
    """An attention layer object with the attributes its constructor sets (no CUDA needed)."""
    cc = cfg.cache_config
    kv_dtype = cc.cache_dtype
    if layer["cls"] == "mla":
        obj = MLAAttention.__new__(MLAAttention)
        obj.kv_cache_dtype = kv_dtype
        obj.head_size = layer["head_size"]
        obj.sliding_window = None
        obj.topk_buffer_width = None
        obj.indexer = None
        obj.non_causal_multi_token_decode = False
        obj.attn_backend = backend
        return obj
    klass = ChunkedLocalAttention if layer["cls"] == "chunked" else Attention
    obj = klass.__new__(klass)
    obj.attn_type = AttentionType.DECODER
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


def _groups_out(groups: list[Any]) -> list[dict[str, Any]]:
    group_size = max(len(g.layer_names) for g in groups)
    return [
        {
            "kind": _kind_of(g.kv_cache_spec),
            "layers": len(g.layer_names),
            "padding_layers": group_size - len(g.layer_names),
            "block_size": g.kv_cache_spec.block_size,
            "window_tokens": getattr(g.kv_cache_spec, "sliding_window", None)
            or getattr(g.kv_cache_spec, "attention_chunk_size", None),
            "page_bytes": g.kv_cache_spec.page_size_bytes,
        }
        for g in groups
    ]


def _model_dir(config: dict[str, Any], root: str) -> str:
    key = hashlib.sha1(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
    path = os.path.join(root, key)
    if not os.path.isdir(path):
        os.makedirs(path)
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(config, f)
    return path


def _engine_config(c: dict[str, Any], model_dir: str) -> Any:
    kw: dict[str, Any] = dict(
        model=model_dir,
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
    if c.get("block_size") is not None:
        kw["block_size"] = c["block_size"]
    return EngineArgs(**kw).create_engine_config()


def _model_max_len(cfg: Any) -> int:
    """What vLLM derives with no --max-model-len (model_config.get_and_verify_max_len(None))."""
    with contextlib.redirect_stdout(io.StringIO()):
        return int(cfg.model_config.get_and_verify_max_len(None))


def _one(c: dict[str, Any], root: str) -> dict[str, Any]:
    out: dict[str, Any] = {"id": c["id"], "accepted": False, "stage": None, "error": None}
    try:
        cfg = _engine_config(c, _model_dir(c["config"], root))
    except Exception as e:
        raise_if_harness_error(e)
        out.update(stage="config", error=f"{type(e).__name__}: {e}"[:2000])
        return out
    mc, cc, pc, sc = cfg.model_config, cfg.cache_config, cfg.parallel_config, cfg.scheduler_config
    out.update(
        async_scheduling=bool(sc.async_scheduling),
        max_num_batched_tokens=sc.max_num_batched_tokens,
        max_model_len=mc.max_model_len,
        model_max_len=_model_max_len(cfg),
        cache_dtype=cc.cache_dtype,
        model_dtype=str(mc.dtype).removeprefix("torch."),
        max_in_flight_tokens=getattr(cfg, "max_in_flight_tokens", None),
    )
    tp, pp = pc.tensor_parallel_size, pc.pipeline_parallel_size
    try:
        layers = _layer_plan(cfg, tp)
    except (AssertionError, ZeroDivisionError) as e:
        out.update(stage="model", error=f"{type(e).__name__}: {e}")
        return out
    user_bs = cc.block_size if cc.user_specified_block_size else None
    model_dtype = mc.dtype
    try:
        backends = {}
        for layer in layers:
            key = (layer["cls"] == "mla", layer.get("has_sink", False))
            if key not in backends:
                backends[key] = _select_backend(
                    use_mla=key[0],
                    kv_cache_dtype=cc.cache_dtype,
                    dtype=model_dtype,
                    head_size=layer["head_size"],
                    block_size=user_bs,
                    num_heads=layer["num_heads"],
                    has_sink=key[1],
                )
        distinct = list(dict.fromkeys(backends.values()))
        if user_bs is None:
            # update_block_size_for_backend, phase 1 (the default block size when none is given).
            cc.block_size = _preferred_block_size(distinct, backends, layers, cfg)
    except Exception as e:
        out.update(stage="backend", error=f"{type(e).__name__}: {e}"[:2000])
        return out
    out["backends"] = sorted({b.get_name() for b in distinct})
    out["block_size"] = cc.block_size

    # One spec dict per PP stage (TP ranks of a stage are identical), as the workers report.
    specs: list[dict[str, Any]] = []
    stage_layers = []
    with set_current_vllm_config(cfg):
        for rank in range(pp):
            lo, hi = get_pp_indices(len(layers), rank, pp)
            stage = {}
            for layer in layers[lo:hi]:
                b = backends[(layer["cls"] == "mla", layer.get("has_sink", False))]
                obj = _make_layer(cfg, layer, b)
                stage[f"model.layers.{layer['index']}.self_attn.attn"] = obj.get_kv_cache_spec(cfg)
            specs.append(stage)
            stage_layers.append(hi - lo)
    first = next(iter(specs[0].values()))
    out["kv_heads_per_rank"] = getattr(first, "num_kv_heads", None)
    out["page_bytes_per_layer"] = first.page_size_bytes
    out["pipeline_stage_layers"] = stage_layers
    budget = c["kv_budget_bytes"]
    available = [budget] * pp
    try:
        if resolve_kv_cache_layout is not None:
            # EngineCore._initialize_kv_caches: the layout is resolved before grouping.
            layouts = [layout.name for layout in get_supported_kv_cache_layouts(distinct)]
            resolve_kv_cache_layout(cfg, [layouts] * pp, [s for st in specs for s in st.values()])
        plan = _plan_kv_cache if PLANNING_API else _plan_kv_cache_in_one_call
        configs = plan(cfg, specs, available, int(c["longest_search_cap"]), out)
    except Exception as e:
        out.update(stage="kv_cache", error=f"{type(e).__name__}: {e}"[:2000])
        return out
    sched = generate_scheduler_kv_cache_config(configs)
    tokens, concurrency = get_kv_cache_capacity(cfg, sched)
    per_group = [
        cdiv(g.kv_cache_spec.max_memory_usage_bytes(cfg), g.kv_cache_spec.page_size_bytes)
        for g in sched.kv_cache_groups
    ]
    # The scheduler's groups are worker 0's (first PP stage): the layers that share one block
    # table on that rank, padded to the longest group there (that padding costs memory).
    out["groups"] = _groups_out(sched.kv_cache_groups)
    for g, need in zip(out["groups"], per_group, strict=True):
        g["blocks_per_request"] = need
    bpr = sum(per_group)
    out["resident_requests_allocated"] = _admitted_whole(cfg, sched, bpr)
    out.update(
        accepted=True,
        num_blocks=sched.num_blocks,
        blocks_per_request=bpr,
        # BlockPool keeps block 0 as the null block; a request holds all its blocks at once.
        resident_requests=(sched.num_blocks - 1) // bpr,
        logged_tokens=tokens,
        logged_concurrency=round(concurrency, 2),
        concurrency=concurrency,
    )
    return out


def _preferred_block_size(
    distinct: list[Any], backends: dict[Any, Any], layers: list[dict[str, Any]], cfg: Any
) -> int:
    """The default block size: 0.31+ asks every backend in use
    (`Platform._preferred_block_size_for_backends`); before, the first attention layer's backend
    answers alone (`_find_non_ssm_backend` → `get_preferred_block_size(DEFAULT_BLOCK_SIZE)`)."""
    cc = cfg.cache_config
    if hasattr(Platform, "_preferred_block_size_for_backends"):
        return Platform._preferred_block_size_for_backends(distinct, cc.block_size, cfg)
    from vllm.config.cache import CacheConfig

    first = backends[(layers[0]["cls"] == "mla", layers[0].get("has_sink", False))]
    with set_current_vllm_config(cfg):
        return int(first.get_preferred_block_size(CacheConfig.DEFAULT_BLOCK_SIZE))


def _plan_kv_cache(
    cfg: Any, specs: list[dict[str, Any]], available: list[int], search_cap: int, out: Any
) -> list[Any]:
    """0.33: global groups, vLLM's max-length estimate per worker, then the per-worker configs
    (out gets the groups and the longest context, even when the configs are refused)."""
    mc = cfg.model_config
    groups = get_global_kv_cache_groups(cfg, specs)
    out["global_groups"] = _groups_out(groups)
    builder = get_kv_cache_config_builder(cfg)
    projected = [_project_kv_cache_groups_to_worker(groups, s) for s in specs]
    # Longest context one request can have: vLLM's own estimate (the search of its "needs
    # more memory" error), run up to the caller's search cap instead of max_model_len.
    saved = mc.max_model_len
    mc.max_model_len = search_cap
    try:
        out["longest_context_tokens"] = min(
            _estimate_max_model_len_from_groups(
                builder, cfg, pg, mem - _pool_bytes_per_block_from_builder(builder, cfg, pg)
            )
            for pg, mem in zip(projected, available, strict=True)
        )
    finally:
        mc.max_model_len = saved
    return get_kv_cache_configs(cfg, specs, available, groups)


def _plan_kv_cache_in_one_call(
    cfg: Any, specs: list[dict[str, Any]], available: list[int], search_cap: int, out: Any
) -> list[Any]:
    """0.21-0.32: `get_kv_cache_configs(cfg, specs, available)` groups, checks and sizes in one
    call. Its own steps are observed, not redone: the global groups `get_kv_cache_groups`
    returns, and each worker's `_check_enough_kv_cache_memory(memory, need, max_model_len,
    estimate)`, whose estimate is run up to the search cap; every worker is checked (the first
    refusal is raised once all have been seen)."""
    mc = cfg.model_config
    seen: dict[str, Any] = {"groups": None, "longest": [], "refusal": None}
    real_groups = kv_cache_utils.get_kv_cache_groups
    real_check = kv_cache_utils._check_enough_kv_cache_memory

    def groups_seen(*args: Any, **kwargs: Any) -> Any:
        seen["groups"] = real_groups(*args, **kwargs)
        return seen["groups"]

    def check_seen(memory: int, need: Any, max_len: int, estimate: Any) -> None:
        saved = mc.max_model_len
        mc.max_model_len = search_cap
        try:
            seen["longest"].append(estimate(memory) if memory > 0 else 0)
        finally:
            mc.max_model_len = saved
        try:
            real_check(memory, need, max_len, estimate)
        except ValueError as e:
            seen["refusal"] = seen["refusal"] or e

    kv_cache_utils.get_kv_cache_groups = groups_seen
    kv_cache_utils._check_enough_kv_cache_memory = check_seen
    try:
        configs = kv_cache_utils.get_kv_cache_configs(cfg, specs, available)
    finally:
        kv_cache_utils.get_kv_cache_groups = real_groups
        kv_cache_utils._check_enough_kv_cache_memory = real_check
    out["global_groups"] = _groups_out(seen["groups"])
    out["longest_context_tokens"] = min(seen["longest"])
    if seen["refusal"] is not None:
        raise seen["refusal"]
    return configs


def _admitted_whole(cfg: Any, sched: Any, blocks_per_request: int) -> int | None:
    """Self-check of `(num_blocks - 1) // blocks_per_request` with vLLM's own KVCacheManager:
    admit requests of max_model_len tokens, each allocated whole, until allocate_slots refuses.

    Only for full-attention / MLA groups (a whole-prompt allocation of a sliding-window request
    takes every block, not the admission cap) and when it is cheap (few requests, short
    contexts)."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.request import Request

    kinds = {_kind_of(g.kv_cache_spec) for g in sched.kv_cache_groups}
    ctx = cfg.model_config.max_model_len
    expected = (sched.num_blocks - 1) // blocks_per_request
    if not kinds <= {"full", "mla"} or expected > 64 or ctx * (expected + 1) > (1 << 22):
        return None
    kw = dict(
        kv_cache_config=sched,
        max_model_len=ctx,
        scheduler_block_size=cfg.cache_config.block_size,
        hash_block_size=cfg.cache_config.block_size,
        enable_caching=False,
    )
    # The admission cap's input: max_in_flight_tokens (0.26+), max_num_batched_tokens before.
    accepted = inspect.signature(KVCacheManager.__init__).parameters
    if "max_in_flight_tokens" in accepted:
        kw["max_in_flight_tokens"] = cfg.max_in_flight_tokens
    else:
        kw["max_num_batched_tokens"] = cfg.scheduler_config.max_num_batched_tokens
    manager = KVCacheManager(**{k: v for k, v in kw.items() if k in accepted})
    admitted = 0
    while admitted <= expected + 1:
        req = Request(f"r{admitted}", [0] * ctx, SamplingParams(max_tokens=1), None)
        if manager.allocate_slots(req, ctx, full_sequence_must_fit=True) is None:
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
