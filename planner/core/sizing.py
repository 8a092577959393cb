"""Bytes of the workload: per request, paged, padded, prefix-shared, per rank and physical.

The textbook product (seed 004 §05): 2 × L × Hkv × d × N × b, refined the way engines do: K and
V widths that differ, MLA's single latent, window caps, block rounding, replication.
"""

from __future__ import annotations

from collections.abc import Sequence

from planner.core import schema as s
from planner.core.engines import Engine
from planner.core.inputs import Inputs
from planner.core.memo import IdentityMemo
from planner.core.notes import Note, note
from planner.core.parallel import RankLayout
from planner.core.specs import (
    WindowPolicy,
    bytes_per_token,
    prefix_saved_bytes,
    request_kv_bytes,
    request_paged_kv_bytes,
)
from planner.core.units import KVDtype


def stage_kv_bytes(
    layout: RankLayout,
    dtype: KVDtype,
    mixes: Sequence[s.RequestMix],
    policy: WindowPolicy,
    shared: Sequence[int],
    reusers: Sequence[int] = (),
) -> int:
    """One rank of one stage: every request's KV, shared prefixes stored once (`reusers`: per
    mix, the requests that find the prefix held; default count − 1)."""
    total = 0
    again = list(reusers) or [m.count - 1 for m in mixes]
    for mix, sh, r in zip(mixes, shared, again, strict=True):
        total += mix.count * request_kv_bytes(layout.stack, dtype, mix.context_tokens, policy)
        total -= prefix_saved_bytes(layout.stack, dtype, sh, r)
    return total


def workload(
    inp: Inputs, layouts: Sequence[RankLayout]
) -> tuple[list[s.RequestOut], s.TotalsOut, s.PerRankOut, list[Note]]:
    dtype, policy, block = inp.kv_dtype, inp.policy, inp.block_size
    logical = inp.shape.stack  # whole model, one copy, TP=1 heads
    rows: list[s.RequestOut] = []
    kv_total = paged_total = saved_total = 0
    for mix, sh, again in zip(inp.mixes, inp.shared_prefix_tokens, inp.prefix_reusers, strict=True):
        kv_one = request_kv_bytes(logical, dtype, mix.context_tokens, policy)
        blocks, paged_one = request_paged_kv_bytes(
            logical, dtype, mix.context_tokens, policy, block
        )
        saved = prefix_saved_bytes(logical, dtype, sh, again)
        kv_total += mix.count * kv_one - saved
        paged_total += mix.count * paged_one - saved
        saved_total += saved
        rows.append(
            s.RequestOut(
                context_tokens=mix.context_tokens,
                count=mix.count,
                prefix_tokens=mix.prefix_tokens,
                kv_bytes=kv_one,
                blocks=blocks,
                paged_kv_bytes=paged_one,
            )
        )
    longest = max(m.context_tokens for m in inp.mixes)
    n_requests = sum(m.count for m in inp.mixes)
    # Every request padded to the longest: the longest mix's own row has its bytes.
    padded_total = n_requests * next(r.kv_bytes for r in rows if r.context_tokens == longest)

    stage_bytes = [
        stage_kv_bytes(lay, dtype, inp.mixes, policy, inp.shared_prefix_tokens, inp.prefix_reusers)
        for lay in layouts
    ]
    big = max(range(len(layouts)), key=lambda i: (stage_bytes[i], layouts[i].layers))
    lay = layouts[big]
    notes: list[Note] = []
    shape = inp.shape
    if lay.replication > 1:
        if shape.is_mla:
            notes.append(note("parallel.mla_replicated", tp=inp.tp))
        else:
            notes.append(
                note(
                    "parallel.replicated_heads",
                    tp=inp.tp,
                    kv_heads=shape.num_key_value_heads,
                    replication=lay.replication,
                )
            )
    notes.extend(inp.engine.parallel_notes(shape, inp.tp, dtype))
    drafts = len(inp.speculation.draft_layers) if inp.speculation is not None else 0
    rest = (big, dtype, inp.engine, block, drafts)
    per_rank = _PER_RANK.get((layouts,), rest) or _PER_RANK.put(
        (layouts,), rest, _per_rank(layouts, big, dtype, inp.engine, block, drafts)
    )
    totals = s.TotalsOut(
        kv_bytes=kv_total,
        paged_kv_bytes=paged_total,
        padded_kv_bytes=padded_total,
        per_rank_kv_bytes=stage_bytes[big],
        physical_kv_bytes=sum(b * inp.tp for b in stage_bytes),
        prefix_shared_bytes_saved=saved_total,
        requests=n_requests,
    )
    return rows, totals, per_rank, notes


# The answer's per-rank section per layouts (kept themselves, planner.core.parallel) and the rest.
_PER_RANK: IdentityMemo[s.PerRankOut] = IdentityMemo(1024)


def _per_rank(
    layouts: Sequence[RankLayout], big: int, dtype: KVDtype, engine: Engine, block: int, drafts: int
) -> s.PerRankOut:
    lay = layouts[big]
    return s.PerRankOut(
        kv_heads=lay.kv_heads,
        replication=lay.replication,
        layers=lay.layers,
        kv_bytes_per_token=bytes_per_token(lay.stack, dtype),
        page_bytes=lay.first.page_bytes(dtype, engine.layer_block_size(lay.first, block)),
        pipeline_stage_layers=[x.layers for x in layouts],
        kv_layers=sum(n for spec, n in lay.stack if spec.bytes_per_token(dtype) > 0),
        draft_kv_layers=drafts if lay is layouts[-1] else 0,
    )


__all__ = ["stage_kv_bytes", "workload"]
