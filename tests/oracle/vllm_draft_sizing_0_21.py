"""vLLM 0.21-0.27's own sizing of speculative drafts and KV-sharing layers, run on CPU:
vllm_draft_sizing.py with what these releases lack given back to it.

Runs INSIDE the oracle virtualenv, never in the service's (usage as vllm_draft_sizing.py).

- No `VllmConfig.num_lookahead_tokens` (0.28 adds it): the Scheduler's constructor sets the
  same number (k for EAGLE/MTP and draft models, k + 1 for DFlash, 0 for n-gram;
  v1/core/sched/scheduler.py, read in 0.27.1's wheel); the config gets it under 0.28's name,
  as vllm_hybrid_sizing_0_21.py gives it.
- 0.21-0.24: the plain harness's own shims (vllm_sizing_0_21.py: the attention backend asked
  inside the engine's config context, 0.24's get_kv_cache_capacity for 0.21-0.23, no
  vllm._C), with the draft harness's engine config as the context.
- MLAAttention.__init__ writes a sparse layer's canonical cache dtype (FlashMLA-sparse: fp8 →
  fp8_ds_mla) back into `cache_config.cache_dtype` (0.24 names that test
  `_canonicalize_sparse_mla_kv_cache_dtype`; 0.21-0.23 write it inline in `__init__`, as
  FlashMLA-sparse with a quantized cache dtype other than fp8_ds_mla: the harness gives the
  module that test under 0.24's name), and where the release's
  `MLAAttention.get_kv_cache_spec` names the spec's `cache_dtype_str` from there (0.24; 0.29+
  take the layer's own) the page size depends on it: the harness's layers do the same write.
- What vllm_draft_sizing.py already reads per release (no `is_draft` on the specs before 0.28,
  no `extra_retained_tokens` before 0.28, the one-call planning of 0.21-0.32, the admission
  cap's max_num_batched_tokens before 0.26) stays there.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

RELEASE = tuple(int(x) for x in importlib.metadata.version("vllm").split(".")[:2])
if RELEASE < (0, 25):
    # First: it patches what the others import.
    import vllm_sizing_0_21 as shims

import vllm_draft_sizing as draft  # noqa: E402
from vllm.config import VllmConfig  # noqa: E402


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

if RELEASE < (0, 25):
    _engine_config = draft._engine_config

    def _engine_config_kept(c: dict[str, Any], model_dir: str, root: str) -> Any:
        cfg = _engine_config(c, model_dir, root)
        shims._CURRENT["cfg"] = cfg
        return cfg

    draft._engine_config = _engine_config_kept

from vllm.model_executor.layers.attention import mla_attention  # noqa: E402
from vllm.model_executor.layers.attention.mla_attention import MLAAttention  # noqa: E402

if not hasattr(mla_attention, "_canonicalize_sparse_mla_kv_cache_dtype"):

    def _canonicalize_inline(backend: Any, kv_cache_dtype: str) -> str:
        """0.21-0.23: MLAAttention.__init__'s own test, not yet a function of its module."""
        if (
            backend.get_name() == "FLASHMLA_SPARSE"
            and mla_attention.is_quantized_kv_cache(kv_cache_dtype)
            and kv_cache_dtype != "fp8_ds_mla"
        ):
            return "fp8_ds_mla"
        return kv_cache_dtype

    mla_attention._canonicalize_sparse_mla_kv_cache_dtype = _canonicalize_inline

if "cache_config.cache_dtype" in inspect.getsource(MLAAttention.get_kv_cache_spec):
    _make_sparse = draft._make_sparse

    def _make_sparse_written_back(obj: Any, cfg: Any, backend: Any) -> None:
        _make_sparse(obj, cfg, backend)
        cfg.cache_config.cache_dtype = obj.kv_cache_dtype  # MLAAttention.__init__

    draft._make_sparse = _make_sparse_written_back

if __name__ == "__main__":
    sys.exit(draft.main())
