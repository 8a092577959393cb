"""vLLM 0.21-0.24's own sizing, run on CPU: vllm_sizing.py with the attention backends asked
about their kernel block sizes inside the engine's config context, as vLLM asks them.

Runs INSIDE the oracle virtualenv, never in the service's (usage as vllm_sizing.py).

Why: in these releases FlashAttention's `get_supported_kernel_block_sizes` reads
`get_current_vllm_config()` (a hybrid with a float32 state gets [16, 32, 64], every other model
MultipleOf(16); vllm/v1/attention/backends/flash_attn.py, read in 0.24.0's wheel). vLLM picks the
backend while it builds the layers, under `set_current_vllm_config`; asked outside it, the
backend raises an AssertionError that is no answer of vLLM's. So the engine config built for a
case is kept, and the backend choice made inside its context.

And 0.21-0.23 have no `kv_cache_utils.get_kv_cache_capacity` (0.24 adds it): their
`_report_kv_cache_config` computes the same two logged figures inline (max_concurrency =
`get_max_concurrency_for_kv_cache_config`, tokens = int(max_concurrency × max_model_len)); the
module gets that function under 0.24's name when it is first imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.metadata
import importlib.util
import os
import sys
import types
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class _CapacityFinder(importlib.abc.MetaPathFinder):
    """Gives vllm.v1.core.kv_cache_utils 0.24's get_kv_cache_capacity where it lacks it."""

    NAME = "vllm.v1.core.kv_cache_utils"

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != self.NAME:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        exec_module = spec.loader.exec_module

        def exec_and_add(module: Any) -> None:
            exec_module(module)
            if not hasattr(module, "get_kv_cache_capacity"):
                module.get_kv_cache_capacity = _capacity(module)

        spec.loader.exec_module = exec_and_add
        return spec


def _capacity(kv_cache_utils: Any) -> Any:
    def get_kv_cache_capacity(vllm_config: Any, kv_cache_config: Any) -> tuple[int, float]:
        # What _report_kv_cache_config logs in 0.21-0.23.
        concurrency = kv_cache_utils.get_max_concurrency_for_kv_cache_config(
            vllm_config, kv_cache_config
        )
        return int(concurrency * vllm_config.model_config.max_model_len), concurrency

    return get_kv_cache_capacity


sys.meta_path.insert(0, _CapacityFinder())
# 0.21-0.23's platforms/cuda.py also imports the compiled ops (vllm._C, which needs libcuda) only
# to register them: an empty module stands in there, as in vllm_sizing_0_11.py (0.24's no longer
# imports it, and is left as it is).
if tuple(int(x) for x in importlib.metadata.version("vllm").split(".")[:2]) < (0, 24):
    sys.modules.setdefault("vllm._C", types.ModuleType("vllm._C"))

import vllm_sizing as base  # noqa: E402

_CURRENT: dict[str, Any] = {}
_engine_config = base._engine_config
_select_backend = base._select_backend


def _engine_config_kept(c: dict[str, Any], model_dir: str) -> Any:
    cfg = _engine_config(c, model_dir)
    _CURRENT["cfg"] = cfg
    return cfg


def _select_backend_in_context(**kw: Any) -> Any:
    with base.set_current_vllm_config(_CURRENT["cfg"]):
        return _select_backend(**kw)


base._engine_config = _engine_config_kept
base._select_backend = _select_backend_in_context

if __name__ == "__main__":
    sys.exit(base.main())
