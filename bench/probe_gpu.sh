#!/usr/bin/env bash
# Run the CUDA decode-bandwidth probe on one GPU and print the figures (issue 5).
#
#   bash bench/probe_gpu.sh                 # H200-class: about 2 minutes, under 3
#   PROBE_SECONDS=60 bash bench/probe_gpu.sh
#
# Two probes: the Llama-3.1-8B decode shape (32 q heads / 8 KV heads / d 128, bf16) and an MHA
# control (32 / 32 / 128), each a copy ceiling (read-only reduction N bytes; device copy 2N) plus
# a decode-attention fit t = t0 + bytes / BW_eff over rotating cold KV buffers. Prints one summary
# per shape and the per-size table; the full records go to $OUT (default /tmp/kvplan_probe_gpu).
#
# Needs on the GPU host: python3 with torch (CUDA build), numpy and pydantic; no network, no
# root, no clock locking (probe.md pitfall 5: detect and flag, never change the machine).
set -euo pipefail

cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
BUDGET=${PROBE_SECONDS:-75}
# PROBE_DEVICE=cpu dry-runs this script's plumbing on a host without a GPU (CPU figures).
DEVICE=${PROBE_DEVICE:-cuda}
OUT=${OUT:-/tmp/kvplan_probe_gpu}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.max.sm,clocks.max.mem,power.limit,ecc.mode.current,mig.mode.current \
    --format=csv || true
fi

"$PY" - "$DEVICE" <<'PY'
import importlib.util, sys
missing = [m for m in ("torch", "numpy", "pydantic") if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"probe_gpu.sh: missing Python packages on this host: {', '.join(missing)}")
if sys.argv[1] == "cpu":
    sys.exit(0)
import torch
if not torch.cuda.is_available():
    sys.exit(f"probe_gpu.sh: torch {torch.__version__} sees no CUDA device (torch.version.cuda={torch.version.cuda})")
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, device {torch.cuda.get_device_name(0)}")
PY

# Hard stop inside 3 minutes even if something hangs: both budgets (75 + 37.5 s) plus setup.
timeout --signal=TERM $(( BUDGET * 2 + 20 )) "$PY" - "$BUDGET" "$OUT" "$DEVICE" <<'PY'
import json, sys, time
from pathlib import Path

from planner.probe import AttentionShape
from planner.probe.run import run_probe

budget, out, device = float(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
TB, MB = 1e12, 1e6

def show(label: str, c) -> None:
    ds = c.datasheet_bandwidth_bytes_per_s
    env = c.environment
    print(f"\n== {label}: {c.device_name} | backend {c.backend} | {c.dtype} | "
          f"launch {env.get('launch_mode')} | {c.duration_seconds:.1f} s")
    print(f"copy ceiling (read-only, median): {c.copy_bandwidth_bytes_per_s / TB:.3f} TB/s"
          f"   best {c.copy_bandwidth_best_bytes_per_s / TB:.3f} TB/s")
    copies = [p for p in c.points if p.kind == "copy"]
    for p in copies:
        print(f"device copy (2N bytes):           {p.bandwidth_bytes_per_s / TB:.3f} TB/s at "
              f"{p.working_set_bytes / 2**30:.2f} GiB")
    print(f"decode BW_eff:                    {c.decode_bandwidth_bytes_per_s / TB:.3f} TB/s"
          f"   (decode/copy {c.decode_to_copy_ratio:.3f})")
    print(f"t0 per attention call:            {c.fixed_overhead_seconds * 1e6:.2f} us")
    if c.half_performance_bytes is not None:
        print(f"n_half = t0 x BW_eff:             {c.half_performance_bytes / MB:.1f} MB")
    if ds:
        print(f"datasheet:                        {ds / TB:.3f} TB/s ({c.datasheet_source})")
        print(f"copy/datasheet {c.copy_to_datasheet_ratio:.3f}   decode/datasheet {c.decode_to_datasheet_ratio:.3f}")
    else:
        print("datasheet:                        no row for this device")
    theo = env.get("theoretical_bandwidth_bytes_per_s")
    if theo:
        print(f"clock x bus width (cross-check):  {theo / TB:.3f} TB/s")
    if c.fit:
        print(f"fit: {c.fit.points_used} sizes >= {c.fit.min_bytes / 2**20:.0f} MiB, R^2 {c.fit.r_squared:.4f}, "
              f"|resid| median {c.fit.median_abs_relative_residual:.1%} max {c.fit.max_abs_relative_residual:.1%}")
        for f in c.fit.piecewise:
            print(f"  piecewise {f.min_bytes / MB:.1f}-{f.max_bytes / MB:.1f} MB: t0 {f.fixed_overhead_seconds * 1e6:.2f} us, "
                  f"BW {f.decode_bandwidth_bytes_per_s / TB:.3f} TB/s")
    print(f"flags: {', '.join(c.flags) or 'none'}")
    for n in c.notes:
        print(f"  note: {n}")
    print(f"{'kind':6} {'batch':>5} {'ctx':>6} {'MB/call':>9} {'set MB':>8} {'us median':>10} {'us best':>9} {'TB/s':>7} {'cv':>6} {'resid':>7}")
    for p in sorted(c.points, key=lambda p: (p.kind, p.bytes)):
        r = "" if p.relative_residual is None else f"{p.relative_residual:+.1%}"
        print(f"{p.kind:6} {p.batch or '':>5} {p.context_tokens or '':>6} {p.bytes / MB:9.2f} {p.working_set_bytes / MB:8.1f} "
              f"{p.seconds_median * 1e6:10.2f} {p.seconds_best * 1e6:9.2f} {p.bandwidth_bytes_per_s / TB:7.3f} "
              f"{p.coefficient_of_variation:6.3f} {r:>7}")

runs = [
    ("Llama-3.1-8B GQA 32/8/128 bf16", AttentionShape(num_q_heads=32, num_kv_heads=8, head_dim=128), budget),
    ("MHA control 32/32/128 bf16", AttentionShape(num_q_heads=32, num_kv_heads=32, head_dim=128), budget * 0.5),
]
started = time.monotonic()
for label, shape, seconds in runs:
    c = run_probe(device, seconds, shape=shape, dtype="bf16")
    name = label.split()[0].lower().replace(".", "_")
    (out / f"{name}.json").write_text(c.model_dump_json(indent=2))
    show(label, c)
print(f"\ntotal {time.monotonic() - started:.1f} s; records in {out}/")
PY
