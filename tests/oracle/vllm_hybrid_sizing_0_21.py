"""vLLM 0.21-0.27's own sizing of hybrid (state + attention) models, run on CPU:
vllm_hybrid_sizing.py with what these releases lack or do differently given back to it.

Runs INSIDE the oracle virtualenv, never in the service's (usage as vllm_hybrid_sizing.py).

- No `VllmConfig.num_lookahead_tokens` (0.28 adds it): the Scheduler's constructor sets the
  same number (k for EAGLE/MTP and draft models, k + 1 for DFlash; v1/core/sched/scheduler.py,
  read in 0.27.1's wheel); the config gets it under 0.28's name.
- The start check refuses at once. vllm_sizing.py's one-call planning (0.21-0.32) defers a
  worker's refusal until every worker has been checked; with one worker and a budget below
  one block vLLM itself raises the check's ValueError, while going on reaches the per-worker
  configs with 0 blocks and a ZeroDivisionError that is no answer of vLLM's. Here the
  refusal is raised where vLLM raises it, with the max-length estimate vllm_sizing.py records.
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vllm_hybrid_sizing as hybrid
import vllm_sizing as base
from vllm.config import VllmConfig
from vllm.v1.core import kv_cache_utils


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
