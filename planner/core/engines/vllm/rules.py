"""vLLM's memory rules per release range (0.9–0.33): which formula "Available KV cache memory"
follows, its default gpu_memory_utilization, what it subtracts, and what its start check counts.
Read in the released wheels; see `budget.py` for the sources."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from planner.core.engines.versions import Version, parse_version, since, version_text
from planner.core.engines.vllm.releases import RELEASES
from planner.core.errors import FieldError
from planner.core.units import GiB


def parse_vllm_version(text: str) -> Version:
    """'0.19.0', '0.29.1rc1.dev17+gd2d…', 'v0.15.2rc1' → the release (pre-releases kept, so
    that they order before their final release); refuses a release outside `RELEASES`."""
    words = (text or "").split()
    v = parse_version(words[0]) if words else None  # "0.10.1.dev (main, …)": its first word
    if v is None:
        raise FieldError(
            "engine_version", f"{text!r} is not a vLLM version; give one such as '0.19.0'"
        )
    if not RELEASES.covers(v):
        raise FieldError(
            "engine_version",
            f"vLLM {text} is outside the releases whose memory profiling is modelled "
            f"({version_text(RELEASES.first)}.0–{version_text(RELEASES.last)}.x)",
        )
    return v


Scope = Literal["stage", "whole_model"]
Formula = Literal["peak_all", "increase_nccl_charged", "increase", "consumed_transient"]


@dataclass(frozen=True, slots=True)
class VllmRules:
    """What one range of releases does; `since` is the first release the row applies to."""

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


def _row(
    since: Version,
    formula: Formula,
    nt: tuple[int, int, str],
    *,
    sort: bool = False,
    ceil_: bool = True,
    est: bool = True,
    sub: bool = True,
    util: float = 0.92,
    scope: Scope = "stage",
    null: bool = False,
) -> VllmRules:
    return VllmRules(
        since=since,
        formula=formula,
        requested_ceil=ceil_,
        sampler_extra_bytes_per_logit=_SORT_EXTRA if sort else _TRITON_EXTRA,
        sampler_note=_SORT_NOTE if sort else _TRITON_NOTE,
        non_torch_tp1_bytes=nt[0],
        non_torch_tp_multi_bytes=nt[1],
        non_torch_note=nt[2],
        graphs_estimated=est,
        graphs_subtracted_by_default=sub,
        default_utilization=util,
        max_len_scope=scope,
        null_block_in_check=null,
    )


# One row per range of releases in which every rule held; a row applies up to the next one.
_RULES: tuple[VllmRules, ...] = (
    _row((0, 9, 0), "peak_all", _NT_010, sort=True, ceil_=False, est=False, sub=False, util=0.9),
    _row(
        (0, 9, 1),
        "increase_nccl_charged",
        _NT_010,
        sort=True,
        ceil_=False,
        est=False,
        sub=False,
        util=0.9,
    ),
    _row((0, 11, 0), "increase", _NT_011, sort=True, ceil_=False, est=False, sub=False, util=0.9),
    _row(
        (0, 14, 0),
        "increase",
        _NT_011,
        sort=True,
        est=False,
        sub=False,
        util=0.9,
        scope="whole_model",
    ),
    _row((0, 17, 0), "increase", _NT_017, est=False, sub=False, util=0.9),
    _row((0, 18, 0), "increase", _NT_017, sub=False, util=0.9),
    _row((0, 20, 0), "increase", _NT_017),
    _row((0, 27, 0), "consumed_transient", _NT_017),
    _row((0, 29, 0), "consumed_transient", _NT_017, null=True),
)


def vllm_rules(engine_version: str) -> VllmRules:
    v = parse_vllm_version(engine_version)
    return [r for r in _RULES if since(v, r.since)][-1]


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
