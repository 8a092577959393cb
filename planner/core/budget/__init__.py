"""What an engine leaves for the KV cache on a GPU, term by term, and whether it will start.

Pure: plain parameters in, frozen dataclasses out. The shapes shared by every engine live here;
each engine's own rules live with it (`engines/vllm/budget.py`, `engines/vllm/start.py`,
`engines/sglang/budget.py`, `engines/trtllm/budget.py`).
"""

from planner.core.budget.facts import ModelFacts
from planner.core.budget.terms import BudgetTerms, StartVerdict, Term

__all__ = ["BudgetTerms", "ModelFacts", "StartVerdict", "Term"]
