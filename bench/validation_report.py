"""Render a validated calibration (`kvplan probe --validate --json`) as Markdown for the README.

    python bench/validation_report.py RECORD.json [--out FILE.md]
        [--readme README.md --section NAME]

With --readme, the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->` is replaced (the
markers must already be there), so a bench run records its figure in place.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.probe import CalibrationIn
from planner.probe.validate import validation_table


def _rate(x: float) -> str:
    return f"{x / 1e12:.3f} TB/s" if x >= 1e11 else f"{x / 1e9:.2f} GB/s"


def render(c: CalibrationIn, command: str) -> str:
    v = c.validation
    if v is None:
        raise SystemExit("the record has no validation: run `kvplan probe --validate --json`")
    t = c.step_terms
    ratio = c.decode_to_copy_ratio or c.decode_bandwidth_bytes_per_s / c.copy_bandwidth_bytes_per_s
    measured = c.measured_at.strftime("%Y-%m-%d") if c.measured_at else "?"
    lines = [
        f"Measured {measured} on {c.device_name} with `{command}` "
        f"({v.framework}; {v.model}; {v.launch_mode}"
        + (f", {v.threads} thread{'s' if v.threads != 1 else ''}" if v.threads else "")
        + f"; validation {v.duration_seconds:.0f} s, probe {c.duration_seconds or 0:.0f} s).",
        "",
        f"- copy ceiling (read-only, median): {_rate(c.copy_bandwidth_bytes_per_s)}"
        + (
            f" = {c.copy_to_datasheet_ratio:.3f} × datasheet "
            f"{_rate(c.datasheet_bandwidth_bytes_per_s)}"
            if c.copy_to_datasheet_ratio and c.datasheet_bandwidth_bytes_per_s
            else " (no datasheet figure)"
        ),
        f"- decode-attention BW_eff: {_rate(c.decode_bandwidth_bytes_per_s)} = {ratio:.3f} × the "
        f"copy ceiling; fitted t0 {c.fixed_overhead_seconds * 1e6:.1f} µs per attention call",
    ]
    if t is not None:
        flops = f"{t.matmul_flops_per_s / 1e9:.1f} GFLOP/s" if t.matmul_flops_per_s else "none"
        lines.append(
            f"- step terms fitted on the {t.training_points} training points: "
            f"{t.per_layer_overhead_seconds * 1e6:.1f} µs per layer, matmul rate {flops}"
            + (f" (clamped to 0: {', '.join(t.clamped)})" if t.clamped else "")
        )
    lines.append(f"- floor: {v.floor_label}")
    lines.append(f"- probe flags: {', '.join(f for f in c.flags if f != 'validated') or 'none'}")
    lines += ["", *validation_table(v), ""]
    lines.append(
        f"Held-out points: calibrated median |error| **{v.median_abs_error:.1%}**, max "
        f"{v.max_abs_error:.1%}; bytes only (what the plan shows today) median "
        f"{v.bytes_only_median_abs_error:.1%}, max {v.bytes_only_max_abs_error:.1%}; floor median "
        f"{v.floor_median_abs_error:.1%}."
    )
    return "\n".join(lines) + "\n"


def patch(readme: Path, section: str, text: str) -> None:
    body = readme.read_text()
    begin, end = f"<!-- {section}:begin -->", f"<!-- {section}:end -->"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(body):
        raise SystemExit(f"{readme} has no {begin} ... {end} markers")
    readme.write_text(pattern.sub(lambda _m: f"{begin}\n{text}{end}", body, count=1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("record", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--readme", type=Path)
    ap.add_argument("--section", default="cpu-validation")
    ap.add_argument("--command", default="kvplan probe --validate")
    args = ap.parse_args()
    data = json.loads(args.record.read_text())
    data.pop("id", None)
    text = render(CalibrationIn.model_validate(data), args.command)
    if args.out:
        args.out.write_text(text)
    if args.readme:
        patch(args.readme, args.section, text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
