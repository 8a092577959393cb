#!/usr/bin/env bash
# Instructions per plan() of the 8B question of issue 26 (Llama-3.1-8B, 8,192 tokens, 48 GiB
# bf16), counted by callgrind, which a loaded machine does not move: a run of 200 warm-up plans
# and one of 200 + N, the difference over N. VARY contexts in turn (8,192 and VARY − 1 shorter
# ones, 64 apart, as `plan_speed.py --vary`): 1 is the repeated question; 64 leaves nothing
# kept per answer to serve it.
#
#   PYTHONPATH=$PWD bash bench/plan_instructions.sh [N] [VARY ...]     (default: 200 1 64)
#
# Side by side: run it again with PYTHONPATH set to another checkout (e.g. `git archive` of
# an older commit) and compare the counts.
set -euo pipefail
N=${1:-200}
shift || true
VARIES=${*:-1 64}
PY=${PYTHON:-.venv/bin/python}
count() {  # $1: plans after the warm-up, $2: contexts in turn
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$PY" -c "
from planner.core.schema import PlanRequest
from planner.service import plan
r = PlanRequest.model_validate_json(b'{\"model\":\"meta-llama/Llama-3.1-8B\",\"kv_cache_dtype\":\"bf16\",\"context_tokens\":8192,\"kv_budget_bytes\":51539607552}')
asked = [r.model_copy(update={'context_tokens': 8192 - 64 * i}) for i in range($2)]
for _ in range(200): plan(r)
for i in range($1): plan(asked[i % $2])
" 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
for vary in $VARIES; do
  a=$(count 0 "$vary")
  b=$(count "$N" "$vary")
  echo "instructions per plan(): $(( (b - a) / N )) ($N plans, $vary contexts in turn)"
done
