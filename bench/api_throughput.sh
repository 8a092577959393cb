#!/usr/bin/env bash
# Loopback throughput of the REST service against a bare FastAPI app, side by side in one run
# (issue 26; issue 3 before it).
#
#   bash bench/api_throughput.sh                  # 6 rounds, 3 s per endpoint per round
#   ROUNDS=5 DURATION=10 CONNECTIONS=16 bash bench/api_throughput.sh
#
# Servers, all started before the first measurement and all on the same uvicorn, uvloop and
# httptools, in the same venv:
#   bare     bench/bare_app.py: FastAPI, one async route returning a small dict, no middleware;
#   kvplan   `kvplan serve` as deployed (one worker, JSON access log on, its log to a file);
#   quiet    `kvplan serve` with KVPLAN_LOG_LEVEL=warning: the same app without access-log lines,
#            so the line's cost is the difference (QUIET=0 skips it);
#   before   with VS_PYTHONPATH=DIR, `kvplan serve` of another checkout's `planner` (e.g. a
#            `git worktree add` of an older commit): the same app before a change, same run.
# Endpoints: bare GET /item/{id}; kvplan GET /api/v1/gpus/{id} (the cheapest route through the
# whole app); POST /api/v1/plan with a distinct body on every request (context varies, so the
# answer memo rarely hits) and with one body repeated (the memo); GET /healthz (answered by the
# HTTP protocol itself: it measures no route, so the yardstick is the bare app).
# Rounds interleave the endpoints so drift hits all alike; rates are medians over rounds, ratios
# the median over rounds of each endpoint's rate over the bare app's in the same round.
# Prints req/s, p50, p99 per endpoint and each one's ratio to the bare app (goals: the GPU
# route >= 0.8x, distinct plans >= 0.5x). Needs wrk (Debian: `apt-get install -y wrk`). Absolute
# figures depend on the machine and on what else runs on it; the ratios are the figures.
set -euo pipefail

source "$(dirname "$0")/_server.sh"
DURATION=${DURATION:-3}
ROUNDS=${ROUNDS:-6}
CONNECTIONS=${CONNECTIONS:-16}
THREADS=${THREADS:-1}
WARMUP=${WARMUP:-2}
QUIET=${QUIET:-1}
VS_PYTHONPATH=${VS_PYTHONPATH:-}
need_wrk

cat > "$WORK/plan.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"meta-llama/Llama-3.1-8B","kv_cache_dtype":"bf16","context_tokens":8192,"kv_budget_bytes":51539607552}'
LUA

# Distinct bodies (context 1,024..131,071 tokens, within the model's maximum), so the server's
# plan memo rarely hits: the cost of planning itself.
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

EXTRA_PIDS=()
stop_extra() {
  for pid in "${EXTRA_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  cleanup
}
trap stop_extra EXIT

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_ready() {  # URL PID LOG
  for _ in $(seq 1 300); do
    if "$PY" -c "import urllib.request; urllib.request.urlopen('$1', timeout=1)" 2>/dev/null; then return 0; fi
    kill -0 "$2" 2>/dev/null || { cat "$3" >&2; exit 2; }
    sleep 0.1
  done
  echo "server at $1 did not become ready; see $3" >&2
  exit 2
}

start_server
BARE_PORT=$(free_port)
"$PY" bench/bare_app.py "$BARE_PORT" >"$WORK/bare.log" 2>&1 &
EXTRA_PIDS+=($!)
BARE="http://127.0.0.1:$BARE_PORT"
wait_ready "$BARE/item/x" "${EXTRA_PIDS[-1]}" "$WORK/bare.log"
if [ "$QUIET" = 1 ]; then
  QUIET_PORT=$(free_port)
  env KVPLAN_DATA_DIR="$WORK/data-quiet" KVPLAN_LOG_LEVEL=warning \
    "$PY" -m planner serve --host 127.0.0.1 --port "$QUIET_PORT" >"$WORK/quiet.log" 2>&1 &
  EXTRA_PIDS+=($!)
  QUIET_BASE="http://127.0.0.1:$QUIET_PORT"
  wait_ready "$QUIET_BASE/readyz" "${EXTRA_PIDS[-1]}" "$WORK/quiet.log"
fi

