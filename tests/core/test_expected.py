"""bounds.expected: each term against a hand computation, the floor's guarantee, calibration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.core.expected import StepRates, StepWork, all_reduce_seconds, step_terms
from planner.core.expected_schema import ExpectedOut
from planner.core.schema import Plan, PlanRequest
from planner.core.step_constants import FITTED
from planner.service import plan

from .conftest import run

H100_BW = 3.35e12  # catalog H100-SXM-80GB, datasheet
H100_BF16 = 989.4e12
H100_FP8 = 1978.9e12
NVLINK4_ONE_WAY = 450e9  # 900 GB/s total
NVLINK_HOP = 0.6e-6  # NCCL tuning model, Ring/LL over NVLink
# Llama-3.1-8B: 8,030,261,248 parameters (model card); the input table 128,256 × 4,096 is
# indexed, not multiplied, so a token's matmuls use the rest.
LLAMA8B_MATMUL_PARAMS = 8_030_261_248 - 128_256 * 4_096


def terms(p: Plan) -> dict[str, Any]:
    assert p.bounds is not None and p.bounds.expected is not None
    return {t.code: t for t in p.bounds.expected.terms}


def expected(p: Plan) -> ExpectedOut:
    assert p.bounds is not None and p.bounds.expected is not None
    return p.bounds.expected


def llama8b(count: int = 8, context: int = 2000, **more: Any) -> Plan:
    return run(
        model="meta-llama/Llama-3.1-8B",
        gpu="H100-SXM-80GB",
        requests=[{"context_tokens": context, "count": count}],
        **more,
    )


def test_memory_terms_are_the_floors_bytes_over_the_efficient_bandwidth() -> None:
    p = llama8b()
    assert p.bounds is not None
    t = terms(p)
    w, kv = t["weights_read"], t["kv_read"]
    assert w.seconds == pytest.approx(w.params["bytes"] / (H100_BW * FITTED.bandwidth_efficiency))
    assert kv.seconds == pytest.approx(
        kv.params["bytes"] / (H100_BW * FITTED.kv_bandwidth_efficiency)
    )
    # The same bytes the floor reads at the datasheet bandwidth.
    assert w.params["bytes"] / H100_BW == pytest.approx(p.bounds.weights_read_seconds, rel=1e-9)
    assert kv.params["bytes"] / H100_BW == pytest.approx(p.bounds.kv_read_seconds, rel=1e-9)
    # KV by hand: 8 requests × 2,000 tokens × 32 layers × 8 heads × 128 × 2 (K, V) × 2 bytes.
    assert kv.params["bytes"] == 8 * 2000 * 32 * 8 * 128 * 2 * 2


def test_compute_terms_by_hand() -> None:
    t = terms(llama8b())
    mm = t["matmul"]
    assert mm.params["flops"] == 2 * LLAMA8B_MATMUL_PARAMS * 8
    assert mm.seconds == pytest.approx(mm.params["flops"] / (H100_BF16 * FITTED.matmul_efficiency))
    # Attention: QK and AV, 2 FLOPs a multiply-add, 4 query heads per KV head, d = 128, over
    # every token of every request in every layer.
    att = t["attention"]
    assert att.params["flops"] == pytest.approx(8 * 2000 * 32 * 8 * 4 * 2 * (128 + 128))


def test_fixed_terms_by_hand() -> None:
    t = terms(llama8b())
    assert t["per_layer"].seconds == pytest.approx(32 * FITTED.per_layer_seconds)
    assert t["per_step"].seconds == pytest.approx(
        FITTED.per_step_seconds + 8 * FITTED.per_request_seconds
    )
    assert t["all_reduce"].seconds == 0.0 and t["pipeline_handoff"].seconds == 0.0


def test_tensorrt_llm_has_its_own_per_request_cost() -> None:
    """TensorRT-LLM's batch manager and sampling run in C++: its steps charge
    trtllm_per_request_seconds a running request; vLLM and SGLang the Python-scheduler one."""
    assert FITTED.for_scheduler(compiled=False) == FITTED
    assert FITTED.for_scheduler(compiled=True).per_request_seconds == (
        FITTED.trtllm_per_request_seconds
    )
    for engine, each in (
        ("trtllm", FITTED.trtllm_per_request_seconds),
        ("vllm", FITTED.per_request_seconds),
        ("sglang", FITTED.per_request_seconds),
    ):
        step = terms(llama8b(engine=engine))["per_step"]
        assert step.params["per_request_seconds"] == each
        assert step.seconds == pytest.approx(FITTED.per_step_seconds + 8 * each)


def test_step_is_memory_plus_the_rest_and_tpot_is_the_step() -> None:
    p = llama8b()
    e, t = expected(p), terms(p)
    assert e.dominant == "memory"
    parts = ["weights_read", "kv_read", "all_reduce", "pipeline_handoff", "per_layer", "per_step"]
    assert e.decode_step_seconds == pytest.approx(sum(t[c].seconds for c in parts))
    assert e.tpot_seconds == e.decode_step_seconds
    assert e.decode_tokens_per_s == pytest.approx(8 / e.decode_step_seconds)
    assert e.constants_source == "catalog" and e.measured_terms == []


def test_all_reduce_tp1_to_tp8_follows_the_ring_formula() -> None:
    """Llama-3.1-70B, 16 requests: 80 layers × 2 all-reduces of 16 × 8,192 × 2 bytes."""
    message = 16 * 8192 * 2
    seen = []
    for tp in (1, 2, 4, 8):
        p = run(
            model="meta-llama/Llama-3.1-70B",
            gpu="H100-SXM-80GB",
            tensor_parallel_size=tp,
            requests=[{"context_tokens": 1000, "count": 16}],
        )
        ar = terms(p)["all_reduce"]
        if tp == 1:
            hand = 0.0
        else:
            one = (
                FITTED.all_reduce_base_seconds
                + 2 * (tp - 1) * NVLINK_HOP
                + 2 * (tp - 1) / tp * message / (NVLINK4_ONE_WAY * FITTED.link_efficiency)
            )
            hand = 2 * 80 * one
        assert ar.seconds == pytest.approx(hand, rel=1e-9)
        assert ar.params["message_bytes"] == message
        seen.append(ar.seconds)
    assert seen == sorted(seen) and seen[0] == 0.0 < seen[1]


def test_a_large_batch_makes_the_step_compute_bound() -> None:
    """Llama-2-7B with fp8 weights on H100: batch 1 streams weights; batch 1,024 of short
    requests multiplies them 1,024 times and runs at the fp8 peak."""
    fp8_weights = 6_738_415_616  # one byte a parameter

    def at(batch: int) -> Plan:
        return run(
            model="meta-llama/Llama-2-7b-hf",
            gpu="H100-SXM-80GB",
            weights_bytes=fp8_weights,
            kv_cache_dtype="fp8",
            requests=[{"context_tokens": 16, "count": batch}],
        )

    small, large = at(1), at(1024)
    assert expected(small).dominant == "memory"
    assert expected(large).dominant == "compute"
    t = terms(large)
    assert t["matmul"].counted and not t["weights_read"].counted
    assert t["matmul"].params["flops_per_s"] == pytest.approx(H100_FP8 * FITTED.matmul_efficiency)
    assert t["matmul"].seconds > t["weights_read"].seconds + t["kv_read"].seconds


def test_pipeline_hand_offs() -> None:
    p = run(
        model="meta-llama/Llama-3.1-70B",
        gpu="H100-SXM-80GB",
        tensor_parallel_size=2,
        pipeline_parallel_size=4,
        requests=[{"context_tokens": 1000, "count": 4}],
    )
    h = terms(p)["pipeline_handoff"]
    message = 4 * 8192 * 2
    hand = 3 * (
        FITTED.all_reduce_base_seconds + message / (NVLINK4_ONE_WAY * FITTED.link_efficiency)
    )
    assert h.params["count"] == 3 and h.seconds == pytest.approx(hand)


@dataclass(frozen=True)
class Calibration:
    id: str = "cal-h100-1"
    device_name: str = "NVIDIA H100 80GB HBM3"
    measured_at: str = "2026-11-30T00:00:00Z"
    decode_bandwidth_bytes_per_s: float = 2.5e12
    copy_bandwidth_bytes_per_s: float = 3.0e12
    fixed_overhead_seconds: float = 4e-6
    per_layer_overhead_seconds: float | None = 30e-6
    matmul_flops_per_s: float | None = 600e12


def test_a_calibration_replaces_the_defaults_and_says_so() -> None:
    cal = Calibration()
    request = PlanRequest.model_validate(
        {
            "model": "meta-llama/Llama-3.1-8B",
            "gpu": "H100-SXM-80GB",
            "requests": [{"context_tokens": 2000, "count": 8}],
        }
    )
    p = plan(request, calibration=cal)
    e, t = expected(p), terms(p)
    assert e.constants_source == "cal-h100-1"
    assert e.measured_terms == ["attention", "kv_read", "matmul", "per_layer", "weights_read"]
    assert t["weights_read"].seconds == pytest.approx(t["weights_read"].params["bytes"] / 3.0e12)
    assert t["kv_read"].seconds == pytest.approx(t["kv_read"].params["bytes"] / 2.5e12)
    assert t["matmul"].seconds == pytest.approx(2 * LLAMA8B_MATMUL_PARAMS * 8 / 600e12)
    assert t["per_layer"].seconds == pytest.approx(32 * (30e-6 + 4e-6))
    assert t["per_layer"].measured and not t["per_step"].measured
    # The terms no probe measures keep the fitted defaults.
    assert t["per_step"].seconds == pytest.approx(
        FITTED.per_step_seconds + 8 * FITTED.per_request_seconds
    )


def test_a_plain_probe_record_measures_bandwidth_only() -> None:
    cal = Calibration(per_layer_overhead_seconds=None, matmul_flops_per_s=None)
    request = PlanRequest.model_validate(
        {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100-SXM-80GB", "context_tokens": 4096}
    )
    e = expected(plan(request, calibration=cal))
    assert e.measured_terms == ["kv_read", "weights_read"]


def test_speculative_tpot_is_per_accepted_token() -> None:
    p = run(
        model="meta-llama/Llama-3.1-8B",
        gpu="H100-SXM-80GB",
        requests=[{"context_tokens": 2000, "count": 4}],
        speculative_config={"method": "ngram", "num_speculative_tokens": 3, "acceptance_rate": 0.5},
    )
    e = expected(p)
    assert e.tokens_per_step == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert e.tpot_seconds == pytest.approx(e.decode_step_seconds / e.tokens_per_step)
    assert terms(p)["matmul"].params["tokens"] == 4 * 4  # each request verifies 3 drafts + 1


def test_no_gpu_no_expected_step() -> None:
    p = run(model="meta-llama/Llama-3.1-8B", context_tokens=4096, bandwidth_bytes_per_s=3.35e12)
    assert p.bounds is not None and p.bounds.expected is None


MODELS = [
    "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B",
    "Qwen/Qwen3-30B-A3B",
    "deepseek-ai/DeepSeek-V3",
    "google/gemma-3-27b-it",
    "openai/gpt-oss-120b",
]
GPUS = ["H100-SXM-80GB", "B200-180GB", "A100-SXM-80GB", "L40S-48GB", "MI300X-192GB"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(MODELS),
    gpu=st.sampled_from(GPUS),
    tp=st.sampled_from([1, 2, 4, 8]),
    batch=st.integers(1, 1024),
    context=st.integers(1, 32768),
)
def test_the_estimate_is_never_below_the_floor(
    model: str, gpu: str, tp: int, batch: int, context: int
) -> None:
    p = run(
        model=model,
        gpu=gpu,
        tensor_parallel_size=tp,
        requests=[{"context_tokens": context, "count": batch}],
        allow_long_max_model_len=True,
    )
    assert p.bounds is not None
    e = expected(p)
    assert e.decode_step_seconds >= p.bounds.decode_step_seconds
    # Without the clamp too: the memory side alone is the floor's bytes at η ≤ 1.
    assert sum(t.seconds for t in e.terms if t.counted) >= p.bounds.decode_step_seconds * (
        1 - 1e-12
    )


@given(
    tp=st.integers(1, 64),
    message=st.floats(0, 1e9),
    eff=st.floats(0.01, 1.0),
)
def test_all_reduce_grows_with_tp_and_message(tp: int, message: float, eff: float) -> None:
    rates = StepRates(1e12, 1e12, 1e15, 450e9 * eff, 0.6e-6, FITTED)
    one = all_reduce_seconds(message, tp, rates)
    assert one >= 0.0
    assert all_reduce_seconds(message, tp + 1, rates) >= one
    assert all_reduce_seconds(message * 2, tp, rates) >= one


def test_step_terms_without_a_matmul_rate() -> None:
    """A custom GPU with no FLOPs figure: the compute side is unknown (0), memory decides."""
    work = StepWork(8, 8, 1e9, 1e8, 1e12, 1e10, 32, 0, 4096, 1, 1)
    rates = StepRates(1e12, 1e12, None, 32e9, 1e-6, FITTED)
    t = {x.code: x for x in step_terms(work, rates)}
    assert t["matmul"].seconds == 0.0 and t["weights_read"].counted
    assert t["weights_read"].seconds == pytest.approx(1e-3)


def test_enforce_eager_says_the_estimate_assumes_cuda_graphs() -> None:
    p = llama8b(enforce_eager=True)
    assert "bounds.expected_eager" in {n.code for n in p.notes_detail}
    assert "bounds.expected_eager" not in {n.code for n in llama8b().notes_detail}


def test_a_custom_gpu_without_link_figures_assumes_pcie() -> None:
    gpu = {"name": "mine", "memory_bytes": 80 << 30, "bandwidth_bytes_per_s": 2e12}
    p = run(
        model="meta-llama/Llama-3.1-70B",
        gpu=gpu,
        tensor_parallel_size=2,
        requests=[{"context_tokens": 1000, "count": 4}],
    )
    ar = terms(p)["all_reduce"]
    assert ar.params["link_bytes_per_s"] == pytest.approx(32e9 * FITTED.link_efficiency)
    assert "bounds.expected_no_link" in {n.code for n in p.notes_detail}
    # No FLOPs figure: the compute side is unknown, the memory side decides.
    assert terms(p)["matmul"].seconds == 0.0 and expected(p).dominant == "memory"
    given = run(
        model="meta-llama/Llama-3.1-70B",
        gpu={**gpu, "link_bandwidth_bytes_per_s": 400e9, "link_latency_seconds": 1e-6},
        tensor_parallel_size=2,
        requests=[{"context_tokens": 1000, "count": 4}],
    )
    assert terms(given)["all_reduce"].params["link_bytes_per_s"] == pytest.approx(
        400e9 * FITTED.link_efficiency
    )
