"""Plans per second per catalog model, in-process, measured side by side in one run.

Run: `.venv/bin/python bench/plan_speed.py [--seconds 0.5]`. Absolute rates depend on the
machine; the ratio column (each model vs Llama-3.1-8B, timed in the same run, interleaved) is
the figure to compare across runs.

`--question` times only the 8B question of issue 26 (`plan()` of Llama-3.1-8B at 8,192 tokens
in a 48 GiB bf16 budget): µs per plan, the best of `--rounds` rounds of `--seconds` each, and
the same for `Plan.model_dump_json()` of its answer. `--vary N` asks it with N different
contexts in turn (8,192 tokens and N − 1 shorter ones, 64 apart), so nothing kept per answer
could serve a repeat: only what plan() keeps per model and engine (planner.core.memo) does.
`--loop SECONDS` plans it over and over after a warm-up, for a sampling profiler
(`py-spy record -- python bench/plan_speed.py --loop 8`, then `bench/spy_top.py`).

`--vs DIR` times the question side by side with another checkout's `planner` (e.g. a
`git worktree add` of an older commit): `--procs` fresh processes per side, alternating, each
the best of its rounds; prints each side's best and median and the ratio of the bests.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from planner.catalog import list_models
from planner.core.schema import PlanRequest
from planner.service import plan

BASELINE = "meta-llama/Llama-3.1-8B"
QUESTION = (
    b'{"model":"meta-llama/Llama-3.1-8B","kv_cache_dtype":"bf16","context_tokens":8192,'
    b'"kv_budget_bytes":51539607552}'
)


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
    ap.add_argument("--question", action="store_true", help="only the 8B question, in µs")
    ap.add_argument("--loop", type=float, default=None, help="plan it for this many seconds")
    ap.add_argument("--vary", type=int, default=1, help="ask it with this many contexts in turn")
    ap.add_argument("--vs", type=Path, default=None, help="another checkout, timed alternately")
    ap.add_argument("--procs", type=int, default=5, help="processes per side with --vs")
    args = ap.parse_args()
    if args.vs is not None:
        side_by_side(args)
        return
    if args.question or args.loop is not None:
        question(args)
        return
    reqs = {
        m.id: PlanRequest(
            model=m.id,
            context_tokens=min(8192, _max_len(m)),
            gpu="H100-SXM-80GB",
            tensor_parallel_size=8 if m.num_parameters > 100e9 else 1,
        )
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


def question(args: argparse.Namespace) -> None:
    req = PlanRequest.model_validate_json(QUESTION)
    asked = [req.model_copy(update={"context_tokens": 8192 - 64 * i}) for i in range(args.vary)]
    turn = itertools.cycle(asked)
    for _ in range(200):  # warm: the catalog entry, the engine's rules, imports
        answer = plan(req)
    if args.loop is not None:
        end = time.perf_counter() + args.loop
        while time.perf_counter() < end:
            plan(next(turn))
        return
    # CPU time of this process, not wall time: on a shared box other jobs stretch the wall.
    best_plan = best_dump = float("inf")
    for _ in range(args.rounds):
        for fn, best in ((lambda: plan(next(turn)), "plan"), (answer.model_dump_json, "dump")):
            n, start = 0, time.process_time()
            while (elapsed := time.process_time() - start) < args.seconds:
                fn()
                n += 1
            if best == "plan":
                best_plan = min(best_plan, 1e6 * elapsed / n)
            else:
                best_dump = min(best_dump, 1e6 * elapsed / n)
    size = len(answer.model_dump_json())
    contexts = f", {args.vary} contexts in turn" if args.vary > 1 else ""
    print(
        f"plan() {best_plan:.1f} us CPU{contexts}; model_dump_json() {best_dump:.1f} us CPU "
        f"({size:,} B), best of {args.rounds} rounds"
    )


def side_by_side(args: argparse.Namespace) -> None:
    here = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, str(Path(__file__).resolve()), "--question"]
    cmd += ["--rounds", str(args.rounds), "--seconds", str(args.seconds), "--vary", str(args.vary)]
    times: dict[str, list[float]] = {"before": [], "now": []}
    for _ in range(args.procs):
        for side, root in (("before", args.vs.resolve()), ("now", here)):
            env = {**os.environ, "PYTHONPATH": str(root)}
            out = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, check=True)
            times[side].append(float(out.stdout.split()[1]))
            print(f"{side:6} {out.stdout.strip()}", flush=True)
    best = {side: min(t) for side, t in times.items()}
    for side, t in times.items():
        print(f"{side:6} best {best[side]:.1f} us, median {statistics.median(t):.1f} us CPU")
    print(f"now / before: {best['now'] / best['before']:.2f}x (bests of {args.procs} processes)")


if __name__ == "__main__":
    main()
