"""kvplan's expected step and floor beside llm-analysis and NVIDIA AIConfigurator, on the
published measurements in bench/measurements/ (each peer where it can express the point).

    python -m venv /tmp/peers && /tmp/peers/bin/pip install llm-analysis==0.2.2 \\
        aiconfigurator==0.12.0
    python bench/side_by_side.py --peer-python /tmp/peers/bin/python [--readme README.md]

kvplan plans each point as bench/fit_step_model.py does (batch `batch` at context input +
output/2). The peers run in their own environment (bench/peer_estimates.py imports nothing
from kvplan): llm-analysis `LLMAnalysis.inference(...)["decode_latency"]` at the point's
input and output lengths; AIConfigurator `cli_estimate(..., mode="agg")` TPOT with its
measured kernel data (SILICON), the point's engine as its backend. The table gives, per
estimator, the points it expresses, median and p90 |estimate / measured − 1|, and how many
estimates are above the measurement. These are training points for kvplan's constants: its
own held-out figure is the leave-one-source-out row of bench/fit_step_model.py.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from fit_step_model import DATA, request_for  # noqa: E402

from planner.service import default_catalog, plan  # noqa: E402


def kvplan_point(row: dict[str, Any]) -> dict[str, Any]:
    req = request_for(row)
    p = plan(req)
    assert p.bounds is not None and p.bounds.expected is not None
    model = default_catalog().model(row["model"], None)
    params = model.num_parameters or 1
    size = req.weights_bytes or model.weights_bytes or 0
    return {
        "id": row["id"],
        "model": row["model"],
        "config": dict(model.config or {}),
        "gpu": row["gpu"],
        "tp": row["tp"],
        "pp": row.get("pp") or 1,
        "batch": row["batch"],
        "input_len": row["input_len"],
        "output_len": row["output_len"],
        "weights_8bit": model.shape.quant_method == "fp8" or 0.75 <= size / params <= 1.25,
        "kv_8bit": row["kv_dtype"] == "fp8",
        "engine": row["engine"],
        "cls": row["cls"],
        "measured_ms": row["measured_step_ms"],
        "floor_ms": p.bounds.decode_step_seconds * 1e3,
        "kvplan_ms": p.bounds.expected.decode_step_seconds * 1e3,
    }


def _reason(text: str) -> str:
    """A peer's refusal, without the point's own numbers and paths."""
    for pattern, reason in (
        (r"no llm-analysis GPU config for (\S+)", r"no GPU config for \1"),
        (r"no aiconfigurator system for (\S+)", r"no system data for \1"),
        (r"too large|does not fit|OOM", "does not fit its memory model"),
        (r"architecture (\S+) is not supported", r"\1 not supported"),
        (r"MoE data missing for MoeKey \{ quant: \"(\w+)\"", r"no MoE kernel data for \1"),
        (r"Invalid quantized MoE configuration", "quantized MoE block size vs TP"),
    ):
        m = re.search(pattern, text)
        if m:
            return m.expand(reason)
    return text.split(":")[0]


def stats(pairs: list[tuple[float, float]]) -> tuple[int, float, float, int]:
    if not pairs:
        return 0, float("nan"), float("nan"), 0
    est = np.array([e for e, _ in pairs])
    meas = np.array([m for _, m in pairs])
    err = np.abs(est / meas - 1)
    return len(pairs), float(np.median(err)), float(np.percentile(err, 90)), int(np.sum(est > meas))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer-python", help="python of an environment with the peers installed")
    ap.add_argument("--readme", type=Path, help="patch the side-by-side section of this README")
    ap.add_argument("--out", type=Path, help="write every point's figures as JSON")
    ap.add_argument("--again", type=Path, help="re-tabulate a JSON written by --out")
    args = ap.parse_args()
    rows = [json.loads(x) for x in DATA.read_text().splitlines() if x.strip()]
    saved = json.loads(args.again.read_text()) if args.again else None
    points = saved["points"] if saved else [kvplan_point(r) for r in rows]
    peers: dict[str, Any] = {}
    versions = saved["peers"] if saved else "not run"
    if args.peer_python and not args.again:
        done = subprocess.run(
            [args.peer_python, str(ROOT / "bench" / "peer_estimates.py")],
            input=json.dumps(points),
            capture_output=True,
            text=True,
            check=True,
        )
        peers = json.loads(done.stdout)
        versions = subprocess.run(
            [args.peer_python, "-m", "pip", "list", "--format=json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        pinned = {d["name"].lower(): d["version"] for d in json.loads(versions)}
        versions = ", ".join(
            f"{n} {pinned.get(n, '?')}" for n in ("llm-analysis", "aiconfigurator")
        )
    for p in points:
        p.update(peers.get(p["id"], {}))
    table = [
        ("kvplan expected step", "kvplan_ms"),
        ("kvplan floor", "floor_ms"),
        ("llm-analysis", "llm_analysis_ms"),
        ("AIConfigurator (agg, SILICON)", "aiconfigurator_ms"),
    ]
    lines = [
        "| estimator | points it expresses | median \\|error\\| | p90 \\|error\\| "
        "| above measured |",
        "|---|---|---|---|---|",
    ]
    for name, key in table:
        n, med, p90, above = stats(
            [(p[key], p["measured_ms"]) for p in points if p.get(key) is not None]
        )
        lines.append(f"| {name} | {n} | {med:.1%} | {p90:.1%} | {above} |")
    both = [p for p in points if p.get("aiconfigurator_ms") is not None]
    n, med, p90, above = stats([(p["kvplan_ms"], p["measured_ms"]) for p in both])
    lines.append(
        f"| kvplan expected step, on AIConfigurator's points | {n} | {med:.1%} | {p90:.1%} "
        f"| {above} |"
    )
    why: dict[str, Counter[str]] = {"llm_analysis_ms": Counter(), "aiconfigurator_ms": Counter()}
    for p in points:
        for key, text in (p.get("why") or {}).items():
            why[key][_reason(text)] += 1
    refusals = "\n".join(
        f"- {name} cannot express {sum(why[key].values())}: "
        + "; ".join(f"{r} ({n})" for r, n in why[key].most_common())
        for name, key in (("llm-analysis", "llm_analysis_ms"),
                          ("AIConfigurator", "aiconfigurator_ms"))
        if why[key]
    )  # fmt: skip
    report = (
        f"`python bench/side_by_side.py --peer-python … --readme README.md` on the "
        f"{len(points)} points of\n`bench/measurements/decode_measurements_train.jsonl` "
        f"(peers: {versions}).\n\n" + "\n".join(lines) + "\n\n" + refusals + "\n\n"
        "These are kvplan's training points (its held-out figures are the leave-one-out rows "
        "and the\nheld-out table above); the peers were not fitted on them.\n"
    )
    print(report)
    if args.out:
        args.out.write_text(json.dumps({"peers": versions, "points": points}, indent=1))
    if args.readme:
        body = args.readme.read_text()
        begin, end = "<!-- side-by-side:begin -->", "<!-- side-by-side:end -->"
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
        if not pattern.search(body):
            raise SystemExit(f"{args.readme} has no {begin} ... {end} markers")
        args.readme.write_text(pattern.sub(lambda _m: f"{begin}\n{report}{end}", body, count=1))


if __name__ == "__main__":
    main()
