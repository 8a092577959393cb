"""vLLM's memory rules per release range (0.9–0.33): which formula "Available KV cache memory"
follows, its default gpu_memory_utilization, what it subtracts, and what its start check counts.
Read in the released wheels; see `budget.py` for the sources."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from planner.core.engines.versions import Version, parse_version, since, version_text
from planner.core.engines.vllm.releases import (
    CONSUMED_TRANSIENT_SINCE,
    GRAPHS_ESTIMATED_SINCE,
    GRAPHS_SUBTRACTED_SINCE,
    NCCL_UNCHARGED_SINCE,
    POOL_NEED_SINCE,
    PROFILE_INCREASE_SINCE,
    RELEASES,
    REQUEST_CEIL_SINCE,
    TRITON_SAMPLER_SINCE,
    UTIL_092_SINCE,
    WHOLE_MODEL_CHECK_SINCE,
    WORKER_CHECK_SINCE,
)
from planner.core.errors import FieldError
from planner.core.model import ModelShape
from planner.core.units import GiB


def parse_vllm_version(text: str) -> Version:
    """'0.19.0', '0.29.1rc1.dev17+gd2d…', 'v0.15.2rc1' → the release (pre-releases kept, so
    that they order before their final release); refuses a release outside `RELEASES`."""
    words = (text or "").split()
    v = parse_version(words[0]) if words else None  # "0.10.1.dev (main, …)": its first word
    if v is None:
        raise FieldError("engine_version", "vllm.version_unreadable", text=text)
    if not RELEASES.covers(v):
        raise FieldError(
            "engine_version",
            "vllm.release_outside_rules",
            text=text,
            first=version_text(RELEASES.first),
            last=version_text(RELEASES.last),
        )
    return v


Scope = Literal["stage", "whole_model"]
Formula = Literal["peak_all", "increase_nccl_charged", "increase", "consumed_transient"]


@dataclass(frozen=True, slots=True)
class VllmRules:
    """What one release does; `since` is the latest release boundary it has reached."""

    since: Version
    formula: Formula
    requested_ceil: bool
    sampler_extra_bytes_per_logit: int  # on top of the compute dtype's own logits
    sampler_note: str
    non_torch_tp1_bytes: int
    non_torch_tp_multi_bytes: int
    non_torch_note: str
    graphs_estimated: bool
    graphs_subtracted_by_default: bool
    default_utilization: float
    max_len_scope: Scope
    null_block_in_check: bool


# Logit bytes: the dtype's logits + fp32 logits + fp32 probs + fp32 exponential noise = d + 12
# in the Triton path; the sort path adds sorted values, int64 indices, a softmax and a cumsum
# (fitted: d + 35, training logs vllm011x-llama31-8b and vllm0101dev-gemma3-4b).
_SORT_EXTRA, _TRITON_EXTRA = 35, 12
_SORT_NOTE = "PyTorch sort top-k/top-p (≤0.16): fitted 35 B + dtype per logit"
_TRITON_NOTE = "Triton top-k/top-p (≥0.17): fp32 logits, probs, noise = 12 B + dtype per logit"
# Non-torch increase during the profile (fitted on training logs; see each note).
_NT_010 = (
    int(0.07 * GiB),
    int(1.6 * GiB),
    "0.9.1–0.10.x: 0.07 GiB at TP1 (B200 log); at TP≥2 NCCL set-up falls after the snapshot "
    "and is charged: ~1.6 GiB, not checked against a log",
)
_NT_011 = (
    int(0.13 * GiB),
    int(0.55 * GiB),
    "0.11–0.16: 0.13 GiB at TP1 (fitted), 0.55 GiB at TP≥2 (observed in 0.11–0.14 logs)",
)
_NT_017 = (
    int(0.25 * GiB),
    int(2.07 * GiB),
    "0.17+: 0.25 GiB at TP1, 2.07 GiB at TP≥2 (fitted on 0.19 logs: NCCL/custom all-reduce "
    "buffers created in the first forward)",
)


# The release boundaries these rules change at (releases.py), oldest first.
_BOUNDARIES = (
    PROFILE_INCREASE_SINCE, NCCL_UNCHARGED_SINCE, REQUEST_CEIL_SINCE, WHOLE_MODEL_CHECK_SINCE,
    TRITON_SAMPLER_SINCE, WORKER_CHECK_SINCE, GRAPHS_ESTIMATED_SINCE, GRAPHS_SUBTRACTED_SINCE,
    UTIL_092_SINCE, CONSUMED_TRANSIENT_SINCE, POOL_NEED_SINCE,
)  # fmt: skip


def _formula(v: Version) -> Formula:
    if since(v, CONSUMED_TRANSIENT_SINCE):
        return "consumed_transient"
    if since(v, NCCL_UNCHARGED_SINCE):
        return "increase"
    return "increase_nccl_charged" if since(v, PROFILE_INCREASE_SINCE) else "peak_all"


@lru_cache(maxsize=256)  # a frozen answer per release text, asked several times a plan
def vllm_rules(engine_version: str) -> VllmRules:
    """The memory rules of one release, each from the release that first had it (the one table
    of vLLM's release facts, releases.py)."""
    v = parse_vllm_version(engine_version)
    sort = not since(v, TRITON_SAMPLER_SINCE)
    if not sort:
        nt = _NT_017
    else:
        nt = _NT_011 if since(v, NCCL_UNCHARGED_SINCE) else _NT_010
    whole = since(v, WHOLE_MODEL_CHECK_SINCE) and not since(v, WORKER_CHECK_SINCE)
    reached = [first for first in _BOUNDARIES if since(v, first)]
    start = max(reached, default=RELEASES.first)
    return VllmRules(
        since=(*start, 0, 0)[:3],
        formula=_formula(v),
        requested_ceil=since(v, REQUEST_CEIL_SINCE),
        sampler_extra_bytes_per_logit=_SORT_EXTRA if sort else _TRITON_EXTRA,
        sampler_note=_SORT_NOTE if sort else _TRITON_NOTE,
        non_torch_tp1_bytes=nt[0],
        non_torch_tp_multi_bytes=nt[1],
        non_torch_note=nt[2],
        graphs_estimated=since(v, GRAPHS_ESTIMATED_SINCE),
        graphs_subtracted_by_default=since(v, GRAPHS_SUBTRACTED_SINCE),
        default_utilization=0.92 if since(v, UTIL_092_SINCE) else 0.9,
        max_len_scope="whole_model" if whole else "stage",
        null_block_in_check=since(v, POOL_NEED_SINCE),
    )


def vllm_default_memory_utilization(engine_version: str) -> float:
    return vllm_rules(engine_version).default_utilization


def requested_bytes(engine_version: str, total_memory_bytes: int, utilization: float) -> int:
    """What vLLM requests of a GPU: ⌈total × util⌉ from 0.14 (request_memory), × util before."""
    raw = total_memory_bytes * utilization
    return math.ceil(raw) if vllm_rules(engine_version).requested_ceil else int(raw)


def vllm_max_len_scope(engine_version: str) -> Scope:
    """Which layers vLLM's one-request check and max-length estimate count under PP.

    "whole_model" (0.14–0.16): every layer of the model against the smallest worker's budget.
    "stage": that worker's own layers (the binding worker is the one that fails first).
    """
    return vllm_rules(engine_version).max_len_scope


def derived_max_model_len(shape: ModelShape) -> int | None:
    """`_get_and_verify_max_len` (0.14+: derive_max_model_len_and_key): the config's length
    scaled by RoPE scaling (not for su/longrope/llama3 types, nor Gemma-3, whose length is
    already scaled; yarn scales its original length), and `model_max_length` over both, even
    when larger."""
    derived = shape.max_position_embeddings
    rope = shape.rope_scaling
    if derived is not None and rope is not None and "gemma3" not in (shape.model_type or ""):
        kind, factor, original = rope
        if kind not in ("su", "longrope", "llama3", "default", "mrope"):
            base = original if kind == "yarn" and original else derived
            derived = int(base * factor)
    if shape.model_max_length is not None:
        return shape.model_max_length
    return derived
