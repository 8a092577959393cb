"""Fit the expected decode step's constants on real published measurements.

    python bench/fit_step_model.py [--write] [--readme README.md]

Reads bench/measurements/decode_measurements_train.jsonl (each row names its source_url and
the quote it was read from), plans every point with kvplan (batch = `batch` requests at context
input + output/2, the point's GPU, TP, PP, KV dtype and checkpoint quantization), takes the
step's quantities from `bounds.expected.terms` (bytes, FLOPs, all-reduce messages, layers), and
fits the constants of `planner.core.step_constants.StepConstants` by minimising the mean
|log(expected / measured)| (Nelder–Mead; efficiencies kept in (0, 1], costs ≥ 0): nine together
on every row, one per-request cost for every engine, then TensorRT-LLM's own per-request cost
(its batch manager and sampling run in C++, not in a Python scheduler) with the nine held.

Reports the training-set fit (median / p90 |error|, points below the floor, points below the
estimate) and leave-one-source-out: each source's points predicted by constants fitted on the
other sources only. --write rewrites the generated block of planner/core/step_constants.py;
--readme replaces the text between `<!-- step-fit:begin -->` and `<!-- step-fit:end -->`.

Held-out rows are scored, with these stored constants and no refit, by
bench/validate_step_model.py (which reuses this file's planning of a row).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.core import schema as s  # noqa: E402
from planner.service import default_catalog, plan  # noqa: E402

DATA = ROOT / "bench" / "measurements" / "decode_measurements_train.jsonl"
CONSTANTS_PY = ROOT / "planner" / "core" / "step_constants.py"
NAMES = [
    "bandwidth_efficiency",
    "kv_bandwidth_efficiency",
    "matmul_efficiency",
    "link_efficiency",
    "all_reduce_base_seconds",
    "per_layer_seconds",
    "per_moe_layer_seconds",
    "per_step_seconds",
    "per_request_seconds",
    "trtllm_per_request_seconds",
]
EFFICIENCIES = 4  # the first four are ratios in (0, 1]; the rest are seconds ≥ 0
# Where the search starts: datasheet-like efficiencies and microsecond-scale costs.
START = np.array([0.8, 0.8, 0.5, 0.5, 10e-6, 20e-6, 20e-6, 1e-3, 1e-6, 1e-6])
SHARED = 9  # fitted together on every row; the last, TensorRT-LLM's per-request cost, after


@dataclass(frozen=True)
class Point:
    """One measurement and the step's quantities kvplan plans for it."""

    id: str
    source: str  # publisher: the repository the row was read from
    source_url: str
    model: str
    cls: str
    batch: int
    tp: int
    measured_seconds: float
    floor_seconds: float
    weights_seconds: float  # at η_bw = 1 (bytes / datasheet bandwidth)
    kv_seconds: float
    compute_seconds: float  # at η_mm = 1 (FLOPs / peak)
    ar_count: int
    ar_hops_seconds: float  # 2(tp−1)·ℓ
    ar_wire_seconds: float  # 2(tp−1)/tp · M / L at η_link = 1
    handoffs: int
    handoff_wire_seconds: float
    layers: int
    moe_layers: int
    expected_seconds: float = 0.0  # the plan's own bounds.expected.decode_step_seconds
    engine: str = "vllm"


def _source(url: str) -> str:
    m = re.match(r"https://github\.com/([^/]+/[^/]+)/", url)
    return m.group(1) if m else url


def request_for(row: dict[str, Any]) -> s.PlanRequest:
    ctx = row["input_len"] + row["output_len"] // 2
    body: dict[str, Any] = {
        "model": row["model"],
        "engine": row["engine"] if row["engine"] in s.ENGINES else "vllm",
        "gpu": row["gpu"],
        "tensor_parallel_size": row["tp"],
        "pipeline_parallel_size": row.get("pp") or 1,
        "requests": [{"context_tokens": max(1, ctx), "count": row["batch"]}],
        "kv_cache_dtype": "fp8" if row["kv_dtype"] == "fp8" else "auto",
        "allow_long_max_model_len": True,
    }
    if row.get("quant") == "fp8":
        # An fp8 checkpoint of a bf16 catalog entry: 1 byte a weight, the embedding table and
        # the LM head kept in 16 bits (as fp8 checkpoints store them).
        m = default_catalog().model(row["model"], None)
        split = m.weight_split
        assert split is not None and m.weights_bytes
        head = 0 if split.tied_embeddings else split.embedding
        body["weights_bytes"] = m.weights_bytes // 2 + (split.embedding + head) // 2
    return s.PlanRequest.model_validate(body)