if [ -n "$VS_PYTHONPATH" ]; then
  VS_PORT=$(free_port)
  env KVPLAN_DATA_DIR="$WORK/data-vs" PYTHONPATH="$VS_PYTHONPATH" \
    "$PY" -m planner serve --host 127.0.0.1 --port "$VS_PORT" >"$WORK/vs.log" 2>&1 &
  EXTRA_PIDS+=($!)
  VS_BASE="http://127.0.0.1:$VS_PORT"
  wait_ready "$VS_BASE/readyz" "${EXTRA_PIDS[-1]}" "$WORK/vs.log"
fi

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

# name|wrk arguments (the last one the URL)
ENDPOINTS=(
  "bare GET /item/{id}|$BARE/item/H100-SXM-80GB"
  "GET /api/v1/gpus/{id}|$BASE/api/v1/gpus/H100-SXM-80GB"
  "POST plan, distinct|-s $WORK/plan_fresh.lua $BASE/api/v1/plan"
  "POST plan, repeated|-s $WORK/plan.lua $BASE/api/v1/plan"
  "GET /healthz|$BASE/healthz"
)
if [ "$QUIET" = 1 ]; then
  ENDPOINTS+=(
    "gpus/{id}, no access log|$QUIET_BASE/api/v1/gpus/H100-SXM-80GB"
    "plan distinct, no log|-s $WORK/plan_fresh.lua $QUIET_BASE/api/v1/plan"
  )
fi

if [ -n "$VS_PYTHONPATH" ]; then
  ENDPOINTS+=(
    "before: gpus/{id}|$VS_BASE/api/v1/gpus/H100-SXM-80GB"
    "before: plan distinct|-s $WORK/plan_fresh.lua $VS_BASE/api/v1/plan"
  )
fi

for entry in "${ENDPOINTS[@]}"; do
  # shellcheck disable=SC2086  # the wrk arguments are split on purpose
  run_wrk "$WARMUP" ${entry#*|} >/dev/null
done
: >"$WORK/results"
for round in $(seq 1 "$ROUNDS"); do
  for entry in "${ENDPOINTS[@]}"; do
    # shellcheck disable=SC2086
    read -r rps p50 p99 bad < <(run_wrk "$DURATION" ${entry#*|})
    if [ "$bad" != 0 ]; then
      echo "non-2xx responses from ${entry%%|*}: $bad (see the server log)" >&2
      tail -5 "$WORK/server.log" >&2
      exit 1
    fi
    printf '%s|%s|%s|%s|%s\n' "${entry%%|*}" "$round" "$rps" "$p50" "$p99" >>"$WORK/results"
  done
done

echo "wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s x $ROUNDS rounds, one uvicorn worker each, $(nproc) CPUs, Python $("$PY" -c 'import platform; print(platform.python_version())'), $(date -u +%Y-%m-%dT%H:%MZ)"
"$PY" - "$WORK/results" <<'PY'
import statistics, sys
rows: dict[str, dict[int, tuple[float, float, float]]] = {}
for line in open(sys.argv[1]):
    name, rnd, rps, p50, p99 = line.rstrip("\n").split("|")
    rows.setdefault(name, {})[int(rnd)] = (float(rps), float(p50), float(p99))
BARE = "bare GET /item/{id}"
bare = rows[BARE]
med = statistics.median
# Each endpoint against the bare app of the same round (measured seconds apart), then the
# median over rounds: drift and other jobs on the box hit both sides of a ratio alike.
ratio = {k: med(v[r][0] / bare[r][0] for r in v) for k, v in rows.items()}
print(f"{'endpoint':28} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'vs bare':>8}  rounds (req/s)")
for name, v in rows.items():
    rps, p50, p99 = (med(x[i] for x in v.values()) for i in range(3))
    each = " ".join(f"{v[r][0]:.0f}" for r in sorted(v))
    print(f"{name:28} {rps:9.0f} {p50:8.3f} {p99:8.3f} {ratio[name]:7.2f}x  {each}")
print(f"trivial route / bare: {ratio['GET /api/v1/gpus/{id}']:.2f}x (goal >= 0.8); "
      f"distinct plan / bare: {ratio['POST plan, distinct']:.2f}x (goal >= 0.5); "
      "medians of per-round ratios")
if "gpus/{id}, no access log" in rows:
    gpu, quiet = rows["GET /api/v1/gpus/{id}"], rows["gpus/{id}, no access log"]
    cost = med(1e6 / gpu[r][0] - 1e6 / quiet[r][0] for r in gpu)
    print(f"access log line: {cost:.1f} us per request (median over rounds of 1/rate with the "
          "log minus without it, GPU route; at 16 connections, so an estimate)")
PY
