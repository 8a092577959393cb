"""How well the cost estimate (planner/cost.py) tracks `plan()`'s real CPU time, per shape.

    python bench/cost_model.py

Plans each shape (best of a few runs, one core) and prints measured µs beside the estimate's
work units. The estimate is meant as an upper bound of the same order: a ratio measured/estimate
well under 1 is conservative (refuses or off-loads early); above 1 means the shape costs more
than admitted and the coefficients need raising. Figures depend on the machine and its load.
"""

from __future__ import annotations

import time
from typing import Any

from planner.core.schema import PlanRequest
from planner.cost import plan_cost
from planner.service import plan


def pasted(layers: int) -> dict[str, Any]:
    return {
        "model_type": "llama",
        "num_hidden_layers": layers,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 1 << 24,
        "torch_dtype": "bfloat16",
    }


def entries(n: int, start: int = 1000) -> list[dict[str, int]]:
    return [{"context_tokens": start + i} for i in range(n)]


def trt(layers: int, windows: int, **extra: Any) -> dict[str, Any]:
    return {
        "model": pasted(layers),
        "engine": "trtllm",
        "kv_budget_bytes": 1 << 40,
        "max_attention_window": list(range(1, windows + 1)),
        **extra,
    }


BUDGET = {"kv_budget_bytes": 1 << 35}
SHAPES: dict[str, dict[str, Any]] = {
    "catalog 48 GiB question": {
        "model": "meta-llama/Llama-3.1-8B",
        "kv_cache_dtype": "bf16",
        "context_tokens": 8192,
        "kv_budget_bytes": 51539607552,
    },
    "32 layers": {"model": pasted(32), **BUDGET},
    "512 layers, PP 64": {"model": pasted(512), "pipeline_parallel_size": 64, **BUDGET},
    "256 layers, 256 entries": {"model": pasted(256), "requests": entries(256), **BUDGET},
    "4096 layers": {"model": pasted(4096), **BUDGET},
    "4096 layers, PP 1024": {"model": pasted(4096), "pipeline_parallel_size": 1024, **BUDGET},
    "4096 layers, PP 1024, 256 entries": {
        "model": pasted(4096),
        "pipeline_parallel_size": 1024,
        "requests": entries(256),
        **BUDGET,
    },
    "trtllm 32 layers, 4096 windows, 256 entries": trt(32, 4096, requests=entries(256)),
    "trtllm 1024 layers and windows": trt(1024, 1024),
    "trtllm 4096 layers and windows": trt(4096, 4096),
    "trtllm 4096 layers and windows, PP 512, 40 entries": trt(
        4096, 4096, pipeline_parallel_size=512, requests=entries(40, 100_000)
    ),
}


def main() -> None:
    print(f"{'shape':52s} {'measured µs':>12s} {'estimate':>10s} {'ratio':>6s}")
    for name, body in SHAPES.items():
        request = PlanRequest.model_validate(body)
        plan(request)  # warm the caches
        best = min(_timed(request) for _ in range(3))
        units = plan_cost(request).work_units
        print(f"{name:52s} {best * 1e6:12.0f} {units:10d} {best * 1e6 / units:6.2f}")


def _timed(request: PlanRequest) -> float:
    started = time.perf_counter()
    plan(request)
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