def point_for(row: dict[str, Any]) -> Point:
    p = plan(request_for(row))
    assert p.bounds is not None
    b = p.bounds
    # Plan once more at unit constants: the terms are then the raw quantities over the rates.
    from planner.core import expected as ex

    e = b.expected
    assert e is not None
    t = {x.code: x for x in e.terms}
    prm = lambda code, key: float(t[code].params[key])  # noqa: E731
    bw = b.bandwidth_bytes_per_s
    flops_rate = prm("matmul", "flops_per_s") / ex.FITTED.matmul_efficiency
    compute = (
        (prm("matmul", "flops") + prm("attention", "flops")) / flops_rate if flops_rate else 0.0
    )
    tp = int(prm("all_reduce", "tp"))
    link = prm("all_reduce", "link_bytes_per_s") / ex.FITTED.link_efficiency
    msg = prm("all_reduce", "message_bytes")
    hop = prm("all_reduce", "hop_latency_seconds")
    return Point(
        id=row["id"],
        source=_source(row["source_url"]),
        source_url=row["source_url"],
        model=row["model"],
        cls=row["cls"],
        batch=row["batch"],
        tp=tp,
        measured_seconds=row["measured_step_ms"] / 1e3,
        floor_seconds=b.decode_step_seconds,
        weights_seconds=prm("weights_read", "bytes") / bw,
        kv_seconds=prm("kv_read", "bytes") / bw,
        compute_seconds=compute,
        ar_count=int(prm("all_reduce", "count")),
        ar_hops_seconds=2 * (tp - 1) * hop if tp > 1 else 0.0,
        ar_wire_seconds=2 * (tp - 1) / tp * msg / link if tp > 1 else 0.0,
        handoffs=int(prm("pipeline_handoff", "count")),
        handoff_wire_seconds=msg / link,
        layers=int(prm("per_layer", "layers")),
        moe_layers=int(prm("per_layer", "moe_layers")),
        expected_seconds=e.decode_step_seconds,
        engine=row["engine"],
    )


class Arrays:
    def __init__(self, pts: Sequence[Point]) -> None:
        f = lambda name: np.array([getattr(p, name) for p in pts], dtype=float)  # noqa: E731
        self.measured, self.floor = f("measured_seconds"), f("floor_seconds")
        self.weights, self.kv = f("weights_seconds"), f("kv_seconds")
        self.compute, self.batch = f("compute_seconds"), f("batch")
        self.ar_count, self.ar_hops, self.ar_wire = (
            f("ar_count"),
            f("ar_hops_seconds"),
            f("ar_wire_seconds"),
        )
        self.handoffs, self.handoff_wire = f("handoffs"), f("handoff_wire_seconds")
        self.layers, self.moe_layers = f("layers"), f("moe_layers")
        self.trtllm = np.array([p.engine == "trtllm" for p in pts])

    def predict(self, c: np.ndarray) -> np.ndarray:
        """The expected step at constants `c` (9 of them: one per-request cost for every engine;
        10: TensorRT-LLM's own as the last)."""
        eta_bw, eta_kv, eta_mm, eta_link, base, c_layer, c_moe, c_step, shared_req = c[:SHARED]
        c_req = np.where(self.trtllm, c[SHARED], shared_req) if len(c) > SHARED else shared_req
        memory = self.weights / eta_bw + self.kv / eta_kv
        step = np.maximum(memory, self.compute / eta_mm)
        step += self.ar_count * (base + self.ar_hops + self.ar_wire / eta_link)
        step += self.handoffs * (base + self.handoff_wire / eta_link)
        step += self.layers * c_layer + self.moe_layers * c_moe + c_step + self.batch * c_req
        return np.maximum(step, self.floor)


def _to_constants(z: np.ndarray) -> np.ndarray:
    """Unconstrained search vector → constants (efficiencies in (0, 1], costs ≥ 0)."""
    out = np.empty_like(z)
    out[:EFFICIENCIES] = 1.0 / (1.0 + np.exp(-z[:EFFICIENCIES]))
    out[EFFICIENCIES:] = np.exp(z[EFFICIENCIES:])
    return out


def _from_constants(c: np.ndarray) -> np.ndarray:
    z = np.empty_like(c)
    e = np.clip(c[:EFFICIENCIES], 1e-6, 1 - 1e-6)
    z[:EFFICIENCIES] = np.log(e / (1 - e))
    z[EFFICIENCIES:] = np.log(np.maximum(c[EFFICIENCIES:], 1e-12))
    return z


