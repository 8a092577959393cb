"""Derived page values: memory per GPU, the context sweep, which formulas reproduce the engine."""

from __future__ import annotations

from planner.core.schema import PlanRequest
from planner.service import plan
from planner.web.charts import WIDTH, Column, Part, columns, stacked_bar, tokens_tick
from planner.web.view import (
    block_math,
    capacity_by_context,
    engine_log_differs,
    memory_view,
    sweep_contexts,
    symbolic_formula,
)

GiB = 1 << 30
KiB = 1 << 10
LLAMA = "meta-llama/Llama-3.1-8B"


def _plan(**body: object):  # type: ignore[no-untyped-def]
    return plan(PlanRequest.model_validate({"model": LLAMA, "kv_cache_dtype": "bf16", **body}))


def test_memory_at_the_48_gib_answer() -> None:
    # Seed 000 lab: "128 KiB/token; 8192 tokens = 1.000 GiB", so 47 requests hold 47 GiB and
    # 1 GiB of the 48 stays free (the null block and the remainder), with no paging waste.
    view = memory_view(_plan(context_tokens=8192, kv_budget_bytes=48 * GiB))
    assert view is not None
    parts = {s.key: s.bytes for s in view.segments}
    assert parts == {"kv_used": 47 * GiB, "waste": 0, "kv_free": 1 * GiB}
    assert view.total_bytes == 48 * GiB and view.requests == 47 and not view.overflow


def test_paging_waste_is_the_last_partial_block() -> None:
    # 8,193 tokens need 513 blocks of 16: 15 empty token slots × 128 KiB per request.
    result = _plan(context_tokens=8193, kv_budget_bytes=48 * GiB)
    assert result.capacity is not None and result.capacity.max_requests == (24576 - 1) // 513
    view = memory_view(result)
    assert view is not None
    parts = {s.key: s.bytes for s in view.segments}
    assert parts["waste"] == view.requests * 15 * 128 * KiB


def test_gpu_memory_parts_add_up_to_the_device() -> None:
    result = _plan(context_tokens=8192, gpu="H100-SXM-80GB", tensor_parallel_size=2)
    view = memory_view(result)
    assert view is not None and result.capacity is not None
    keys = [s.key for s in view.segments]
    # vLLM's own terms stand in for one reserve; together they are the reserve it subtracts.
    assert keys[:3] == ["weights", "activation", "non_torch"]
    assert keys[-4:] == ["kv_used", "waste", "kv_free", "unallocated"]
    parts = {s.key: s.bytes for s in view.segments}
    terms = parts["activation"] + parts["non_torch"] + parts.get("cuda_graphs", 0)
    assert terms == result.capacity.budget.reserve_bytes
    assert sum(s.bytes for s in view.segments) == view.total_bytes
    assert view.total_bytes == result.capacity.budget.gpu_memory_bytes


def test_workload_over_budget_is_flagged() -> None:
    result = _plan(requests=[{"context_tokens": 8192, "count": 60}], kv_budget_bytes=48 * GiB)
    view = memory_view(result)
    assert view is not None and view.overflow and view.requests == 60
    assert sum(s.bytes for s in view.segments) == 48 * GiB


def test_no_budget_no_memory_view() -> None:
    assert memory_view(_plan(context_tokens=8192)) is None


