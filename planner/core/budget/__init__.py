"""What an engine leaves for the KV cache on a GPU, term by term, and whether it will start.

Pure: plain parameters in, frozen dataclasses out. `vllm` follows vLLM's worker memory profiling
per release (0.9–0.33); `sglang` and `trtllm` follow their own budget bases.
"""

from planner.core.budget.facts import ModelFacts
from planner.core.budget.terms import BudgetTerms, StartVerdict, Term

__all__ = ["BudgetTerms", "ModelFacts", "StartVerdict", "Term"]
