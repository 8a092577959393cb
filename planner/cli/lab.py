"""`kvplan lab`: seed 000's proof that the cache is exact, plus the counts and the lossy write.

Prints the seed's four lines verbatim, then the multiplication table and the quantization line,
then the extra checks with the first mismatching position of each planted bug. Exit 0 when every
check passes, 1 when one fails, 2 on bad input (problem+json on stderr).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Annotated, Any

import typer

from planner.cli.output import error_style, fail
from planner.core.errors import FieldError
from planner.core.units import fmt_bytes, fmt_gib
from planner.lab.lab import DEFAULT_CHUNKS, LabReport, run_lab

MAX_CHUNK_TOKENS = 64
MAX_CHUNKS = 16
MAX_TOTAL_TOKENS = 128
_DIGITS = re.compile(r"[0-9]{1,12}")


def parse_chunks(text: str) -> tuple[int, ...]:
    """ "1,3,2,5" -> (1, 3, 2, 5); at least two chunks so one follows cached tokens."""
    parts = [p.strip() for p in text.split(",")]
    if not all(_DIGITS.fullmatch(p) for p in parts):
        raise FieldError("chunks", "cli.chunks_not_integers", text=text)
    chunks = tuple(int(p) for p in parts)
    if not 2 <= len(chunks) <= MAX_CHUNKS:
        raise FieldError("chunks", "cli.chunks_count", most=MAX_CHUNKS, n_chunks=len(chunks))
    if any(not 1 <= c <= MAX_CHUNK_TOKENS for c in chunks):
        raise FieldError("chunks", "cli.chunk_length", most=MAX_CHUNK_TOKENS, text=text)
    if sum(chunks) > MAX_TOTAL_TOKENS:
        raise FieldError(
            "chunks",
            "cli.chunks_total",
            total=sum(chunks),
            most=MAX_TOTAL_TOKENS,
        )
    return chunks


def parse_seed(text: str) -> int:
    if not _DIGITS.fullmatch(text.strip()) or int(text) >= 2**32:
        raise FieldError("seed", "cli.seed_invalid", text=text, most=2**32 - 1)
    return int(text)


def _status(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _where(first_mismatch: int | None) -> str:
    return (
        "no mismatch" if first_mismatch is None else f"first mismatch at position {first_mismatch}"
    )


def format_report(r: LabReport) -> list[str]:
    lines = [
        f"full vs token: {_status(r.full_vs_token.passed)}",
        f"full vs chunks: {_status(r.full_vs_chunks.passed)}",
        f"wrong mask detected: {_status(r.wrong_mask.passed)}",
        f"{fmt_bytes(r.kv.bytes_per_token)}/token; "
        f"{r.kv.tokens} tokens = {fmt_gib(r.kv.total_bytes)}",
        "",
        f"multiplications for one new token (1 layer, 1 head, d={r.count_dim}), counted by mul():",
        f"{'n':>4} | {'no cache: proj':>14} {'attn':>6} | "
        f"{'cache: proj':>11} {'attn':>6} | closed form",
    ]
    for c in r.counts:
        lines.append(
            f"{c.context_tokens:>4} | {c.no_cache_projection:>14} {c.no_cache_attention:>6} | "
            f"{c.cache_projection:>11} {c.cache_attention:>6} | "
            f"{'match' if c.matches_closed_form else 'MISMATCH'}"
            + ("" if c.outputs_match else " (outputs differ!)")
        )
    tol = r.quantized[0].tolerance if r.quantized else 0.0
    lossy = ", ".join(f"{q.bits}-bit max|Δ| {q.max_abs_diff:.1e}" for q in r.quantized)
    verdict = (
        "a lossy write is not exact"
        if not any(q.within_tolerance for q in r.quantized)
        else "some rounding stayed within tolerance"
    )
    lines += [
        f"quantized cache vs exact (tolerance {tol:.0e}): {lossy}: {verdict}",
        "",
        f"chunks {','.join(map(str, r.chunks))}, seed {r.seed}, layers {r.shape.layers}, "
        f"Hq {r.shape.q_heads}, Hkv {r.shape.kv_heads}, d {r.shape.head_dim}",
        f"full vs token max|Δ| {r.full_vs_token.max_abs_diff:.1e}; "
        f"full vs chunks max|Δ| {r.full_vs_chunks.max_abs_diff:.1e}",
        f"wrong mask (top-left): {_where(r.wrong_mask.first_mismatch)}",
        f"wrong offset detected: {_status(r.wrong_offset.passed)} "
        f"({_where(r.wrong_offset.first_mismatch)})",
        f"gqa indexed vs repeat: {_status(r.gqa_indexed_vs_repeat.passed)}",
        f"ring window (capacity {r.ring.capacity}) vs full windowed attention: "
        f"{_status(r.ring.passed)}",
        f"cache elements Hq={r.shape.q_heads}: {r.cache_elements}, "
        f"Hq={2 * r.shape.q_heads}: {r.cache_elements_more_q_heads} (same Hkv)",
    ]
    return lines


def report_json(r: LabReport) -> dict[str, Any]:
    body = dataclasses.asdict(r)
    body["checks"] = r.checks
    body["passed"] = r.passed
    return body


def lab(
    seed: Annotated[str, typer.Option(metavar="N", help="RNG seed for weights and inputs.")] = "0",
    chunks: Annotated[
        str, typer.Option(metavar="1,3,2,5", help="Uneven chunk lengths, comma-separated.")
    ] = ",".join(map(str, DEFAULT_CHUNKS)),
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Prove full == token-by-token == chunked, catch a wrong mask, count the multiplies."""
    # Its flags are named like its fields (--seed, --chunks): problem+json says it exactly.
    error_style("kvplan lab", {}, as_json=True)
    try:
        report = run_lab(parse_seed(seed), parse_chunks(chunks))
    except FieldError as exc:
        fail(exc)  # problem+json on stderr, exit 2, built like the API's
    if as_json:
        typer.echo(json.dumps(report_json(report), indent=2))
    else:
        typer.echo("\n".join(format_report(report)))
    raise typer.Exit(0 if report.passed else 1)


def register(app: typer.Typer) -> None:
    app.command("lab")(lab)
