"""vLLM 0.14-0.19's own sizing of hybrid (state + attention) models, run on CPU:
vllm_hybrid_sizing_0_21.py (0.21's harness, which runs 0.20.2 as it is) with what these
releases lack or do differently given back to it.

Runs INSIDE the oracle virtualenv, never in the service's (usage as vllm_hybrid_sizing.py).

Read in the 0.14.1 – 0.19.1 wheels:
- 0.14-0.16 keep `Attention` and `MLAAttention` in `vllm/attention/layer.py` (0.17 moves them
  to `model_executor/layers/attention/`): vllm_sizing.py gets them under 0.17's module names.
  0.16 has no `VllmConfig.num_speculative_tokens` (the harness reads 0.17's property: the
  draft's k, or 0); 0.14 has no `CacheConfig.mamba_cache_mode` (0.15 adds it: reported None,
  and 0.33's GDN checkpoints, align mode only, stay off).
- 0.17 has no after-load block step (`Platform.update_block_size_for_backend`, 0.18): the
  block is final once the config is built and `CudaPlatform.check_and_update_config` has run,
  which the harness calls as the engine does (on an SM90 GPU with FlashMLA, as
  vllm_sizing_0_11.py answers); no --block-size flag is kept and the backend is chosen without
  a block size; the CPU swap space (checked against this machine's RAM) is 0.
- 0.18 has no `layers/mamba/gdn_linear_attn`: Qwen3-Next's gated delta net is
  `models/qwen3_next.Qwen3NextGatedDeltaNet` (the same state shape and dtype calls, the
  attributes its constructor sets); 0.21's harness gets it under 0.19's module name. Its
  SM90 backend priority list takes no `kv_cache_dtype` (only what it declares is passed).
- No `VllmConfig.mamba_config` (0.20 adds it): the harness copies it onto each MambaMixer2 as
  0.20's constructor does; 0.19's layers never read it (`get_state_shape`,
  `get_kv_cache_spec`). The config gets None under 0.20's name.
- The block is raised while the config is built (`HybridAttentionMambaModelConfig.
  verify_and_update_config`, from `VllmConfig.try_verify_and_update_config`), and the state
  page padded to that attention page (`mamba_page_size_padded`). After load the executor's
  `Platform.update_block_size_for_backend` sets a hybrid's block back to 16 unless
  --block-size was given; the layers' specs are built at 16 and `get_kv_cache_configs`'
  `unify_kv_cache_spec_page_size` multiplies the attention spec's block back to the padded
  state page. Reported here: `block_size` and `page_bytes_per_layer` at the raised block (the
  attention group's, which accepted cases assert), and the block the runtime config holds as
  `runtime_block_size`.
- `_report_kv_cache_config` logs "GPU KV cache size" as num_blocks // groups × the smallest
  block (0.20.1 takes int(max_concurrency × max_model_len)): both logged lines are captured
  from the function's own logger, not recomputed.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import os
import re
import sys
import types
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


# Names vllm_sizing.py imports from 0.17's modules, and where 0.15-0.16 keep them.
_MOVED = {
    "vllm.model_executor.layers.attention.attention": {"Attention": "vllm.attention.layer"},
    "vllm.model_executor.layers.attention.mla_attention": {"MLAAttention": "vllm.attention.layer"},
}


class _Empty(importlib.abc.Loader):
    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        return None


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Gives a module the names a later release moved into it (an empty module where the
    release has none), each the release's own object from where it keeps it."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in _MOVED:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None:
            spec = importlib.machinery.ModuleSpec(name, _Empty())
        exec_module = spec.loader.exec_module

        def exec_and_add(module: Any) -> None:
            exec_module(module)
            for attr, source in _MOVED[name].items():
                if not hasattr(module, attr):
                    setattr(module, attr, getattr(importlib.import_module(source), attr))

        spec.loader.exec_module = exec_and_add
        return spec


sys.meta_path.insert(0, _MovedFinder())

# isort: off
import vllm_sizing_0_21  # noqa: F401,E402  (first: its switches patch what the others import)

if importlib.util.find_spec("vllm.model_executor.layers.mamba.gdn_linear_attn") is None:
    # 0.18: Qwen3-Next's gated delta net is its model file's Qwen3NextGatedDeltaNet.
    from vllm.model_executor.layers import mamba as _mamba_pkg
    from vllm.model_executor.models import qwen3_next

    _gdn = types.ModuleType("vllm.model_executor.layers.mamba.gdn_linear_attn")
    _gdn.GatedDeltaNetAttention = qwen3_next.Qwen3NextGatedDeltaNet  # type: ignore[attr-defined]
    sys.modules[_gdn.__name__] = _gdn
    _mamba_pkg.gdn_linear_attn = _gdn  # type: ignore[attr-defined]

import vllm_hybrid_sizing_0_21  # noqa: E402,F401
import vllm_hybrid_sizing as hybrid  # noqa: E402
import vllm_sizing as base  # noqa: E402
from vllm.config import VllmConfig  # noqa: E402
from vllm.platforms.interface import Platform  # noqa: E402
from vllm.v1.core import kv_cache_utils  # noqa: E402

# isort: on

_priorities = base._get_backend_priorities
_offered = inspect.signature(_priorities).parameters
if "kv_cache_dtype" not in _offered:
    # 0.18's SM90 priority list takes no cache dtype (0.19 adds it); each backend's declared
    # support still filters by it (as vllm_sizing_0_11.py does for the plain grid).
    def _priorities_offered(**kw: Any) -> Any:
        return _priorities(**{k: v for k, v in kw.items() if k in _offered})

    base._get_backend_priorities = _priorities_offered

if not hasattr(VllmConfig, "num_speculative_tokens"):
    # 0.16: the harness reads 0.17's property (the draft's k, or 0).
    VllmConfig.num_speculative_tokens = property(  # type: ignore[attr-defined]
        lambda self: (
            (self.speculative_config.num_speculative_tokens or 0)
            if self.speculative_config is not None
            else 0
        )
    )

from vllm.config.cache import CacheConfig  # noqa: E402

if "mamba_cache_mode" not in CacheConfig.__dataclass_fields__:
    # 0.14: no cache modes (0.15 adds them); the harness reports None and 0.33's GDN
    # checkpoints (align mode only) stay off.
    CacheConfig.mamba_cache_mode = None  # type: ignore[attr-defined]

if not hasattr(VllmConfig, "mamba_config"):
    VllmConfig.mamba_config = None  # type: ignore[attr-defined]

if not hasattr(Platform, "update_block_size_for_backend"):
    # 0.17: the block is final once the config is built and CudaPlatform.check_and_update_config
    # has run (FlashMLA's multiple of 64 for MLA); no after-load step, no validation, and no
    # --block-size flag kept (the attention backend is chosen without a block size, as
    # vllm_sizing_0_11.py does). The platform answers as an SM90 GPU with FlashMLA, as there.
    import importlib

    from vllm.config.cache import CacheConfig
    from vllm.platforms import cuda
    from vllm.platforms.interface import DeviceCapability

    cuda.CudaPlatform.get_device_capability = classmethod(  # type: ignore[method-assign]
        lambda cls, device_id=0: DeviceCapability(9, 0)
    )
    _flashmla = importlib.import_module("vllm.v1.attention.ops.flashmla")
    _flashmla.is_flashmla_dense_supported = lambda: (True, None)
    Platform.update_block_size_for_backend = classmethod(  # type: ignore[attr-defined]
        lambda cls, vllm_config: None
    )
    VllmConfig.validate_block_size = lambda self: None  # type: ignore[attr-defined]
    CacheConfig.user_specified_block_size = False  # type: ignore[attr-defined]
    _config_only = hybrid._engine_config

    def _engine_config_on_cuda(c: dict[str, Any], model_dir: str, extra: dict[str, Any]) -> Any:
        # CPU swap space is checked against this machine's RAM (4 GiB x TP by default); it has
        # nothing to do with the GPU KV cache (vllm_sizing_0_11.py passes 0 too).
        cfg = _config_only(c, model_dir, {**extra, "swap_space": 0})
        cuda.CudaPlatform.check_and_update_config(cfg)
        return cfg

    hybrid._engine_config = _engine_config_on_cuda

_BLOCKS: dict[str, int] = {}
_real_update = Platform.update_block_size_for_backend


def _update_seen(vllm_config: Any) -> None:
    cc = vllm_config.cache_config
    _BLOCKS["config"] = cc.block_size
    _real_update(vllm_config)
    _BLOCKS["runtime"] = cc.block_size


Platform.update_block_size_for_backend = staticmethod(_update_seen)  # type: ignore[method-assign]


class _Lines:
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


def _logged_capacity(vllm_config: Any, kv_cache_config: Any) -> tuple[int | None, float | None]:
    """What this release's `_report_kv_cache_config` logs, read from its own lines."""
    real, capture = kv_cache_utils.logger, _Lines(kv_cache_utils.logger)
    kv_cache_utils.logger = capture
    try:
        kv_cache_utils._report_kv_cache_config(vllm_config, kv_cache_config)
    finally:
        kv_cache_utils.logger = real
    tokens = concurrency = None
    for line in capture.lines:
        if m := re.search(r"GPU KV cache size: ([\d,]+) tokens", line):
            tokens = tokens if tokens is not None else int(m.group(1).replace(",", ""))
        if m := re.search(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x", line):
            concurrency = concurrency if concurrency is not None else float(m.group(1))
    return tokens, concurrency


hybrid.get_kv_cache_capacity = _logged_capacity
_one = hybrid._one


def _one_at_raised_block(c: dict[str, Any], root: str) -> dict[str, Any]:
    _BLOCKS.clear()
    out = _one(c, root)
    raised, runtime = _BLOCKS.get("config"), _BLOCKS.get("runtime")
    if raised is None or raised == runtime or out.get("block_size") != runtime:
        return out
    out["runtime_block_size"] = runtime
    out["block_size"] = raised
    out["page_bytes_per_layer"] = out["page_bytes_per_layer"] * raised // runtime
    if out["accepted"]:
        attn = {g["block_size"] for g in out["groups"] if g["kind"] != "mamba"}
        assert attn == {raised}, (attn, raised)
    return out


hybrid._one = _one_at_raised_block

if __name__ == "__main__":
    sys.exit(hybrid.main())