def nelder_mead(
    f: Callable[[np.ndarray], float], x0: np.ndarray, iters: int = 4000, step: float = 0.5
) -> np.ndarray:
    """Plain Nelder–Mead (no SciPy in the service's environment)."""
    n = len(x0)
    simplex = [x0] + [x0 + step * np.eye(n)[i] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iters):
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if abs(values[-1] - values[0]) < 1e-10:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        worst = simplex[-1]
        xr = centroid + (centroid - worst)
        fr = f(xr)
        if fr < values[0]:
            xe = centroid + 2 * (centroid - worst)
            fe = f(xe)
            simplex[-1], values[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = xr, fr
        else:
            xc = centroid + 0.5 * (worst - centroid)
            fc = f(xc)
            if fc < values[-1]:
                simplex[-1], values[-1] = xc, fc
            else:
                best = simplex[0]
                simplex = [best + 0.5 * (x - best) for x in simplex]
                values = [f(x) for x in simplex]
    return simplex[int(np.argmin(values))]


PRIOR_WEIGHT = 1e-3  # a weak pull toward START: a constant no training point constrains stays put


def fit(a: Arrays) -> np.ndarray:
    """The nine shared constants on every row (one per-request cost for all engines), then
    TensorRT-LLM's own per-request cost on the same loss with those nine held (only its rows
    move); with no TensorRT-LLM row it stays the shared one."""
    z0 = _from_constants(START[:SHARED])

    def loss(z: np.ndarray) -> float:
        misfit = float(np.mean(np.abs(np.log(a.predict(_to_constants(z)) / a.measured))))
        return misfit + PRIOR_WEIGHT * float(np.sum((z - z0) ** 2))

    z = z0
    for _ in range(4):  # restarts from the last best: Nelder–Mead stalls on kinks (max, clamp)
        z = nelder_mead(loss, z)
    shared = _to_constants(z)
    if not a.trtllm.any():
        return np.append(shared, shared[SHARED - 1])
    start = np.log(shared[SHARED - 1])

    def loss_trtllm(y: np.ndarray) -> float:
        c = np.append(shared, np.exp(y[0]))
        misfit = float(np.mean(np.abs(np.log(a.predict(c) / a.measured))))
        return misfit + PRIOR_WEIGHT * float((y[0] - start) ** 2)

    y = np.array([start])
    for _ in range(4):
        y = nelder_mead(loss_trtllm, y)
    return np.append(shared, np.exp(y[0]))


def errors(a: Arrays, c: np.ndarray) -> dict[str, float]:
    pred = a.predict(c)
    err = np.abs(pred / a.measured - 1)
    return {
        "n": len(pred),
        "median": float(np.median(err)),
        "p90": float(np.percentile(err, 90)),
        "above": int(np.sum(pred > a.measured)),
        "below_floor": int(np.sum(pred < a.floor * (1 - 1e-12))),
        "floor_above_measured": int(np.sum(a.floor > a.measured)),
    }


def loso(pts: Sequence[Point], key: Callable[[Point], str]) -> tuple[dict[str, float], list[str]]:
    """Leave one group out: each group's points predicted by constants fitted on the rest."""
    groups = sorted({key(p) for p in pts})
    pred_err: list[float] = []
    lines = []
    for g in groups:
        train = [p for p in pts if key(p) != g]
        test = [p for p in pts if key(p) == g]
        c = fit(Arrays(train))
        e = errors(Arrays(test), c)
        a = Arrays(test)
        pred_err += list(np.abs(a.predict(c) / a.measured - 1))
        lines.append(f"| {g} | {e['n']} | {e['median']:.1%} | {e['p90']:.1%} | {e['above']} |")
    err = np.array(pred_err)
    return {
        "n": len(err),
        "median": float(np.median(err)),
        "p90": float(np.percentile(err, 90)),
    }, lines


def write_constants(c: np.ndarray, provenance: str) -> None:
    text = CONSTANTS_PY.read_text()
    begin = "# -- generated by bench/fit_step_model.py: do not edit by hand"
    end = "# -- end generated"
    body = "\n".join(
        [
            "FITTED = StepConstants(",
            *(f"    {n}={v:.6g}," for n, v in zip(NAMES, c, strict=True)),
            ")",
            "FIT_PROVENANCE = (",
            *(
                f"    {json.dumps(provenance[i : i + 80], ensure_ascii=False)}"
                for i in range(0, len(provenance), 80)
            ),
            ")",
        ]
    )
    pattern = re.compile(re.escape(begin) + r"[^\n]*\n.*?(?=" + re.escape(end) + ")", re.DOTALL)
    header = begin + " " + "-" * (99 - len(begin) - 1)
    new = pattern.sub(lambda _m: header + "\n" + body + "\n", text, count=1)
    CONSTANTS_PY.write_text(new)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help="rewrite planner/core/step_constants.py")
    ap.add_argument("--readme", type=Path, help="patch the step-fit section of this README")
    ap.add_argument("--residuals", action="store_true", help="print expected / measured")
    args = ap.parse_args()
    raw = DATA.read_bytes()
    rows = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
    pts = [point_for(r) for r in rows]
    a = Arrays(pts)
    c = fit(a)
    train = errors(a, c)
    by_source, source_lines = loso(pts, lambda p: p.source)
    by_file, _ = loso(pts, lambda p: p.source_url)
    by_model, _ = loso(pts, lambda p: p.model)
    ratio = a.measured / a.floor
    digest = hashlib.sha256(raw).hexdigest()[:16]
    provenance = (
        f"bench/fit_step_model.py on {DATA.relative_to(ROOT)} ({len(rows)} points, sha256 "
        f"{digest}…): training median |error| {train['median']:.1%}, p90 {train['p90']:.1%}"
    )
    constants = "\n".join(
        f"| `{n}` | {v:.4g} |" if i < EFFICIENCIES else f"| `{n}` | {v * 1e6:.1f} µs |"
        for i, (n, v) in enumerate(zip(NAMES, c, strict=True))
    )

    def row(name: str, e: dict[str, float]) -> str:
        extra = f"{e['above']} | {e['below_floor']}" if "above" in e else " | "
        return f"| {name} | {e['n']} | {e['median']:.1%} | {e['p90']:.1%} | {extra} |"

    report = f"""Fitted with `python bench/fit_step_model.py --write --readme README.md` on the
{len(rows)} published points in `bench/measurements/decode_measurements_train.jsonl` (sha256
`{digest}…`; every row carries its `source_url` and the exact `quote` it was read from).
Method: each point is planned by kvplan at its batch and mean context (input + output/2);
the expected step's quantities (bytes, FLOPs, all-reduce messages, layers) come from the plan,
and the constants minimise the mean |log(expected / measured)| (Nelder–Mead, efficiencies
in (0, 1], costs ≥ 0): the first nine together on every row (one per-request cost for every
engine), then `trtllm_per_request_seconds` with those nine held, which moves only the
TensorRT-LLM rows (its batch manager and sampling are C++, not a Python scheduler).
**The estimate comes from these fitted constants; the floor comes from physics** (bytes over
datasheet bandwidth) and uses none of them.

| constant | fitted |
|---|---|
{constants}

| | points | median \\|error\\| | p90 \\|error\\| | estimate above measured | below the floor |
|---|---|---|---|---|---|
{row("training fit", train)}
{row("leave-one-source-out (publisher)", by_source)}
{row("leave-one-source-file-out", by_file)}
{row("leave-one-model-out", by_model)}

Leave-one-source-out by publisher (constants fitted on the other publisher only):

| held-out source | points | median \\|error\\| | p90 \\|error\\| | above measured |
|---|---|---|---|---|
{chr(10).join(source_lines)}

The floor is above no training measurement ({train["floor_above_measured"]} of {train["n"]});
measured / floor: median {float(np.median(ratio)):.2f}, p90 {float(np.percentile(ratio, 90)):.2f}.
"""
    print(report)
    if args.residuals:
        pred = a.predict(c)
        for p, e in sorted(zip(pts, pred / a.measured, strict=True), key=lambda x: x[1]):
            print(
                f"{e:6.2f} {p.id} tp{p.tp} b{p.batch} "
                f"floor/measured {p.floor_seconds / p.measured_seconds:.2f}"
            )
    if args.write:
        write_constants(c, provenance)
    if args.readme:
        body = args.readme.read_text()
        begin, end = "<!-- step-fit:begin -->", "<!-- step-fit:end -->"
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
        if not pattern.search(body):
            raise SystemExit(f"{args.readme} has no {begin} ... {end} markers")
        args.readme.write_text(pattern.sub(lambda _m: f"{begin}\n{report}{end}", body, count=1))
    if not math.isfinite(train["median"]):
        raise SystemExit("fit failed")


if __name__ == "__main__":
    main()
