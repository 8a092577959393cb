"""The shapes every engine's budget returns: one term = bytes + how they were derived."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# model: estimated here; input: the caller's figure (weights); override: the caller replaced the
# estimate; engine_rule: fixed by the engine's rule; not_applicable: the engine has no such term.
TermSource = Literal["model", "input", "override", "engine_rule", "not_applicable"]


@dataclass(frozen=True, slots=True)
class Term:
    """One line of the memory split: an int of bytes and a short derivation."""

    bytes: int
    derivation: str
    source: TermSource = "model"


@dataclass(frozen=True, slots=True)
class BudgetTerms:
    """The KV budget the engine computes on one rank, and every term it subtracts.

    `kv_budget_bytes` is signed: engines log a negative "available" and then refuse to start,
    so a negative value is the engine's own figure, not a planner error.
    `reserve_bytes` is everything subtracted besides the weights (activation peak + non-torch +
    CUDA graphs where the version subtracts them, or the caller's override of that sum).
    """

    engine: str
    engine_version: str
    rule: str
    total_memory_bytes: int
    memory_fraction: float
    requested_bytes: int
    weights_bytes_per_rank: Term
    activation_peak_bytes: Term
    non_torch_bytes: Term
    cuda_graph_bytes: Term
    cuda_graph_subtracted: bool
    reserve_bytes: Term
    kv_budget_bytes: int
    derivation: str
    # Memory the engine leaves outside its budget at start-up (vLLM: free at init − requested):
    # unbudgeted CUDA-graph capture and warm-up must fit here. None where not modelled.
    headroom_bytes: int | None = None


StartStage = Literal[
    "starts",
    "init_free_memory",
    "no_kv_memory",
    "max_model_len",
    "unsupported_version",
    "explicit_over_memory",  # a budget given outright that, with the weights, overflows the GPU
]


@dataclass(frozen=True, slots=True)
class StartVerdict:
    """Whether the engine's own start-up checks pass, and its error text when they do not."""

    starts: bool
    stage: StartStage
    error_text: str | None
    # What the check compared (bytes); None where the stage did not get that far.
    check_memory_bytes: int | None = None
    needed_bytes: int | None = None
    estimated_max_model_len: int | None = None
