"""vLLM 0.9 and 0.10's own KV-cache sizing, run on CPU: vllm_sizing_0_11.py with the switches
these two releases need (usage and output as vllm_sizing.py).

Runs INSIDE a release's oracle virtualenv (0.9.2, 0.10.2). What differs from 0.11 (read in the
0.9.2 and 0.10.2 wheels), and what this file does about it:
- No `MLAAttentionSpec`: an MLA layer is a `FullAttentionSpec` with `use_mla=True` (page =
  block × latent width, no factor 2); 0.9 has no `ChunkedLocalAttentionSpec` either (Llama-4's
  local layers are plain `Attention`, chunked inside the backend, and sized as full attention).
  Their names are given to `kv_cache_interface` as classes nothing is an instance of, so the
  0.11 harness imports, and a group is "mla" by its spec's `use_mla`.
- No `get_kv_cache_configs` / `generate_scheduler_kv_cache_config`: the engine core
  (`EngineCore._initialize_kv_caches`) sizes each worker on its own (`get_kv_cache_config`:
  the one-request check, then that worker's own grouping), then `unify_kv_cache_configs` sorts
  the groups, asserts that workers 0 and i pair up group by group, gives every worker the
  smallest num_blocks, and the scheduler takes worker 0's config. `kv_cache_utils` gets those
  two steps under 0.11's names, as that code (its AssertionError is vLLM failing to start).
- No `kv_cache_memory_bytes` (0.9; 0.10 has it, for the profiler only): the budget goes to
  the KV-cache functions directly, as in every harness, so it is not passed to EngineArgs.
- 0.9 has no async scheduling at all: `async_scheduling=True` is passed (EngineArgs refuses the
  unknown argument, as `vllm serve --async-scheduling` does), `False` (its only mode) is not.
- 0.9's VllmConfig turns the hybrid KV-cache manager off unless `current_platform.is_cuda()`
  (0.10: `support_hybrid_kv_cache()`, stubbed by the 0.11 harness). CUDA leaves it on unless a
  KV transfer or KV events config is set, so that flag is given CUDA's answer after the config
  is built; `is_cuda()` itself is left alone (many other config paths read it).
- Both fall back to the V0 engine where `EngineArgs._is_v1_supported_oracle` says V1 cannot
  run a configuration. kvplan models V1, so `VLLM_USE_V1=1` is set: such a configuration raises
  (the release's own message) instead of being sized by V0. The oracle asks the platform:
  `supports_v1` (CUDA: True) and, for a KV cache other than auto, whether it is supported
  (0.10: `is_kv_cache_dtype_supported`; 0.9: `is_cuda()` and FlashAttention's fp8 support),
  and the config asks `is_async_output_supported` (a V0 leftover): CUDA's own classmethods
  answer them (0.9: `is_cuda()` only inside the V1 oracle). FlashAttention 3 on SM90 supports
  an fp8 cache (`fa_utils.flash_attn_supports_fp8`, which needs the CUDA kernels to ask): True
  here, as on an H100.
- 0.9's ModelConfig moves an interleaved window (Gemma-2/3: the config has a
  `sliding_window_pattern`) to `interleaved_sliding_window` and deletes `sliding_window`; the
  model files pick the sliding layers themselves (gemma2.py: even layers; gemma3.py: every layer
  but each `sliding_window_pattern`-th), not by `layer_types` as 0.10+ do. The 0.11 harness's
  layer list is given those layers.
- 0.9 registers Llama-4 only as `Llama4ForConditionalGeneration`; the oracle sizes multimodal
  wrappers as their text-only class (test_vllm_oracle.py `_oracle_config`), and 0.9's wheel
  ships `llama4.Llama4ForCausalLM`: it is registered under its own name.
- 0.9.2 imports only with transformers 4.53 or older (requirements-0.9.2.txt), whose configs
  still carry `sliding_window_pattern` and have no DeepSeek-V2 (0.9.2 ran it as the hub's
  remote code): the test module leaves DeepSeek-V2-Lite out of 0.9's grid.
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ["VLLM_USE_V1"] = "1"

import vllm.v1.core.kv_cache_utils as _kvu
import vllm.v1.kv_cache_interface as _kvi


class _Absent:
    """Stands for a spec class the release does not have: nothing is an instance of it."""


for _name in ("MLAAttentionSpec", "ChunkedLocalAttentionSpec"):
    if not hasattr(_kvi, _name):
        setattr(_kvi, _name, type(_name, (_Absent,), {}))


def _get_kv_cache_configs(vllm_config: Any, kv_cache_specs: list[Any], available: list[int]):
    """EngineCore._initialize_kv_caches in 0.9.2 / 0.10.2: each worker's own config, unified."""
    configs = [
        _kvu.get_kv_cache_config(vllm_config, spec, memory)
        for spec, memory in zip(kv_cache_specs, available, strict=True)
    ]
    _kvu.unify_kv_cache_configs(configs)
    return configs


