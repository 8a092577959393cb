"""SGLang and TensorRT-LLM budgets against real start-up logs (their memory lines)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from planner.core.engines.sglang.budget import (
    sglang_auto_mem_fraction_static,
    sglang_budget,
    sglang_start_check,
)
from planner.core.engines.trtllm.budget import trtllm_budget
from planner.core.errors import FieldError
from planner.core.units import GiB, MiB


def test_sglang_qwq32b_tp4_l4() -> None:
    """SGLang 0.4.3.post4, QwQ-32B TP4 on L4, mem_fraction_static 0.85 (llms-in-clouds log):
    "Load weight begin. avail mem=21.63 GB", "Load weight end … avail mem=6.09 GB",
    "KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB".
    Per token per rank: 64 layers × 2 KV heads (8/4) × 128 × 2 (K, V) × 2 B = 65,536 B."""
    before, after = round(21.63 * GiB), round(6.09 * GiB)
    b = sglang_budget(
        total_memory_bytes=round(22.49 * GiB),
        weights_bytes_per_rank=before - after,
        mem_fraction_static=0.85,
        tensor_parallel_size=4,
        free_memory_before_load_bytes=before,
    )
    tokens = b.kv_budget_bytes // 65_536
    # the two GB figures are rounded to 0.005 GiB: ±(0.005 + 0.15 × 0.005) GiB ≈ ±94 tokens
    assert abs(tokens - 46_611) <= 94
    assert sglang_start_check(budget=b).starts


def test_sglang_refusal_text_and_fraction_bounds() -> None:
    b = sglang_budget(
        total_memory_bytes=80 * GiB,
        weights_bytes_per_rank=75 * GiB,
        mem_fraction_static=0.9,
        free_memory_before_load_bytes=79 * GiB,
    )
    assert b.kv_budget_bytes < 0
    v = sglang_start_check(budget=b, free_memory_before_load_bytes=79 * GiB)
    assert not v.starts and v.error_text is not None
    # minimum viable = 1 − available/pre = 1 − 4/79
    assert "minimum viable = 1 - available/pre = 0.9494" in v.error_text
    assert "Raise --mem-fraction-static above 0.950" in v.error_text
    with pytest.raises(FieldError):
        sglang_budget(total_memory_bytes=GiB, weights_bytes_per_rank=0, mem_fraction_static=1.0)


def test_sglang_auto_fraction_h100() -> None:
    """memory_hook, by hand for an 81,559 MiB H100 at TP1 with decode graphs up to 256:
    chunked 8192 → 512 + 1.5·8192 + 1024/8 + 2·256 = 13,440 MiB → round(68,119/81,559, 3);
    chunked 2048 → 4,224 MiB, below the 10 GiB floor for GPUs over 60 GiB → 10,240 MiB."""
    big, _ = sglang_auto_mem_fraction_static(
        gpu_memory_bytes=81_559 * MiB, chunked_prefill_size=8192, cuda_graph_max_bs=256
    )
    small, how = sglang_auto_mem_fraction_static(
        gpu_memory_bytes=81_559 * MiB, chunked_prefill_size=2048, cuda_graph_max_bs=256
    )
    assert (big, small) == (0.835, 0.874) and "10240 MiB reserved" in how


def test_trtllm_rtx5090_fraction_of_free_after_load() -> None:
    """TensorRT-LLM 0.19 (C++ runtime), Llama-3.1-8B fp8 on an RTX 5090: "total: 31.84 GiB,
    available: 17.83 GiB" then "Allocated 16.05 GiB for max tokens in paged KV cache"."""
    total, available = round(31.84 * GiB), round(17.83 * GiB)
    b = trtllm_budget(
        total_memory_bytes=total,
        weights_bytes_per_rank=total - available,
        activation_peak_bytes=0,
        non_torch_bytes=0,
    )
    assert round(b.kv_budget_bytes / GiB, 2) == 16.05


def test_trtllm_a100_40gb_blocks() -> None:
    """TensorRT-LLM 0.13, Qwen1.5-7B on A100 40GB: "available: 21.89 GiB", 631 blocks of 64
    tokens (32 layers × 32 KV heads × 128 × 2 × 2 B = 524,288 B per token; C++ rounds up)."""
    total, available = round(39.39 * GiB), round(21.89 * GiB)
    b = trtllm_budget(
        total_memory_bytes=total,
        weights_bytes_per_rank=total - available,
        activation_peak_bytes=0,
        non_torch_bytes=0,
    )
    assert -(-b.kv_budget_bytes // (64 * 524_288)) == 631
    with pytest.raises(FieldError):
        trtllm_budget(
            total_memory_bytes=GiB,
            weights_bytes_per_rank=0,
            activation_peak_bytes=0,
            free_gpu_memory_fraction=1.0,
        )


def test_budget_package_is_pure() -> None:
    """planner/core/budget: no I/O, env, logging or catalog import (the core purity rule)."""
    forbidden = {"os", "pathlib", "logging", "json", "planner.catalog", "fastapi", "httpx"}
    pkg = Path(__file__).resolve().parents[2] / "planner" / "core" / "budget"
    bad = []
    for path in sorted(pkg.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in {"open", "print", "input"}:
                    bad.append(f"{path.name}: {node.func.id}()")
            bad += [
                f"{path.name}: {n}" for n in names if n in forbidden or n.split(".")[0] in forbidden
            ]
    assert bad == []
