#!/usr/bin/env bash
# Does the calibration predict a real model's decode step? CPU figure, recorded in the README.
#
#   bash bench/validate_cpu.sh            # about 1-2 minutes on a 2-core host
#   README=none bash bench/validate_cpu.sh  # print only, leave README.md alone
#
# Starts `kvplan serve` on loopback (SQLite in a scratch dir), runs
# `kvplan probe --device cpu --validate --report <server>`: the probe (one thread), then a
# Llama-shaped 124M fp32 model (transformers, random weights) timed at 10 batch x context points,
# each planned through the server's POST /api/v1/plan with the stored calibration_id. The step
# terms are fitted on 4 training points; the error is reported on the 6 held-out ones. The table
# (point, measured, calibrated, floor, error) replaces the README's cpu-validation section.
set -euo pipefail
source "$(dirname "$0")/_server.sh"

TOKEN=$("$PY" -c 'import secrets; print(secrets.token_urlsafe(24))')
start_server KVPLAN_ADMIN_TOKEN="$TOKEN" KVPLAN_DATABASE_URL= KVPLAN_LOG_LEVEL=warning

RECORD="$WORK/cpu_validation.json"
KVPLAN_ADMIN_TOKEN="$TOKEN" "$PY" -m planner probe --device cpu --validate --json \
  --report "$BASE" >"$RECORD"

args=("$RECORD" --section cpu-validation --command "bash bench/validate_cpu.sh")
if [ "${README:-README.md}" != none ]; then args+=(--readme "${README:-README.md}"); fi
"$PY" bench/validation_report.py "${args[@]}"
