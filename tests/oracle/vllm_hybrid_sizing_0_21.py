"""vLLM 0.21-0.27's own sizing of hybrid (state + attention) models, run on CPU:
vllm_hybrid_sizing.py with what these releases lack or do differently given back to it.

Runs INSIDE the oracle virtualenv, never in the service's (usage as vllm_hybrid_sizing.py).

- No `VllmConfig.num_lookahead_tokens` (0.28 adds it): the Scheduler's constructor sets the
  same number (k for EAGLE/MTP and draft models, k + 1 for DFlash; v1/core/sched/scheduler.py,
  read in 0.27.1's wheel); the config gets it under 0.28's name.
- 0.21-0.24: the plain harness's own shims (vllm_sizing_0_21.py: the attention backend asked
  inside the engine's config context, 0.24's get_kv_cache_capacity for 0.21-0.23, no
  vllm._C), with the hybrid harness's engine config as the context.
- 0.21 has no `layers/mamba/gdn` package: its gated delta net is
  `layers/mamba/gdn_linear_attn.GatedDeltaNetAttention` (Qwen3-Next's; 0.22 splits it into the
  base class and QwenGatedDeltaNetAttention) and Kimi's KDA `layers/kda.KimiDeltaAttention`
  (no GDN subclass: it takes its tensor-parallel size the same way). The hybrid harness gets
  them under 0.22's module names.
- No `is_draft` on the KV-cache specs (0.28 adds it; `speculator.load_model` marks nothing
  before): an MTP draft's attention layers keep the target's plain spec.
- The start check refuses at once. vllm_sizing.py's one-call planning (0.21-0.32) defers a
  worker's refusal until every worker has been checked; with one worker and a budget below
  one block vLLM itself raises the check's ValueError, while going on reaches the per-worker
  configs with 0 blocks and a ZeroDivisionError that is no answer of vLLM's. Here the
  refusal is raised where vLLM raises it, with the max-length estimate vllm_sizing.py records.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import sys
import types
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

RELEASE = tuple(int(x) for x in importlib.metadata.version("vllm").split(".")[:2])
if RELEASE < (0, 25):
    # First: it patches what the others import.
    import vllm_sizing_0_21 as shims
if RELEASE < (0, 22):
    from vllm.model_executor.layers import kda
    from vllm.model_executor.layers.mamba import gdn_linear_attn

    _names = {
        "base": ("GatedDeltaNetAttention", gdn_linear_attn.GatedDeltaNetAttention),
        "qwen_gdn_linear_attn": (
            "QwenGatedDeltaNetAttention",
            gdn_linear_attn.GatedDeltaNetAttention,
        ),
        "kimi_gdn_linear_attn": ("KimiGatedDeltaNetAttention", kda.KimiDeltaAttention),
    }
    _package = types.ModuleType("vllm.model_executor.layers.mamba.gdn")
    _package.__path__ = []
    sys.modules[_package.__name__] = _package
    for _leaf, (_attr, _cls) in _names.items():
        _mod = types.ModuleType(f"{_package.__name__}.{_leaf}")
        setattr(_mod, _attr, _cls)
        setattr(_package, _leaf, _mod)
        sys.modules[_mod.__name__] = _mod

import vllm_hybrid_sizing as hybrid  # noqa: E402
import vllm_sizing as base  # noqa: E402
from vllm.config import VllmConfig  # noqa: E402
from vllm.v1.core import kv_cache_utils  # noqa: E402
from vllm.v1.kv_cache_interface import FullAttentionSpec  # noqa: E402

if "is_draft" not in {f.name for f in dataclasses.fields(FullAttentionSpec)}:

    def _replace_known(obj: Any, **changes: Any) -> Any:
        names = {f.name for f in dataclasses.fields(obj)}
        return dataclasses.replace(obj, **{k: v for k, v in changes.items() if k in names})

    hybrid.replace = _replace_known

if RELEASE < (0, 25):
    _engine_config = hybrid._engine_config

    def _engine_config_kept(c: dict[str, Any], model_dir: str, extra: dict[str, Any]) -> Any:
        cfg = _engine_config(c, model_dir, extra)
        shims._CURRENT["cfg"] = cfg
        return cfg

    hybrid._engine_config = _engine_config_kept
if RELEASE < (0, 22):
    _mamba_layer = hybrid._mamba_layer

    def _mamba_layer_sized(kind: str, cfg: Any, prefix: str) -> Any:
        obj = _mamba_layer(kind, cfg, prefix)
        if kind == "kda":  # KimiDeltaAttention.__init__: get_tensor_model_parallel_world_size
            obj.tp_size = hybrid._tp()
        return obj

    hybrid._mamba_layer = _mamba_layer_sized


def _lookahead_tokens(cfg: Any) -> int:
    sc = cfg.speculative_config
    if sc is None:
        return 0
    k = cfg.num_speculative_tokens
    if getattr(sc, "use_dflash", lambda: False)():
        return k + 1
    return k if sc.use_eagle() or sc.uses_draft_model() else 0


if not hasattr(VllmConfig, "num_lookahead_tokens"):
    VllmConfig.num_lookahead_tokens = property(_lookahead_tokens)  # type: ignore[attr-defined]


class _Refused(Exception):
    """The start check's ValueError, carried past the deferral in vllm_sizing.py."""


_in_one_call = base._plan_kv_cache_in_one_call


def _plan_refusing_at_once(
    cfg: Any, specs: list[dict[str, Any]], available: list[int], search_cap: int, out: Any
) -> list[Any]:
    real_check = kv_cache_utils._check_enough_kv_cache_memory

    def check_now(memory: int, need: Any, max_len: int, estimate: Any) -> None:
        try:
            real_check(memory, need, max_len, estimate)
        except ValueError as e:
            # vllm_sizing.py's record of the longest context (it runs the estimate first).
            mc = cfg.model_config
            saved, mc.max_model_len = mc.max_model_len, search_cap
            try:
                out["longest_context_tokens"] = estimate(memory) if memory > 0 else 0
            finally:
                mc.max_model_len = saved
            raise _Refused(e) from None

    kv_cache_utils._check_enough_kv_cache_memory = check_now
    try:
        return _in_one_call(cfg, specs, available, search_cap, out)
    except _Refused as r:
        raise r.args[0] from None
    finally:
        kv_cache_utils._check_enough_kv_cache_memory = real_check


base._plan_kv_cache_in_one_call = _plan_refusing_at_once

if __name__ == "__main__":
    sys.exit(hybrid.main())
