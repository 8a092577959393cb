"""Recommend: the printed flags, parsed back and planned with `plan()`, hold the workload; an
impossible target names the constraint that binds and the nearest thing that fits."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from planner.core.notes import TEMPLATES
from planner.core.recommend_schema import Recommendation, RecommendRequest
from planner.core.schema import Plan, PlanRequest
from planner.service import plan, recommend

MIX = [
    {"context_tokens": 2048, "share": 0.7},
    {"context_tokens": 8192, "share": 0.2},
    {"context_tokens": 32768, "share": 0.1},
]


def rec(**body: Any) -> Recommendation:
    return recommend(RecommendRequest.model_validate(body))


def plan_from_command(r: Recommendation, gpu: str) -> Plan:
    """Read the launch command back into a plan request, as a user pasting it would run it."""
    assert r.command is not None and r.plan_request is not None
    args = shlex.split(r.command)
    if args[:2] == ["vllm", "serve"]:
        model, rest = args[2], args[3:]
        names = {
            "--tensor-parallel-size": "tensor_parallel_size",
            "--max-model-len": "context_tokens",
            "--gpu-memory-utilization": "gpu_memory_utilization",
            "--kv-cache-dtype": "kv_cache_dtype",
            "--block-size": "block_size",
        }
    elif args[:3] == ["python", "-m", "sglang.launch_server"]:
        model, rest = args[4], args[5:]
        names = {
            "--tp": "tensor_parallel_size",
            "--context-length": "context_tokens",
            "--mem-fraction-static": "gpu_memory_utilization",
            "--kv-cache-dtype": "kv_cache_dtype",
            "--page-size": "block_size",
        }
    else:
        assert args[0] == "trtllm-serve"
        model, rest = args[1], args[2:]
        names = {
            "--tp_size": "tensor_parallel_size",
            "--max_seq_len": "context_tokens",
            "--kv_cache_free_gpu_memory_fraction": "gpu_memory_utilization",
        }
    flags = dict(zip(rest[::2], rest[1::2], strict=True))
    body: dict[str, Any] = {"model": model, "engine": r.engine, "gpu": gpu}
    for flag, field in names.items():
        if flag in flags:
            value = flags[flag]
            body[field] = (
                float(value)
                if field == "gpu_memory_utilization"
                else value
                if field == "kv_cache_dtype"
                else int(value)
            )
    for name, content in r.extra_files.items():
        assert flags["--extra_llm_api_options"] == name
        for line in content.splitlines()[1:]:
            key, value = (x.strip() for x in line.split(":"))
            body["kv_cache_dtype" if key == "dtype" else "block_size"] = (
                value if key == "dtype" else int(value)
            )
    # The per-instance workload: max_num_seqs requests in the mix's proportions.
    body["requests"] = r.plan_request["requests"]
    assert sum(x["count"] for x in body["requests"]) >= r.settings.max_num_seqs  # type: ignore[union-attr]
    return plan(PlanRequest.model_validate(body))


@pytest.mark.parametrize(
    ("body", "gpu"),
    [
        ({"model": "meta-llama/Llama-3.1-8B", "concurrency": 32}, "H100-SXM-80GB"),
        ({"model": "meta-llama/Llama-3.1-8B", "concurrency": 64}, "H100-SXM-80GB"),
        (
            {
                "model": "meta-llama/Llama-3.1-70B",
                "gpu_count": 8,
                "concurrency": 256,
                # Met by the expected step (~52 ms at TP 8 × 256), not only by the floor.
                "tpot_seconds": 0.08,
            },
            "H100-SXM-80GB",
        ),
        ({"model": "google/gemma-3-27b-it", "concurrency": 16}, "H200-141GB"),
        (
            {"model": "Qwen/Qwen3-32B", "gpu_count": 4, "concurrency": 48, "engine": "sglang"},
            "A100-SXM-80GB",
        ),
        (
            {
                "model": "meta-llama/Llama-3.1-70B",
                "gpu_count": 4,
                "concurrency": 40,
                "engine": "trtllm",
            },
            "H100-SXM-80GB",
        ),
        (
            {
                "model": "meta-llama/Llama-3.1-70B",
                "gpu_count": 4,
                "concurrency": 64,
                "engine": "trtllm",
                "kv_cache_dtype": "fp8",
            },
            "H100-SXM-80GB",
        ),
    ],
    ids=["8b-32", "8b-64-fp8", "70b-tp-tpot", "gemma3-hybrid", "sglang", "trtllm", "trtllm-fp8"],
)
def test_flags_planned_back_fit_the_workload(body: dict[str, Any], gpu: str) -> None:
    r = rec(gpu=gpu, context_mix=MIX, **body)
    assert r.feasible, (r.binding_constraint, r.binding_detail)
    assert r.settings is not None and r.capacity is not None
    p = plan_from_command(r, gpu)
    assert p.capacity is not None
    assert p.capacity.workload_fits is True
    assert p.capacity.max_requests >= 1  # the engine starts at max_model_len
    assert p.capacity.longest_context_tokens >= r.settings.max_model_len
    # The batch the engine may run stays within the 95% figure of the mix.
    assert r.settings.max_num_seqs <= r.capacity.tail_concurrency
    assert r.settings.max_num_seqs * r.instances >= body["concurrency"]
    assert r.gpus_used <= body.get("gpu_count", 1)
    if "tpot_seconds" in body:
        assert p.bounds is not None and p.bounds.expected is not None
        assert p.bounds.decode_step_seconds <= p.bounds.expected.tpot_seconds
        assert p.bounds.expected.tpot_seconds <= body["tpot_seconds"]


def test_prefers_the_models_own_dtype() -> None:
    r = rec(model="meta-llama/Llama-3.1-8B", gpu="H100-SXM-80GB", context_mix=MIX, concurrency=32)
    assert r.settings is not None and r.settings.kv_cache_dtype == "auto"
    assert r.command == (
        "vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 1 --max-model-len 32768 "
        "--max-num-seqs 32 --gpu-memory-utilization 0.92 --kv-cache-dtype auto --block-size 16"
    )


def test_replicas_are_data_parallel() -> None:
    r = rec(
        model="meta-llama/Llama-3.1-8B",
        gpu="H100-SXM-80GB",
        gpu_count=4,
        context_mix=MIX,
        concurrency=200,
        allow_fp8_kv=False,
    )
    assert r.feasible and r.instances > 1
    assert f"--data-parallel-size {r.instances}" in (r.command or "")


def test_max_model_len_only() -> None:
    # engine_rules.md §6.2: Llama-3.1-70B at TP 8 is 40,960 B/token per rank.
    r = rec(
        model="meta-llama/Llama-3.1-70B",
        gpu="H100-SXM-80GB",
        gpu_count=8,
        max_model_len=32768,
        concurrency=8,
    )
    assert r.feasible and r.capacity is not None
    assert r.capacity.method == "exact" and len(r.capacity.classes) == 1


# ---- Nothing fits: the binding constraint and the nearest fit ---------------------------------


def test_weights_bind() -> None:
    r = rec(
        model="meta-llama/Llama-3.1-405B",
        gpu="H100-SXM-80GB",
        gpu_count=4,
        max_model_len=131072,
        concurrency=4,
    )
    assert not r.feasible and r.command is None
    assert r.binding_constraint == "weights_exceed_memory"
    assert any(s.change.startswith("gpu_count ") for s in r.nearest)


def test_context_binds() -> None:
    r = rec(model="meta-llama/Llama-3.1-8B", gpu="L4-24GB", max_model_len=1_000_000, concurrency=1)
    assert r.binding_constraint == "max_model_len"
    longest = [s for s in r.nearest if s.change.startswith("max_model_len ")]
    assert longest
    fits = int(longest[0].change.split()[1])
    assert 0 < fits < 1_000_000


def test_concurrency_binds() -> None:
    # 4 GPUs: on 2 × H100 vLLM's own budget (weights 65.7 GiB per rank, activation, NCCL and
    # CUDA graphs) leaves under 2 GiB, so max_model_len would bind before concurrency.
    r = rec(
        model="meta-llama/Llama-3.1-70B",
        gpu="H100-SXM-80GB",
        gpu_count=4,
        context_mix=MIX,
        concurrency=2000,
    )
    assert r.binding_constraint == "concurrency"
    changes = [s.change for s in r.nearest]
    assert any(c.startswith("concurrency ") for c in changes)
    reach = int(next(c for c in changes if c.startswith("concurrency ")).split()[1])
    assert rec(
        model="meta-llama/Llama-3.1-70B",
        gpu="H100-SXM-80GB",
        gpu_count=4,
        context_mix=MIX,
        concurrency=reach,
    ).feasible


def test_fp8_is_the_nearest_fit() -> None:
    r = rec(
        model="meta-llama/Llama-3.1-8B",
        gpu="H100-SXM-80GB",
        context_mix=MIX,
        concurrency=64,
        allow_fp8_kv=False,
    )
    assert r.binding_constraint == "concurrency"
    assert any(s.change == "kv_cache_dtype fp8" for s in r.nearest)


def test_tpot_between_floor_and_estimate_is_rejected_by_the_estimate() -> None:
    """A target the floor meets but the expected step does not: the floor alone would accept
    it; the estimate rejects it, and the detail says both figures."""
    base = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100-SXM-80GB", "context_mix": MIX}
    loose = rec(**base, concurrency=8, tpot_seconds=1.0)
    assert loose.feasible and loose.expected_tpot_seconds is not None
    floor, est = loose.decode_step_seconds, loose.expected_tpot_seconds
    assert floor is not None and floor < est
    between = (floor + est) / 2
    r = rec(**base, concurrency=8, gpu_count=1, tpot_seconds=between)
    assert not r.feasible and r.binding_constraint == "tpot"
    assert r.binding_detail is not None and "expected TPOT" in r.binding_detail
    assert r.expected_tpot_seconds is not None and r.expected_tpot_seconds > between


def test_throughput_target_uses_the_estimate_and_the_floor_rejects() -> None:
    base = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100-SXM-80GB", "context_mix": MIX}
    ok = rec(**base, concurrency=8, throughput_tokens_per_s=100)
    assert ok.feasible and ok.throughput_tokens_per_s is not None
    assert ok.throughput_tokens_per_s >= 100
    assert "recommend.tpot_expected" in {n.code for n in ok.notes_detail}
    floor = ok.decode_step_seconds
    assert floor is not None
    # Beyond what 8 requests make even at the floor: rejected by the floor.
    r = rec(**base, concurrency=8, throughput_tokens_per_s=2 * 8 / floor)
    assert not r.feasible and r.binding_constraint == "throughput"
    assert r.binding_detail is not None and "bandwidth floor" in r.binding_detail


def test_tpot_binds() -> None:
    # Llama-3.1-8B weights alone (16 GB at 3.35 TB/s) take ~4.8 ms per step on one H100.
    r = rec(
        model="meta-llama/Llama-3.1-8B",
        gpu="H100-SXM-80GB",
        context_mix=MIX,
        concurrency=8,
        tpot_seconds=0.002,
    )
    assert r.binding_constraint == "tpot"
    assert r.binding_detail is not None and "TPOT" in r.binding_detail


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"concurrency": 4}, "give context_mix"),
        ({"concurrency": 4, "context_mix": [{"context_tokens": 8, "share": 0.5}]}, "sum to"),
        ({"concurrency": 4, "max_model_len": 1024, "context_mix": MIX}, "shorter than"),
    ],
)
def test_bad_workloads(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        RecommendRequest.model_validate(
            {"model": "meta-llama/Llama-3.1-8B", "gpu": "L4-24GB", **body}
        )


def test_many_classes_batch_is_whole_requests_summing_to_max_num_seqs() -> None:
    mix = [{"context_tokens": 1000 + 997 * i, "share": 1 / 16} for i in range(16)]
    r = rec(model="meta-llama/Llama-3.1-8B", gpu="H100-SXM-80GB", context_mix=mix, concurrency=20)
    assert r.feasible and r.settings is not None and r.plan_request is not None
    counts = [x["count"] for x in r.plan_request["requests"]]
    assert sum(counts) == r.settings.max_num_seqs == 20
    assert max(counts) - min(counts) <= 1
    assert plan_from_command(r, "H100-SXM-80GB").capacity.workload_fits is True  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("body", "codes"),
    [
        (
            {"engine": "trtllm", "gpu_count": 4, "concurrency": 200, "tpot_seconds": 0.5},
            {"engine.trtllm.replicas", "recommend.max_num_seqs", "recommend.tpot_expected"},
        ),
        (
            {
                "model": {
                    "model_type": "llama",
                    "num_hidden_layers": 4,
                    "hidden_size": 512,
                    "num_attention_heads": 8,
                    "num_key_value_heads": 8,
                    "intermediate_size": 1024,
                    "vocab_size": 1000,
                    "torch_dtype": "bfloat16",
                },
                "concurrency": 8,
            },
            {"recommend.replace_model", "recommend.max_num_seqs"},
        ),
        ({"concurrency": 64}, {"recommend.kv_dtype_chosen", "recommend.max_num_seqs"}),
    ],
    ids=["trtllm-replicas-tpot", "config-model", "fp8"],
)
def test_recommend_notes_are_coded(body: dict[str, Any], codes: set[str]) -> None:
    r = rec(
        **{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100-SXM-80GB", "context_mix": MIX, **body}
    )
    assert r.feasible
    assert [d.text for d in r.notes_detail] == r.notes  # no note left without a code
    for d in r.notes_detail:
        assert TEMPLATES[d.code].format(**d.params) == d.text
    assert codes <= {d.code for d in r.notes_detail}


def test_recommend_note_text_is_unchanged() -> None:
    # The English text is the contract: byte-identical to what the answer said before codes.
    r = rec(model="meta-llama/Llama-3.1-8B", gpu="H100-SXM-80GB", context_mix=MIX, concurrency=64)
    assert r.notes[0] == (
        "fp8 KV cache chosen: the model's own dtype cannot hold the workload on these GPUs."
    )
    assert r.notes_detail[0].code == "recommend.kv_dtype_chosen"
    assert r.notes_detail[0].params == {"dtype": "fp8"}
