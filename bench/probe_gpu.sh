#!/usr/bin/env bash
# The prepared GPU run (H200-class, one GPU, well under 10 minutes):
#   1. the decode-bandwidth probe on an MHA control shape (32/32/128, bf16);
#   2. `kvplan probe --device cuda --validate`: the probe on the Llama-3.1-8B decode shape
#      (32 q / 8 KV heads, d 128, bf16), then the 8B-shaped model (transformers, random bf16
#      weights, CUDA graphs) timed at 10 batch x context points, each planned through the
#      planner with the stored calibration; step terms fitted on 4 training points, the error
#      reported on the 6 held-out ones.
# Prints the copy ceiling, decode-attention BW_eff as a fraction of it, the fitted t0, the
# validation table and the acceptance checks, and writes them under $OUT
# (default /tmp/kvplan_probe_gpu): gpu_validation.md (the README's gpu-validation section,
# `python bench/validation_report.py $OUT/llama8b_validation.json --readme README.md
# --section gpu-validation` puts it there), llama8b_validation.json, mha_control.json, run.log.
#
#   bash bench/probe_gpu.sh                # on the GPU host
#   bash bench/probe_gpu.sh fetch-wheels   # on a host with network: wheels the GPU image lacks
#
# The GPU host needs python3 with torch (CUDA), transformers (5.x), numpy, typer and httpx; the
# planner's pydantic stack is installed from ./.whl (made by `fetch-wheels`) when missing. No
# network, no root, no clock locking: clocks and throttling are recorded, never changed.
set -euo pipefail

cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/kvplan_probe_gpu}
WHEELS=${WHEELS:-.whl}
# Pure-Python wheels plus pydantic-core's CPython 3.12 manylinux build; versions as tested here.
NEEDED="pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
pydantic-settings==2.16.3 python-dotenv==1.2.4 typing-extensions==4.16.0"

if [ "${1:-}" = fetch-wheels ]; then
  mkdir -p "$WHEELS"
  # shellcheck disable=SC2086
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$WHEELS" $NEEDED
  ls -1 "$WHEELS"
  exit 0
fi

mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1
started=$(date +%s)

if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.max.sm,clocks.max.mem,power.limit,ecc.mode.current,mig.mode.current \
    --format=csv || true
fi

missing() {
  "$PY" - <<'PY'
import importlib.util
mods = ("pydantic", "pydantic_core", "pydantic_settings", "dotenv", "annotated_types",
        "typing_inspection", "typer", "httpx", "numpy", "torch", "transformers")
print(" ".join(m for m in mods if importlib.util.find_spec(m) is None))
PY
}
gone=$(missing)
if [ -n "$gone" ] && compgen -G "$WHEELS/*.whl" >/dev/null; then
  SITE=${SITE:-/tmp/kvplan-site}
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  gone=$(missing)
fi
if [ -n "$gone" ]; then
  echo "probe_gpu.sh: missing Python modules on this host: $gone" >&2
  echo "  on a host with network run: bash bench/probe_gpu.sh fetch-wheels, then bring .whl/ here" >&2
  exit 3
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

"$PY" - <<'PY'
import sys, torch, transformers
if not torch.cuda.is_available():
    sys.exit(f"probe_gpu.sh: torch {torch.__version__} sees no CUDA device (torch.version.cuda={torch.version.cuda})")
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, transformers {transformers.__version__}, "
      f"device {torch.cuda.get_device_name(0)}")
PY

# 1. MHA control: the probe only (30 s budget).
timeout --signal=TERM 120 "$PY" - "$OUT" <<'PY'
import sys
from pathlib import Path
from planner.cli.probe import format_calibration
from planner.probe import AttentionShape
from planner.probe.run import run_probe

c = run_probe("cuda", 30, shape=AttentionShape(num_q_heads=32, num_kv_heads=32, head_dim=128), dtype="bf16")
Path(sys.argv[1], "mha_control.json").write_text(c.model_dump_json(indent=2))
print("== MHA control 32/32/128 bf16")
print("\n".join(format_calibration(c)))
PY

# 2. The 8B shape: probe (45 s budget, so the whole probe stays under 60 s) and validation.
timeout --signal=TERM 480 "$PY" -m planner probe --device cuda --validate --json --max-seconds 45 \
  >"$OUT/llama8b_validation.json"

"$PY" bench/validation_report.py "$OUT/llama8b_validation.json" --out "$OUT/gpu_validation.md" \
  --command "bash bench/probe_gpu.sh"

"$PY" - "$OUT/llama8b_validation.json" <<'PY'
import json, sys
from planner.probe import CalibrationIn

data = json.load(open(sys.argv[1]))
data.pop("id", None)
c = CalibrationIn.model_validate(data)
v = c.validation
rho = c.decode_bandwidth_bytes_per_s / c.copy_bandwidth_bytes_per_s
print("\n== acceptance (issue: prove the calibration on a GPU)")
print(f"decode BW_eff / copy ceiling = {rho:.3f} (want >= 0.85): {'PASS' if rho >= 0.85 else 'FAIL'}")
print(f"held-out |error| median {v.median_abs_error:.1%}, max {v.max_abs_error:.1%} (want every held-out point "
      f"within 10%): {'PASS' if v.max_abs_error <= 0.10 else 'FAIL'}")
d = c.duration_seconds or 0.0
print(f"probe duration {d:.1f} s (want < 60 s): {'PASS' if d < 60 else 'FAIL'}")
print(f"launch mode: {v.launch_mode}; backend {c.backend}; flags: {', '.join(c.flags)}")
PY
echo "total $(( $(date +%s) - started )) s; files in $OUT/"
