"""vLLM: recompute every logged KV figure from the logged available memory (docs/engine-rules.md).

v1: `Available KV cache memory: A GiB` → num_blocks = A // (page × group_size) per worker, the
minimum over workers (so over pipeline stages); `GPU KV cache size` = num_blocks // groups × bs;
`Maximum concurrency` = num_blocks / Σ groups' blocks per request (no null block); the start-up
check's "KV cache is needed" and "estimated maximum model length"; padding-layer warnings.
v0: `kv_cache_size` → `# GPU blocks` = kv // (bs × layers × per-layer token bytes), every layer
full length; concurrency = blocks × bs / max_model_len.
"""

from __future__ import annotations

from planner.core.engines.vllm.capacity_checks import (
    blocks_checks,
    concurrency_checks,
    concurrency_from_tokens,
    tokens_checks,
    v0_profile_checks,
)
from planner.core.engines.vllm.rules import requested_bytes
from planner.core.engines.vllm.scenario import (
    GPU_BLOCKS,
    GPU_TOKENS,
    MAX_TOKENS,
    PADDING,
    KvSource,
    Scenario,
    as_vllm,
    scenario,
)
from planner.core.engines.vllm.startup_checks import (
    padding_checks,
    v0_error_checks,
    v1_error_checks,
)
from planner.core.errors import Message
from planner.core.logs import to_float, to_int
from planner.core.reconcile_common import Ctx, Figure, gib, judge, set_reserves
from planner.core.units import GiB


def kv_source(ctx: Ctx) -> KvSource | None:
    """(GiB text, fact, what it is) of the KV memory the engine sized its blocks from."""
    avail = ctx.of("available_kv")
    if avail:
        low = min(avail, key=lambda f: to_float(f.values["gib"]))
        values = {f.values["gib"] for f in avail}
        if len(values) > 1:
            ctx.notes.add(
                "reconcile.vllm.workers_differ",
                workers=len(avail),
                values=", ".join(sorted(values)),
                used=low.values["gib"],
            )
        return low.values["gib"], low, "Available KV cache memory"
    for kind, key in (("v0_profile", "kv_cache_size"), ("v0_breakdown", "kv_gib")):
        f = ctx.first(kind)
        if f is not None and key in f.values:
            return f.values[key], f, "memory reserved for the KV cache"
    return None


