"""Hypothesis properties of the formulas: linearity, monotonicity, paging bounds, capacity."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from planner.core.schema import MAX_COUNT, MAX_TOKENS
from tests.core.conftest import run

ENGINES = ["vllm", "sglang", "trtllm", "transformers"]


@st.composite
def configs(draw: st.DrawFn, window: bool = False) -> dict[str, Any]:
    kv = draw(st.sampled_from([1, 2, 4, 8]))
    group = draw(st.sampled_from([1, 2, 4]))
    cfg: dict[str, Any] = {
        "model_type": "llama",
        "num_hidden_layers": draw(st.integers(1, 48)),
        "num_attention_heads": kv * group,
        "num_key_value_heads": kv,
        "head_dim": draw(st.sampled_from([32, 64, 80, 128, 256])),
        "max_position_embeddings": 1 << 17,
        "torch_dtype": "bfloat16",
    }
    if window:
        cfg["sliding_window"] = draw(st.integers(2, 4096))
    return cfg


@settings(max_examples=60, deadline=None)
@given(cfg=configs(), n=st.integers(1, 50_000), engine=st.sampled_from(ENGINES))
def test_linear_in_tokens_without_windows(cfg: dict[str, Any], n: int, engine: str) -> None:
    one = run(model=cfg, engine=engine, context_tokens=1).requests[0].kv_bytes
    p = run(model=cfg, engine=engine, context_tokens=n)
    assert p.requests[0].kv_bytes == n * one == n * p.kv_bytes_per_token


@settings(max_examples=60, deadline=None)
@given(
    cfg=configs(window=True),
    n=st.integers(1, 20_000),
    field=st.sampled_from(["num_hidden_layers", "num_key_value_heads", "head_dim"]),
)
def test_monotone_in_every_size(cfg: dict[str, Any], n: int, field: str) -> None:
    bigger = dict(cfg)
    bigger[field] = cfg[field] * 2
    if field == "num_key_value_heads":
        bigger["num_attention_heads"] = cfg["num_attention_heads"] * 2
    for engine in ENGINES:
        a = run(model=cfg, engine=engine, context_tokens=n).requests[0].kv_bytes
        b = run(model=bigger, engine=engine, context_tokens=n).requests[0].kv_bytes
        c = run(model=cfg, engine=engine, context_tokens=n + 1).requests[0].kv_bytes
        assert b >= a and c >= a


@settings(max_examples=80, deadline=None)
@given(
    cfg=configs(window=True),
    n=st.integers(1, 30_000),
    bs=st.sampled_from([1, 16, 32, 64, 128]),
    engine=st.sampled_from(ENGINES[:3]),
)
def test_paged_at_least_exact_and_under_one_block_per_group(
    cfg: dict[str, Any], n: int, bs: int, engine: str
) -> None:
    p = run(model=cfg, engine=engine, context_tokens=n, block_size=bs)
    r = p.requests[0]
    groups = p.model.groups
    one_block_each = sum(
        bs * g.layers * g.kv_heads * (g.head_size_k + g.head_size_v) * 2 for g in groups
    )
    assert r.kv_bytes <= r.paged_kv_bytes < r.kv_bytes + one_block_each


@settings(max_examples=60, deadline=None)
@given(
    cfg=configs(window=True),
    n=st.integers(1, 40_000),
    budget=st.integers(1 << 24, 1 << 37),
    engine=st.sampled_from(ENGINES),
)
def test_capacity_round_trip(cfg: dict[str, Any], n: int, budget: int, engine: str) -> None:
    p = run(model=cfg, engine=engine, context_tokens=n, kv_budget_bytes=budget)
    assert p.capacity is not None
    fit = p.capacity.max_requests
    if fit + 1 > MAX_COUNT:  # beyond what a request may list
        return
    if fit:
        ok = run(
            model=cfg,
            engine=engine,
            kv_budget_bytes=budget,
            requests=[{"context_tokens": n, "count": fit}],
        )
        assert ok.capacity is not None and ok.capacity.workload_fits is True
    over = run(
        model=cfg,
        engine=engine,
        kv_budget_bytes=budget,
        requests=[{"context_tokens": n, "count": fit + 1}],
    )
    assert over.capacity is not None and over.capacity.workload_fits is False


@settings(max_examples=60, deadline=None)
@given(
    cfg=configs(window=True),
    budget=st.integers(1 << 24, 1 << 36),
    engine=st.sampled_from(ENGINES),
    bs=st.sampled_from([1, 16, 32]),
)
def test_longest_context_fits_and_one_more_token_does_not(
    cfg: dict[str, Any], budget: int, engine: str, bs: int
) -> None:
    p = run(
        model=cfg,
        engine=engine,
        context_tokens=1,
        kv_budget_bytes=budget,
        block_size=bs,
        allow_long_max_model_len=True,
    )
    assert p.capacity is not None
    longest = p.capacity.longest_context_tokens
    if longest == 0 or longest >= MAX_TOKENS:
        return
    at = run(
        model=cfg,
        engine=engine,
        context_tokens=longest,
        kv_budget_bytes=budget,
        allow_long_max_model_len=True,
        block_size=bs,
    )
    past = run(
        model=cfg,
        engine=engine,
        context_tokens=longest + 1,
        kv_budget_bytes=budget,
        allow_long_max_model_len=True,
        block_size=bs,
    )
    assert at.capacity is not None and past.capacity is not None
    assert at.capacity.max_requests >= 1
    assert past.capacity.max_requests == 0