def test_capacity_sweep_halves_with_each_doubling() -> None:
    result = _plan(context_tokens=8192, kv_budget_bytes=48 * GiB)
    contexts = sweep_contexts(result)
    assert contexts[0] == 1024 and contexts[-1] == 131072  # up to max_position_embeddings
    request = PlanRequest.model_validate(
        {"model": LLAMA, "kv_cache_dtype": "bf16", "kv_budget_bytes": 48 * GiB}
    )
    points = dict(capacity_by_context(request, [8192, 16384]))
    assert points == {8192: 47, 16384: (24576 - 1) // 1024}


def test_textbook_steps_reproduce_vllm() -> None:
    result = _plan(context_tokens=8192, kv_budget_bytes=48 * GiB)
    steps = block_math(result)
    assert steps is not None
    assert steps.block_bytes == 64 * KiB * 32  # page (one layer, one block) × layers
    assert steps.blocks_per_request_simple and steps.max_requests_simple
    assert engine_log_differs(result)
    assert symbolic_formula(result) == "2 × L × Hkv × d × b"
    mla = plan(
        PlanRequest.model_validate({"model": "deepseek-ai/DeepSeek-V3", "context_tokens": 8192})
    )
    assert symbolic_formula(mla) is None


def test_stacked_bar_fills_the_width() -> None:
    chart = stacked_bar([Part("a", 3, "a"), Part("b", 0, "b"), Part("c", 1, "c")], total=4)
    assert [r.cls for r in chart.rects] == ["seg-a", "seg-c"]
    assert sum(r.width for r in chart.rects) == WIDTH
    assert chart.rects[1].x == chart.rects[0].width


def test_columns_scale_to_the_tallest() -> None:
    chart = columns(
        [
            Column("1k", (Part("x", 10, ""),), "10"),
            Column("2k", (Part("x", 5, ""), Part("y", 15, "")), "20", highlight=True),
        ],
        plot_height=100,
    )
    heights = [r.height for r in chart.rects]
    assert heights == [50, 25, 75]
    assert chart.rects[1].cls == "col-x is-current"
    assert [label.text for label in chart.labels] == ["10", "1k", "20", "2k"]


def test_tokens_tick() -> None:
    assert [tokens_tick(n) for n in (1024, 8192, 131072, 1 << 20, 3000)] == [
        "1k",
        "8k",
        "128k",
        "1M",
        "3,000",
    ]


def _decode_points(request: PlanRequest) -> dict[int, tuple[int, float]]:
    """(batch, step seconds) per decode column of the page's answer, from the labels' data."""
    from planner.web.page import compute

    figure = compute(request, None, "en").figures["decode"]
    out: dict[int, tuple[int, float]] = {}
    for label in figure.chart.labels:
        data = dict(label.data)
        if data:
            step = float(data["step-seconds"]) if data["step-seconds"] else 0.0
            out[int(data["context-tokens"])] = (int(data["batch-requests"]), step)
    return out


def test_every_decode_column_is_the_plan_at_its_length() -> None:
    # Issue 25 item 2: Qwen3-30B-A3B on an H200 at 32k. A batch of 735 at 1k touches all 128
    # experts, so the 1k column's weights term is not the 22-request answer's: the column must
    # be `kvplan plan --context 1k`'s decode floor (28.006 ms for 735 requests).
    body = {"model": "Qwen/Qwen3-30B-A3B", "gpu": "H200-141GB"}
    points = _decode_points(PlanRequest.model_validate({**body, "context_tokens": 32768}))
    assert len(points) >= 5
    for ctx, (batch, step) in points.items():
        alone = plan(PlanRequest.model_validate({**body, "context_tokens": ctx}))
        assert alone.bounds is not None and alone.capacity is not None
        assert batch == alone.bounds.batch_requests == alone.capacity.max_running_requests
        assert step == alone.bounds.decode_step_seconds
    assert points[1024][0] == 735 and round(points[1024][1] * 1e3, 3) == 28.006
    # The case the test is for: the answer's own sweep keeps its 22-request weights term
    # (9.672 ms), which the 735-request plan at 1k does not (12.592 ms).
    answer = plan(PlanRequest.model_validate({**body, "context_tokens": 32768}))
    at_1k = plan(PlanRequest.model_validate({**body, "context_tokens": 1024}))
    assert answer.bounds is not None and at_1k.bounds is not None
    kept = answer.bounds.context_sweep[0].weights_read_seconds
    assert (
        round(kept * 1e3, 3) == 9.672
        and round(at_1k.bounds.weights_read_seconds * 1e3, 3) == 12.592
    )


def test_an_over_full_gpu_adds_up_to_the_gpu_and_states_the_overflow() -> None:
    # Issue 25 item 5: Llama-3.1-70B bf16 on one H200 (140.40 GiB as torch sees it). vLLM's
    # budget line is 129.17 − 131.42 − (2.06 + 0.25 + 1.56) = −6.12 GiB: the engine's own
    # negative figure. The bar's parts must add up to the GPU, not to 150-odd GiB.
    result = plan(
        PlanRequest.model_validate(
            {"model": "meta-llama/Llama-3.1-70B", "gpu": "H200-141GB", "context_tokens": 8192}
        )
    )
    cap = result.capacity
    assert cap is not None and cap.engine_starts is False
    available = cap.budget.engine_available_bytes
    memory = cap.budget.gpu_memory_bytes
    assert available is not None and available < 0 and memory is not None
    view = memory_view(result)
    assert view is not None
    parts = {s.key: s.bytes for s in view.segments}
    assert view.total_bytes == memory and sum(parts.values()) == memory
    assert parts["kv_short"] == available and round(available / GiB, 2) == -6.12
    assert "kv_used" not in parts and view.over_bytes == -available
    # What the engine is not given stays 1 − utilization (0.08 × 140.40 GiB = 11.23 GiB).
    assert round(parts["unallocated"] / GiB, 2) == 11.23
    from planner.web.figures import memory_figure
    from planner.web.i18n import Numbers

    figure = memory_figure(view, Numbers("en"), lambda t: t)
    marks = [r for r in figure.chart.rects if r.cls == "overflow-mark"]
    assert len(marks) == 1 and 0 < marks[0].x < WIDTH
    assert figure.legend[-1].cls == "overflow-mark" and figure.legend[-1].value == "6.12 GiB"


def test_a_length_where_nothing_fits_is_a_dash_and_the_legend_says_why() -> None:
    # 10 GiB of KV holds 9 requests of 8,192 tokens (1 GiB each) but none of 131,072 (16 GiB).
    from planner.web.page import compute

    request = PlanRequest.model_validate(
        {
            "model": LLAMA,
            "kv_cache_dtype": "bf16",
            "context_tokens": 8192,
            "kv_budget_bytes": 10 * GiB,
            "bandwidth_bytes_per_s": 3.35e12,
        }
    )
    figure = compute(request, None, "en").figures["decode"]
    values = {dict(lb.data)["context-tokens"]: lb.text for lb in figure.chart.labels if lb.data}
    assert values["131072"] == "—" and values["8192"] != "—"
    marks = {item.mark: item.label for item in figure.legend if item.mark}
    assert marks["—"] == "No request of that length fits"
    assert any(item.cls == "col-kv is-current" for item in figure.legend)


def test_textbook_block_bytes_count_an_eagle_heads_layer() -> None:
    # issue 25: with an EAGLE head (one Llama layer, the target's 8 KV heads × 128) the pool's
    # blocks hold 33 layers' pages; vLLM's num_blocks = budget // (page × 33) (its KV cache
    # groups share one block table), so the textbook step shows 33, never the target's 32.
    from tests.core.test_reconcile_draft import EAGLE_HEAD

    spec = {"method": "eagle", "model": EAGLE_HEAD, "num_speculative_tokens": 3}
    result = _plan(context_tokens=8192, kv_budget_bytes=40 * GiB, speculative_config=spec)
    steps = block_math(result)
    assert steps is not None and steps.layers == 33
    assert result.capacity is not None and steps.block_bytes == 64 * KiB * 33
    assert result.capacity.num_blocks == 40 * GiB // (64 * KiB * 33) == 19_859
