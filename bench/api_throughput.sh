#!/usr/bin/env bash
# Loopback throughput of the REST service (issue 3): POST /api/v1/plan (the 48 GiB question)
# against GET /healthz, one server, one run, wrk at 16 connections.
#
#   bash bench/api_throughput.sh                  # 10 s per endpoint after a 3 s warm-up each
#   DURATION=30 CONNECTIONS=16 bash bench/api_throughput.sh
#
# Needs wrk (Debian: `apt-get update && apt-get install -y wrk`). Prints req/s, p50 and p99 per
# endpoint and the plan/healthz throughput ratio (target: ratio >= 0.5, plan p99 < 10 ms). The
# server runs as deployed (`kvplan serve`: one worker, JSON access log on), its log to a file.
# Absolute figures depend on the machine; compare ratios, and only runs on the same machine.
set -euo pipefail

source "$(dirname "$0")/_server.sh"
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-16}
THREADS=${THREADS:-1}
WARMUP=${WARMUP:-3}
need_wrk

cat > "$WORK/plan.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"meta-llama/Llama-3.1-8B","kv_cache_dtype":"bf16","context_tokens":8192,"kv_budget_bytes":51539607552}'
LUA

# Distinct bodies (context 1,024..131,071 tokens, within the model's maximum), so the server's plan memo rarely hits: the cost
# of planning itself, beside the repeated question above.
cat > "$WORK/plan_fresh.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local n = 0
request = function()
  n = n + 1
  local ctx = 1024 + (n * 7919) % 130048
  return wrk.format(nil, nil, nil, '{"model":"meta-llama/Llama-3.1-8B","kv_cache_dtype":"bf16","context_tokens":' .. ctx .. ',"kv_budget_bytes":51539607552}')
end
LUA

start_server

# One wrk run; prints "req_per_s p50_ms p99_ms non2xx".
run_wrk() {
  local seconds=$1; shift
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"${seconds}s" --latency "$@" | "$PY" -c '
import re, sys
text = sys.stdin.read()
def ms(label):
    m = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
    value, unit = float(m.group(1)), m.group(2)
    return value * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
print(f"{rps:.0f} {ms(50):.3f} {ms(99):.3f} {int(bad.group(1)) if bad else 0}")
'
}

run_wrk "$WARMUP" -s "$WORK/plan.lua" "$BASE/api/v1/plan" >/dev/null
read -r PLAN_RPS PLAN_P50 PLAN_P99 PLAN_BAD < <(run_wrk "$DURATION" -s "$WORK/plan.lua" "$BASE/api/v1/plan")
read -r FRESH_RPS FRESH_P50 FRESH_P99 FRESH_BAD < <(run_wrk "$DURATION" -s "$WORK/plan_fresh.lua" "$BASE/api/v1/plan")
run_wrk "$WARMUP" "$BASE/healthz" >/dev/null
read -r HEALTH_RPS HEALTH_P50 HEALTH_P99 HEALTH_BAD < <(run_wrk "$DURATION" "$BASE/healthz")
# /healthz is answered by the HTTP protocol itself (no ASGI request), so it no longer stands
# for "a trivial handler"; a GPU lookup by id is the cheapest route through the whole app.
TRIVIAL="$BASE/api/v1/gpus/H100-SXM-80GB"
run_wrk "$WARMUP" "$TRIVIAL" >/dev/null
read -r TRIV_RPS TRIV_P50 TRIV_P99 TRIV_BAD < <(run_wrk "$DURATION" "$TRIVIAL")

if [ "$PLAN_BAD" != 0 ] || [ "$HEALTH_BAD" != 0 ] || [ "$FRESH_BAD" != 0 ] || [ "$TRIV_BAD" != 0 ]; then
  echo "non-2xx responses: plan=$PLAN_BAD fresh=$FRESH_BAD healthz=$HEALTH_BAD gpu=$TRIV_BAD (see the server log)" >&2
  tail -5 "$WORK/server.log" >&2
  exit 1
fi

echo "wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s, one uvicorn worker, $(nproc) CPUs, $("$PY" -c 'import platform; print(platform.python_version())')"
printf '%-22s %10s %9s %9s\n' endpoint "req/s" "p50 ms" "p99 ms"
printf '%-22s %10s %9s %9s\n' "POST /api/v1/plan" "$PLAN_RPS" "$PLAN_P50" "$PLAN_P99"
printf '%-22s %10s %9s %9s\n' "POST plan, distinct" "$FRESH_RPS" "$FRESH_P50" "$FRESH_P99"
printf '%-22s %10s %9s %9s\n' "GET /healthz" "$HEALTH_RPS" "$HEALTH_P50" "$HEALTH_P99"
printf '%-22s %10s %9s %9s\n' "GET /api/v1/gpus/{id}" "$TRIV_RPS" "$TRIV_P50" "$TRIV_P99"
"$PY" -c "
ratio = $PLAN_RPS / $HEALTH_RPS
print(f'ratio plan/healthz {ratio:.2f} (target >= 0.5); plan p99 $PLAN_P99 ms (target < 10 ms)')
print(f'ratio distinct-plan/healthz {$FRESH_RPS / $HEALTH_RPS:.2f} (every body planned afresh)')
print(f'ratio distinct-plan/gpu-lookup {$FRESH_RPS / $TRIV_RPS:.2f} (target >= 0.6; a route through the whole app)')
"
