"""Score the expected decode step and the floor on held-out measurements (no refit).

    python bench/validate_step_model.py \\
        bench/measurements/decode_measurements_validation.jsonl [--readme README.md] [--residuals]

It fits nothing: every row of FILE (held-out measurements, same fields as the training file) is
reported as the expected step's median / p90 |error|, how many estimates are above the
measurement, the floor violations (a floor above a measurement) and estimates below the floor,
overall and by publisher, engine, GPU, model class and batch; with --readme it replaces the
text between `<!-- step-validation:begin -->` and `<!-- step-validation:end -->`. Rows with an
`excluded` field are listed with its reason and not scored.

Every row is planned the way bench/fit_step_model.py plans its training rows (batch `batch` at
context input + output/2, the row's GPU, TP, PP, KV dtype and checkpoint quantization) and
scored with the constants stored in planner/core/step_constants.py: the expected step is the
plan's own `bounds.expected.decode_step_seconds`, the floor its `bounds.decode_step_seconds`.
Nothing here is fitted; the validation rows never touch the constants.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import textwrap
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
from fit_step_model import NAMES, ROOT, Arrays, Point, point_for

from planner.core.step_constants import FIT_PROVENANCE, FITTED
from planner.service import default_catalog

TRAIN_PUBLISHERS = {"ml-energy/leaderboard", "NVIDIA/TensorRT-LLM"}
BEGIN, END = "<!-- step-validation:begin -->", "<!-- step-validation:end -->"


def publisher(url: str) -> str:
    """The repository for a GitHub address, else the site."""
    m = re.match(r"https://github\.com/([^/]+/[^/]+)/", url)
    return m.group(1) if m else urlparse(url).netloc


def _batch_class(batch: int) -> str:
    if batch == 1:
        return "1"
    if batch <= 16:
        return "2–16"
    if batch <= 128:
        return "17–128"
    return "> 128"


def _stats(pred: np.ndarray, meas: np.ndarray, floor: np.ndarray) -> dict[str, float]:
    err = np.abs(pred / meas - 1)
    return {
        "n": len(err),
        "median": float(np.median(err)),
        "p90": float(np.percentile(err, 90)),
        "signed": float(np.median(pred / meas - 1)),
        "above": int(np.sum(pred > meas)),
        "floor_above": int(np.sum(floor > meas)),
        "below_floor": int(np.sum(pred < floor * (1 - 1e-12))),
    }


def _static_total_error(row: dict[str, Any], step_seconds: float) -> float | None:
    """Static batching (TensorRT-LLM's gptSessionBenchmark): the source times prefill and all
    steps together. Predict that total: (OSL − 1) expected steps plus the prefill's matmul FLOPs
    at the fitted matmul efficiency (a training-set constant), and compare it with the total."""
    if "static batching" not in row.get("engine_version", ""):
        return None
    m = default_catalog().model(row["model"], None)
    g = default_catalog().gpu(row["gpu"])
    assert g is not None
    fp8 = row.get("quant") == "fp8"
    peak = g.fp8_dense_flops if fp8 and g.fp8_dense_flops else g.bf16_dense_flops
    assert peak
    params = m.prefill_parameters or m.num_parameters or 0
    prefill = 2 * params * row["input_len"] * row["batch"] / (peak * row["tp"])
    total = row["batch"] * row["output_len"] / row["metric"]["output_tok_s"]
    predicted = (row["output_len"] - 1) * step_seconds + prefill / FITTED.matmul_efficiency
    return float(predicted / total - 1)


def validate(path: Path, readme: Path | None, residuals: bool = False) -> dict[str, float]:
    raw = path.read_bytes()
    rows = [json.loads(x) for x in raw.decode().splitlines() if x.strip()]
    excluded = [r for r in rows if r.get("excluded")]
    scored = [r for r in rows if not r.get("excluded")]
    pts: list[Point] = [point_for(r) for r in scored]
    a = Arrays(pts)
    pred = np.array([p.expected_seconds for p in pts])
    # The plan's expected step is the fit's model at the stored constants (a check on both).
    c = np.array([getattr(FITTED, n) for n in NAMES])
    model = a.predict(c)
    if not np.allclose(model, pred, rtol=1e-6):
        worst = int(np.argmax(np.abs(model / pred - 1)))
        raise SystemExit(f"plan and fit model disagree on {pts[worst].id}")
    total = _stats(pred, a.measured, a.floor)
    idx = np.arange(len(pts))

    def table(title: str, key: Callable[[dict[str, Any]], str]) -> list[str]:
        groups: dict[str, list[int]] = defaultdict(list)
        for i, r in enumerate(scored):
            groups[key(r)].append(i)
        out = [
            f"| {title} | points | median \\|error\\| | p90 \\|error\\| | median signed error "
            "| above measured |",
            "|---|---|---|---|---|---|",
        ]
        for g in sorted(groups, key=lambda k: (-len(groups[k]), k)):
            ii = np.array(groups[g])
            e = _stats(pred[ii], a.measured[ii], a.floor[ii])
            out.append(
                f"| {g} | {e['n']} | {e['median']:.1%} | {e['p90']:.1%} | {e['signed']:+.1%} "
                f"| {e['above']} |"
            )
        return out

    def subset(name: str, keep: Sequence[bool]) -> str:
        ii = idx[np.array(keep, dtype=bool)]
        e = _stats(pred[ii], a.measured[ii], a.floor[ii])
        return (
            f"| {name} | {e['n']} | {e['median']:.1%} | {e['p90']:.1%} | {e['above']} "
            f"| {e['floor_above']} | {e['below_floor']} |"
        )

    pubs = [publisher(r["source_url"]) for r in scored]
    static = ["static batching" in r.get("engine_version", "") for r in scored]
    n_pub = len(set(pubs))
    totals = (_static_total_error(r, p) for r, p in zip(scored, pred, strict=True))
    static_err = [x for x in totals if x is not None]
    se = np.abs(np.array(static_err))
    ratio = a.measured / a.floor
    digest = hashlib.sha256(raw).hexdigest()[:16]
    rel = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
    excluded_lines = "\n".join(f"- `{r['id']}`: {r['excluded']}" for r in excluded)
    fitted_on = re.search(r"sha256 (\w+)", FIT_PROVENANCE)
    head = textwrap.fill(
        f"**Held out.** `python bench/validate_step_model.py {rel} --readme README.md` "
        f"scores {len(scored)} published points of `{rel}` (sha256 `{digest}…`), from {n_pub} "
        "publishers and no training source file, with the stored constants (fitted on the "
        f"training file, sha256 `{fitted_on.group(1) if fitted_on else '?'}…`); nothing is "
        "refitted.",
        width=96,
        break_on_hyphens=False,
    )
    tail = textwrap.fill(
        "Static batching scored on what the source timed (prefill and all steps together, the "
        f"prefill at the fitted matmul efficiency): median |error| {float(np.median(se)):.1%}, "
        f"p90 {float(np.percentile(se, 90)):.1%} over {len(se)} points. The floor is above "
        f"{total['floor_above']} of {total['n']} held-out measurements and the estimate below "
        f"the floor on {total['below_floor']}; measured / floor: median "
        f"{float(np.median(ratio)):.2f}, p90 {float(np.percentile(ratio, 90)):.2f}. Not scored "
        f"({len(excluded)}):",
        width=96,
        break_on_hyphens=False,
    )
    report = f"""{head}

| held-out set | points | median \\|error\\| | p90 \\|error\\| | estimate above measured | floor above measured | estimate below the floor |
|---|---|---|---|---|---|---|
{subset("all held-out points", [True] * len(scored))}
{subset("publishers with no training row", [p not in TRAIN_PUBLISHERS for p in pubs])}
{subset("TensorRT-LLM static batching (v0.9.0 doc; v0.6.1's is in training)", static)}

{chr(10).join(table("publisher", lambda r: publisher(r["source_url"])))}

{chr(10).join(table("engine", lambda r: r["engine"]))}

{chr(10).join(table("GPU", lambda r: r["gpu"]))}

{chr(10).join(table("model class", lambda r: r["cls"]))}

{chr(10).join(table("batch", lambda r: _batch_class(r["batch"])))}

{chr(10).join(table("static batching: input / output tokens", lambda r: f"{r['input_len']} / {r['output_len']}" if "static batching" in r.get("engine_version", "") else "not static batching"))}

{tail}
{excluded_lines or "- none"}
"""  # noqa: E501
    print(report)
    if residuals:
        for p, e, f in sorted(
            zip(pts, pred / a.measured, a.floor / a.measured, strict=True), key=lambda x: x[1]
        ):
            print(f"{e:6.2f} {p.id} tp{p.tp} b{p.batch} floor/measured {f:.2f}")
    if readme:
        body = readme.read_text()
        pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.DOTALL)
        if not pattern.search(body):
            raise SystemExit(f"{readme} has no {BEGIN} ... {END} markers")
        readme.write_text(pattern.sub(lambda _m: f"{BEGIN}\n{report}{END}", body, count=1))
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file", type=Path, help="held-out rows (the training file's fields)")
    ap.add_argument("--readme", type=Path, help="patch the step-validation section of this README")
    ap.add_argument("--residuals", action="store_true", help="print expected / measured")
    args = ap.parse_args()
    validate(args.file, args.readme, args.residuals)


if __name__ == "__main__":
    main()
