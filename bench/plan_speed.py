"""Plans per second per catalog model, in-process, measured side by side in one run.

Run: `.venv/bin/python bench/plan_speed.py [--seconds 0.5]`. Absolute rates depend on the
machine; the ratio column (each model vs Llama-3.1-8B, timed in the same run, interleaved) is
the figure to compare across runs.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from planner.catalog import list_models
from planner.core.schema import PlanRequest
from planner.service import plan

BASELINE = "meta-llama/Llama-3.1-8B"


def rate(req: PlanRequest, seconds: float) -> float:
    n = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        plan(req)
        n += 1
    return n / elapsed


def _max_len(entry: object) -> int:
    """The model's own maximum (a plan past it is refused), for models shorter than 8k."""
    cfg = getattr(entry, "config", {})
    inner = cfg.get("text_config") or cfg
    return int(inner.get("max_position_embeddings") or cfg.get("max_position_embeddings") or 8192)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=0.5, help="time per model per round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    reqs = {
        m.id: PlanRequest(model=m.id, context_tokens=min(8192, _max_len(m)), gpu="H100-SXM-80GB",
                          tensor_parallel_size=8 if m.num_parameters > 100e9 else 1)
        for m in list_models()
    }
    # Hybrid (state + attention) models as pasted configs: the state-layer path side by side.
    hybrid = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "hybrid_models.json"
    for m in json.loads(hybrid.read_text())["models"][:2]:
        reqs[m["id"] + " (config)"] = PlanRequest(
            model=m["config"], context_tokens=8192, gpu="H100-SXM-80GB", weights_bytes=1 << 34
        )
    best: dict[str, float] = {}
    for _ in range(args.rounds):  # interleave models so drift hits all of them alike
        for mid, req in reqs.items():
            best[mid] = max(best.get(mid, 0.0), rate(req, args.seconds))
    base = best[BASELINE]
    print(f"{'model':48} {'plans/s':>9} {'vs 8B':>7}")
    for mid, r in best.items():
        print(f"{mid:48} {r:9.0f} {r / base:7.2f}")


if __name__ == "__main__":
    main()
