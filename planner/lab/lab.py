"""Seed 000's lab as one pure function: every check the `kvplan lab` command prints.

The CLI and API only format this report. Checks that gate the exit code are collected in
`LabReport.checks`; the quantized-cache error is a measurement (a lossy write is expected to miss
the tolerance), not a check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from planner.core.specs import dense_kv_bytes
from planner.lab import reference as ref
from planner.lab.counting import CountRow, count_table
from planner.lab.ring import RingCheck, check_ring

DEFAULT_CHUNKS: tuple[int, ...] = (1, 3, 2, 5)
DEFAULT_SHAPE = ref.Shape(layers=2, q_heads=4, kv_heads=2, head_dim=8, model_dim=32)
COUNT_DIM = 8
COUNT_LENGTHS: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
RING_CAPACITY = 4
QUANT_BITS: tuple[int, ...] = (8, 4)


@dataclass(frozen=True, slots=True)
class Comparison:
    name: str
    max_abs_diff: float
    first_mismatch: int | None
    # True when the two runs should agree; False for a planted bug that must be caught.
    expect_equal: bool = True

    @property
    def passed(self) -> bool:
        return (self.first_mismatch is None) == self.expect_equal


def compare(name: str, a: ref.Array, b: ref.Array, *, expect_equal: bool = True) -> Comparison:
    return Comparison(name, ref.max_abs_diff(a, b), ref.first_mismatch(a, b), expect_equal)


@dataclass(frozen=True, slots=True)
class KVExample:
    """Seed 000: L=32, Hkv=8, d=128, 2-byte elements -> 128 KiB/token; 8192 tokens -> 1 GiB."""

    bytes_per_token: int
    tokens: int
    total_bytes: int


def seed_kv_example(tokens: int = 8192) -> KVExample:
    def kv(n: int) -> int:
        return dense_kv_bytes(layers=32, kv_heads=8, head_dim=128, tokens=n, bits_per_element=16)

    return KVExample(kv(1), tokens, kv(tokens))


@dataclass(frozen=True, slots=True)
class QuantResult:
    bits: int
    max_abs_diff: float
    first_mismatch: int | None
    tolerance: float

    @property
    def within_tolerance(self) -> bool:
        return self.first_mismatch is None


@dataclass(frozen=True, slots=True)
class LabReport:
    seed: int
    chunks: tuple[int, ...]
    shape: ref.Shape
    full_vs_token: Comparison
    full_vs_chunks: Comparison
    wrong_mask: Comparison
    wrong_offset: Comparison
    gqa_indexed_vs_repeat: Comparison
    ring: RingCheck
    kv: KVExample
    count_dim: int
    counts: tuple[CountRow, ...]
    quantized: tuple[QuantResult, ...]
    cache_elements: int
    cache_elements_more_q_heads: int

    @property
    def checks(self) -> dict[str, bool]:
        return {
            "full_vs_token": self.full_vs_token.passed,
            "full_vs_chunks": self.full_vs_chunks.passed,
            "wrong_mask_detected": self.wrong_mask.passed,
            "wrong_offset_detected": self.wrong_offset.passed,
            "gqa_indexed_vs_repeat": self.gqa_indexed_vs_repeat.passed,
            "ring_vs_window": self.ring.passed,
            "counts_match_closed_form": all(r.matches_closed_form for r in self.counts),
            "counts_outputs_match": all(r.outputs_match for r in self.counts),
            "cache_independent_of_q_heads": (
                self.cache_elements == self.cache_elements_more_q_heads
            ),
        }

    @property
    def passed(self) -> bool:
        return all(self.checks.values())


def run_lab(
    seed: int = 0, chunks: Sequence[int] = DEFAULT_CHUNKS, shape: ref.Shape = DEFAULT_SHAPE
) -> LabReport:
    chunks = tuple(chunks)
    model = ref.init_model(shape, seed)
    x = ref.random_tokens(shape, sum(chunks), seed)
    full = ref.run_full(model, x)
    tokens, cache = ref.run_tokens(model, x)
    chunked, _ = ref.run_chunks(model, x, chunks)
    wrong_mask, _ = ref.run_chunks(model, x, chunks, ref.Options(align="top_left"))
    wrong_offset, _ = ref.run_chunks(model, x, chunks, ref.Options(offset="zero"))
    repeat = ref.run_full(model, x, ref.Options(gqa="repeat"))

    def lossy(bits: int) -> QuantResult:
        # K/V rounded before they enter the cache; compared with the exact full forward.
        q, _ = ref.run_tokens(model, x, ref.Options(quant_bits=bits))
        return QuantResult(bits, ref.max_abs_diff(q, full), ref.first_mismatch(q, full), ref.ATOL)

    # Seed 000: raise Hq, keep Hkv -> the cache holds the same number of elements.
    wider = ref.Shape(
        shape.layers, shape.q_heads * 2, shape.kv_heads, shape.head_dim, shape.model_dim
    )
    _, wider_cache = ref.run_tokens(ref.init_model(wider, seed), x)
    return LabReport(
        seed=seed,
        chunks=chunks,
        shape=shape,
        full_vs_token=compare("full vs token", full, tokens),
        full_vs_chunks=compare("full vs chunks", full, chunked),
        wrong_mask=compare("wrong mask", full, wrong_mask, expect_equal=False),
        wrong_offset=compare("wrong offset", full, wrong_offset, expect_equal=False),
        gqa_indexed_vs_repeat=compare("gqa indexed vs repeat", full, repeat),
        ring=check_ring(model, x, RING_CAPACITY),
        kv=seed_kv_example(),
        count_dim=COUNT_DIM,
        counts=count_table(COUNT_DIM, COUNT_LENGTHS, seed),
        quantized=tuple(lossy(b) for b in QUANT_BITS),
        cache_elements=ref.cache_elements(cache),
        cache_elements_more_q_heads=ref.cache_elements(wider_cache),
    )
