"""vLLM 0.10.2's own sizing of hybrid (state + attention) models, run on CPU: the 0.11 hybrid
harness (vllm_hybrid_sizing_0_11.py; same input and output) over the switches
vllm_sizing_0_9.py gives 0.9 and 0.10 (per-worker KV-cache configs unified as the engine core
does, no MLA spec class, the platform's V1 questions answered as CUDA's). 0.10.2 is the first
release that runs these models on V1 by default, with 0.11's `HybridAttentionMambaModelConfig`
(read in both wheels); its runner's `get_kv_cache_spec` and `MambaSpec` are its own.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# isort: off
import vllm_sizing_0_9  # noqa: F401  (its switches first, before the 0.11 harness imports)
import vllm_hybrid_sizing_0_11 as hybrid

# isort: on

if __name__ == "__main__":
    sys.exit(hybrid.main())