def _budget_from_tokens(ctx: Ctx, tokens: int, derivation: list[Message]) -> int:
    """The KV memory a logged "GPU KV cache size" implies when the log shows no available
    memory: the blocks it counts (inverting the release's formula) × what a block costs."""
    sc = scenario(ctx)
    pool, cost = sc.pool(GiB), sc.block_bytes()
    length = ctx.settings.max_model_len
    engine = as_vllm(ctx)
    if engine.tokens_from_concurrency and length:
        # tokens = int(num_blocks / need × max_model_len)
        need = pool.blocks_per_request(length)
        blocks = -(-tokens * need // length)
        how = Message.of(
            "derivation.blocks_from_concurrency", tokens=tokens, need=need, length=length
        )
    else:
        # tokens = num_blocks // groups × block_size
        groups, bs = len(pool.groups), min(g.block_size for g in pool.groups)
        blocks = tokens // bs * groups
        how = Message.of(
            "derivation.blocks_per_group" if groups == 1 else "derivation.blocks_per_groups",
            tokens=tokens,
            bs=bs,
            groups=groups,
        )
    derivation.append(
        Message.of(
            "derivation.kv_from_tokens",
            how=how,
            blocks=blocks,
            cost=cost,
            budget=gib(blocks * cost),
        )
    )
    return blocks * cost


def _reserves(ctx: Ctx, src: KvSource | None) -> None:
    s = ctx.settings
    derivation: list[Message] = []
    weights_rank = activation = non_torch = graphs = kv = None
    w = ctx.first("weights")
    if w is not None:
        weights_rank = round(to_float(w.values["gib"]) * GiB)
        derivation.append(
            Message.of("derivation.weights_per_rank", gib=w.values["gib"], line=w.line_no)
        )
        if w.values.get("unit") == "GB":
            ctx.notes.add("reconcile.vllm.weights_gb_is_gib")
    prof = ctx.first("v1_profile") or ctx.first("v0_breakdown")
    if prof is not None:
        if "activation_gib" in prof.values:
            activation = round(to_float(prof.values["activation_gib"]) * GiB)
        if "non_torch_gib" in prof.values:
            non_torch = round(to_float(prof.values["non_torch_gib"]) * GiB)
        if weights_rank is None and "weights_gib" in prof.values:
            weights_rank = round(to_float(prof.values["weights_gib"]) * GiB)
    p0 = ctx.first("v0_profile")
    if p0 is not None and weights_rank is not None and "peak_torch_memory" in p0.values:
        activation = round(to_float(p0.values["peak_torch_memory"]) * GiB) - weights_rank
        non_torch = round(to_float(p0.values.get("non_torch_memory", "0")) * GiB)
    g = ctx.first("cuda_graph")
    if g is not None:
        graphs = round(to_float(g.values["gib"]) * GiB)
        ctx.notes.add("reconcile.vllm.cuda_graphs_headroom", graphs_gib=g.values["gib"])
    if src is not None:
        kv = round(to_float(src[0]) * GiB)
    elif (tokens := ctx.first("kv_tokens")) is not None:
        kv = _budget_from_tokens(ctx, to_int(tokens.values["tokens"]), derivation)
    reserve = None
    if activation is not None:
        reserve = activation + (non_torch or 0)
        derivation.append(Message.of("derivation.reserve_from_profile", reserve=gib(reserve)))
    elif s.gpu_memory_bytes and s.memory_fraction and weights_rank is not None and kv is not None:
        requested = requested_bytes(ctx.engine.version_text, s.gpu_memory_bytes, s.memory_fraction)
        reserve = requested - weights_rank - kv
        derivation.append(
            Message.of(
                "derivation.reserve_from_fraction",
                memory=gib(s.gpu_memory_bytes),
                fraction=s.memory_fraction,
                version=ctx.engine.version_text,
                requested=gib(requested),
                reserve=gib(reserve),
            )
        )
        if reserve < 0:
            ctx.notes.add("reconcile.vllm.reserve_negative")
            reserve = None
    elif kv is not None:
        derivation.append(Message.of("derivation.reserve_needs_gpu"))
    if weights_rank is None and reserve is None and kv is None:
        return
    set_reserves(
        ctx,
        derivation,
        weights_rank=weights_rank,
        reserve=reserve,
        activation_peak=activation,
        non_torch=non_torch,
        cuda_graph=graphs,
        kv_budget=kv,
    )


def reconcile_vllm(ctx: Ctx) -> str:
    """Append checks, notes and reserves to `ctx`; return the log format."""
    fmt = "vLLM v1" if ctx.settings.vllm_gen == "v1" else "vLLM v0"
    if ctx.shape is None or ctx.dtype is None:
        _unrecomputable(ctx)
        return fmt
    src = kv_source(ctx)
    tokens_checks(ctx, src)
    concurrency_checks(ctx, src)
    blocks_checks(ctx, src)
    v0_profile_checks(ctx)
    v0_error_checks(ctx, src)
    v1_error_checks(ctx)
    padding_checks(ctx)
    _reserves(ctx, src)
    if ctx.shape.is_mla and not ctx.shape.has_state and ctx.settings.block not in (64, 128):
        ctx.notes.add("reconcile.vllm.mla_block_size")
    return fmt


# fact kind -> (the figure, the fact's value it logs), for logs kvplan cannot recompute.
_FIGURES = {
    "kv_tokens": (GPU_TOKENS, "tokens"),
    "max_concurrency": (Figure("max_concurrency", "Maximum concurrency", "x"), "x"),
    "num_blocks": (GPU_BLOCKS, "gpu_blocks"),
    "v0_error": (MAX_TOKENS, "max_tokens"),
    "v1_error": (Figure("kv_needed_gib", "KV cache needed", "GiB"), "needed_gib"),
    "padding": (PADDING, "layers"),
}


def _unrecomputable(ctx: Ctx) -> None:
    tokens = ctx.first("kv_tokens")
    tied = tokens is not None and as_vllm(ctx).tokens_from_concurrency
    for kind, (about, key) in _FIGURES.items():
        seen: set[tuple[str, str]] = set()
        for f in ctx.of(kind):
            if kind == "max_concurrency" and tied and tokens is not None:
                # Tied to the tokens line without a model (0.20.1 on): still checked.
                pair = (f.values["context_tokens"], f.values["x"])
                if pair not in seen:
                    seen.add(pair)
                    concurrency_from_tokens(ctx, f, to_int(tokens.values["tokens"]))
                continue
            judge(ctx, about, f, to_float(f.values[key]))


__all__ = ["Scenario", "reconcile_vllm", "scenario"]