if not hasattr(_kvu, "get_kv_cache_configs"):
    _kvu.get_kv_cache_configs = _get_kv_cache_configs
    # "All workers have the same kv_cache_config except layer names, so use an arbitrary one
    # to initialize the scheduler": worker 0's.
    _kvu.generate_scheduler_kv_cache_config = lambda configs: configs[0]

import vllm_sizing_0_11 as base  # noqa: E402

_RealEngineArgs = base.EngineArgs
_PARAMS = inspect.signature(_RealEngineArgs).parameters


class _Args:
    """EngineArgs with the arguments the release lacks left out (see the module docstring)."""

    def __init__(self, args: Any) -> None:
        self._args = args

    def create_engine_config(self) -> Any:
        cfg = self._args.create_engine_config()
        sc = cfg.scheduler_config
        if not hasattr(sc, "async_scheduling"):
            sc.async_scheduling = False  # 0.9: the only mode there is
        if base.RELEASE < (0, 10) and cfg.kv_transfer_config is cfg.kv_events_config is None:
            sc.disable_hybrid_kv_cache_manager = False  # what 0.9's check gives on CUDA
        return cfg


def _engine_args(**kw: Any) -> _Args:
    if "kv_cache_memory_bytes" not in _PARAMS:
        kw.pop("kv_cache_memory_bytes", None)
    if "async_scheduling" not in _PARAMS and not kw.get("async_scheduling"):
        kw.pop("async_scheduling", None)
    return _Args(_RealEngineArgs(**kw))


_engine_args.__signature__ = inspect.signature(_RealEngineArgs)  # type: ignore[attr-defined]
base.EngineArgs = _engine_args

# What the config path asks the platform, answered by CUDA's own classmethods (SM90).
_platform = type(base.current_platform)
for _ask in ("supports_v1", "is_async_output_supported", "is_kv_cache_dtype_supported"):
    if base.CUDA is not None and hasattr(base.CUDA, _ask):
        setattr(_platform, _ask, getattr(base.CUDA, _ask))
import vllm.attention.utils.fa_utils as _fa_utils  # noqa: E402

_fa_utils.flash_attn_supports_fp8 = lambda: True
if base.RELEASE < (0, 10):
    _v1_oracle = _RealEngineArgs._is_v1_supported_oracle

    def _v1_oracle_on_cuda(self: Any, model_config: Any) -> bool:
        """0.9's oracle asks is_cuda() for its fp8 and compute-capability checks."""
        saved = _platform.is_cuda
        _platform.is_cuda = lambda self: True  # type: ignore[assignment,method-assign]
        try:
            return bool(_v1_oracle(self, model_config))
        finally:
            _platform.is_cuda = saved  # type: ignore[method-assign]

    _RealEngineArgs._is_v1_supported_oracle = _v1_oracle_on_cuda  # type: ignore[method-assign]

_kind_of = base._kind_of


def _kind_of_old(spec: Any) -> str:
    return "mla" if getattr(spec, "use_mla", False) else _kind_of(spec)


base._kind_of = _kind_of_old

_layers = base._layers


def _layers_0_9(cfg: Any, tp: int) -> list[dict[str, Any]]:
    hf = cfg.model_config.hf_text_config
    window = getattr(hf, "interleaved_sliding_window", None)
    if window is None:
        return _layers(cfg, tp)
    n, mtype = hf.num_hidden_layers, hf.model_type
    if mtype == "gemma2":
        sliding = [i % 2 == 0 for i in range(n)]
    elif mtype == "gemma3_text":
        sliding = [bool((i + 1) % hf.sliding_window_pattern) for i in range(n)]
    else:
        raise NotImplementedError(f"0.9 harness: {mtype}'s interleaved layers are not read")
    saved = hf.__dict__.get("layer_types")
    hf.sliding_window = window
    hf.layer_types = ["sliding_attention" if s else "full_attention" for s in sliding]
    try:
        return _layers(cfg, tp)
    finally:
        del hf.sliding_window  # as 0.9's ModelConfig left it
        hf.layer_types = saved


if base.RELEASE < (0, 10):
    base._layers = _layers_0_9

if base.ChunkedLocalAttention is None:
    # 0.9: Llama-4's local layers are Attention layers like the others.
    base.ChunkedLocalAttention = base.Attention

try:
    from vllm import ModelRegistry

    if "Llama4ForCausalLM" not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model(
            "Llama4ForCausalLM", "vllm.model_executor.models.llama4:Llama4ForCausalLM"
        )
except ImportError:  # pragma: no cover - reported per configuration
    pass

if __name__ == "__main__":
    sys.exit(base.main())
