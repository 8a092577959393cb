#!/usr/bin/env bash
# Load on loopback (issue 7): wrk, 64 connections, 30 s, a mix of plan, sweep and models
# against one `kvplan serve` process (the deployed shape: one process per container).
#
#   bash bench/load.sh
#   DURATION=60 CONNECTIONS=64 THREADS=2 bash bench/load.sh
#
# Mix (per request, drawn by wrk's Lua): 60 % POST /api/v1/plan (the 48 GiB question, four
# context lengths), 20 % POST /api/v1/sweep (4 x 4 = 16 points, below the big-sweep guard),
# 20 % GET /api/v1/models. Reports requests/s, p50/p99, non-2xx and socket errors, and the
# server's RSS (VmRSS) after start-up, after a warm-up, and after the run. Side by side in the same
# run, /healthz latency on its own (one connection, before the load) and under the load (one more
# connection, the way a liveness probe sees it). Fails (exit 1) on any non-2xx or socket error,
# RSS growth over 10 % across the measured run (after warm-up), or a /healthz p99 under load
# above MAX_HEALTHZ_P99_RATIO (20) times its p99 alone.
#
# Then two Hub runs (issue 23; HUB_RUNS="down slow" by default, HUB_RUNS= skips them), each on a
# fresh server whose HF_ENDPOINT is a Hub that is down (SYNs dropped) or 300 ms away
# (bench/_hub.py): 16 connections post plans for Hub ids nobody has (distinct ids when down, 50
# ids over and over when slow) while one connection asks /healthz and four plan catalog
# questions. Fails unless /healthz p99 < MAX_HUB_HEALTHZ_P99_MS (500) and the catalog plans
# stay 2xx with p99 < MAX_CATALOG_P99_MS (500); their p99 alone, before the attack, is shown
# beside it.
# Needs wrk (Debian: `apt-get update && apt-get install -y wrk`). Figures depend on the machine.
set -euo pipefail

source "$(dirname "$0")/_server.sh"
DURATION=${DURATION:-30}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
WARMUP=${WARMUP:-10}
MAX_RSS_GROWTH_PERCENT=${MAX_RSS_GROWTH_PERCENT:-10}
MAX_HEALTHZ_P99_RATIO=${MAX_HEALTHZ_P99_RATIO:-20}
need_wrk

cat > "$WORK/mix.lua" <<'LUA'
-- Pre-built requests, picked at random per call: 6 plan, 2 sweep, 2 models out of 10.
local base = '"model":"meta-llama/Llama-3.1-8B","kv_cache_dtype":"bf16","kv_budget_bytes":51539607552'
local json = { ["Content-Type"] = "application/json" }
local mix = {}
for _, ctx in ipairs({ 2048, 8192, 32768, 131072 }) do
  local body = '{' .. base .. ',"context_tokens":' .. ctx .. '}'
  table.insert(mix, wrk.format("POST", "/api/v1/plan", json, body))
end
table.insert(mix, mix[2])
table.insert(mix, mix[3])
local sweep = '{"base":{' .. base .. ',"context_tokens":8192},'
  .. '"context_tokens":[2048,8192,32768,131072],"batch_sizes":[1,4,16,64]}'
for _ = 1, 2 do table.insert(mix, wrk.format("POST", "/api/v1/sweep", json, sweep)) end
for _ = 1, 2 do table.insert(mix, wrk.format("GET", "/api/v1/models")) end

request = function()
  return mix[math.random(#mix)]
end
LUA

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status"; }

start_server KVPLAN_DATABASE_URL="${KVPLAN_DATABASE_URL:-}" KVPLAN_LOG_LEVEL="${KVPLAN_LOG_LEVEL:-warning}"
# Each body must be a 200 before measuring: a wrong body would only show up as non-2xx.
"$PY" - "$BASE" "$WORK/mix.lua" <<'PY'
import json, sys, urllib.request
base = sys.argv[1]
common = {"model": "meta-llama/Llama-3.1-8B", "kv_cache_dtype": "bf16", "kv_budget_bytes": 51539607552}
bodies = [("/api/v1/plan", {**common, "context_tokens": 131072}),
          ("/api/v1/sweep", {"base": {**common, "context_tokens": 8192},
                             "context_tokens": [2048, 8192, 32768, 131072], "batch_sizes": [1, 4, 16, 64]})]
for path, body in bodies:
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()
urllib.request.urlopen(base + "/api/v1/models", timeout=10).read()
PY

RSS_START=$(rss_kib)
wrk -t"$THREADS" -c"$CONNECTIONS" -d"${WARMUP}s" -s "$WORK/mix.lua" "$BASE" >/dev/null
RSS_BEFORE=$(rss_kib)
# /healthz alone, then under the mix: the same probe-like client (one connection) both times.
wrk -t1 -c1 -d"${HEALTHZ_SECONDS:-10}s" --latency "$BASE/healthz" >"$WORK/healthz_alone.txt"
wrk -t1 -c1 -d"$((DURATION - 2))s" --latency "$BASE/healthz" >"$WORK/healthz_load.txt" &
HEALTHZ_PID=$!
wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$WORK/mix.lua" "$BASE" >"$WORK/wrk.txt"
wait "$HEALTHZ_PID"
RSS_AFTER=$(rss_kib)

VERDICT=0
{
"$PY" - "$WORK/wrk.txt" "$RSS_START" "$RSS_BEFORE" "$RSS_AFTER" "$MAX_RSS_GROWTH_PERCENT" \
  "wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s (after ${WARMUP}s warm-up), one kvplan serve process, $(nproc) CPUs" \
  "$WORK/healthz_alone.txt" "$WORK/healthz_load.txt" "$MAX_HEALTHZ_P99_RATIO" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
rss_start, rss_before, rss_after = (int(x) for x in sys.argv[2:5])
max_growth = float(sys.argv[5])
alone, loaded = open(sys.argv[7]).read(), open(sys.argv[8]).read()
max_ratio = float(sys.argv[9])
def ms(label, source=None):
    m = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", source or text, re.M)
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
def bad_of(source):
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", source)
    return int(m.group(1)) if m else 0
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
total = int(re.search(r"(\d+) requests in", text).group(1))
non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
non2xx = int(non2xx.group(1)) if non2xx else 0
sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
sock_errors = dict(zip(("connect", "read", "write", "timeout"), map(int, sock.groups()))) if sock else {}
growth = 100.0 * (rss_after - rss_before) / rss_before
print(sys.argv[6])
print(f"requests        {total} ({rps:.0f} req/s)")
print(f"latency         p50 {ms(50):.1f} ms, p90 {ms(90):.1f} ms, p99 {ms(99):.1f} ms")
print(f"non-2xx         {non2xx}")
print(f"socket errors   {sum(sock_errors.values())} {sock_errors or ''}".rstrip())
print(f"server RSS      {rss_start / 1024:.1f} MiB after start, {rss_before / 1024:.1f} MiB after warm-up, "
      f"{rss_after / 1024:.1f} MiB after the run ({growth:+.1f} %, target < {max_growth:g} %)")
p99_alone, p99_load = ms(99, alone), ms(99, loaded)
ratio = p99_load / p99_alone
print(f"GET /healthz    alone p50 {ms(50, alone):.2f} ms, p99 {p99_alone:.2f} ms; under load "
      f"p50 {ms(50, loaded):.2f} ms, p99 {p99_load:.2f} ms ({ratio:.1f}x, target <= {max_ratio:g}x)")
health_bad = bad_of(alone) + bad_of(loaded)
ok = (non2xx == 0 and not any(sock_errors.values()) and growth < max_growth
      and ratio <= max_ratio and health_bad == 0)
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
} || VERDICT=1

# ---- Hub runs: a Hub that is down, and one 300 ms away -----------------------------------------
HUB_RUNS=${HUB_RUNS-down slow}
HUB_SECONDS=${HUB_SECONDS:-20}
MAX_HUB_HEALTHZ_P99_MS=${MAX_HUB_HEALTHZ_P99_MS:-500}
MAX_CATALOG_P99_MS=${MAX_CATALOG_P99_MS:-500}

cat > "$WORK/catalog.lua" <<'LUA'
local base = '"model":"meta-llama/Llama-3.1-8B","kv_cache_dtype":"bf16","kv_budget_bytes":51539607552'
local json = { ["Content-Type"] = "application/json" }
local mix = {}
for _, ctx in ipairs({ 2048, 8192, 32768, 131072 }) do
  table.insert(mix, wrk.format("POST", "/api/v1/plan", json, '{' .. base .. ',"context_tokens":' .. ctx .. '}'))
end
request = function() return mix[math.random(#mix)] end
LUA

hub_run() {
  local mode=$1 ids=$2 url_file="$WORK/hub-$mode.url" port base pid hub_pid
  cat > "$WORK/hub-$mode.lua" <<LUA
local json = { ["Content-Type"] = "application/json" }
request = function()
  local body = '{"model":"acme/typo-' .. math.random($ids) .. '","kv_budget_bytes":51539607552}'
  return wrk.format("POST", "/api/v1/plan", json, body)
end
LUA
  "$PY" bench/_hub.py "$mode" "$url_file" & hub_pid=$!
  for _ in $(seq 1 100); do [ -s "$url_file" ] && break; sleep 0.1; done
  port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  base="http://127.0.0.1:$port"
  env KVPLAN_DATA_DIR="$WORK/data-$mode" KVPLAN_LOG_LEVEL=warning KVPLAN_HUB_ENABLED=true \
    HF_ENDPOINT="$(cat "$url_file")" HF_HOME="$WORK/hf-$mode" HF_HUB_OFFLINE=0 \
    "$PY" -m planner serve --host 127.0.0.1 --port "$port" >"$WORK/server-$mode.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do
    "$PY" -c "import urllib.request; urllib.request.urlopen('$base/readyz', timeout=1)" 2>/dev/null && break
    sleep 0.1
  done
  wrk -t1 -c4 -d10s --latency -s "$WORK/catalog.lua" "$base" >"$WORK/catalog-alone-$mode.txt"
  wrk -t1 -c16 -d"${HUB_SECONDS}s" --timeout 30s -s "$WORK/hub-$mode.lua" "$base" >"$WORK/hub-attack-$mode.txt" &
  local attack=$!
  sleep 1
  wrk -t1 -c1 -d"$((HUB_SECONDS - 3))s" --latency "$base/healthz" >"$WORK/healthz-$mode.txt" &
  local probe=$!
  wrk -t1 -c4 -d"$((HUB_SECONDS - 3))s" --latency -s "$WORK/catalog.lua" "$base" >"$WORK/catalog-$mode.txt"
  wait "$probe" "$attack"
  kill "$pid" "$hub_pid" 2>/dev/null || true
  wait "$pid" "$hub_pid" 2>/dev/null || true
  "$PY" - "$mode" "$WORK" "$MAX_HUB_HEALTHZ_P99_MS" "$MAX_CATALOG_P99_MS" <<'PY'
import re, sys
mode, work, max_health, max_catalog = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
read = lambda name: open(f"{work}/{name}-{mode}.txt").read()
def ms(label, text):
    m = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
def count(pattern, text):
    m = re.search(pattern, text)
    return int(m.group(1)) if m else 0
health, alone, loaded, attack = read("healthz"), read("catalog-alone"), read("catalog"), read("hub-attack")
attacks = count(r"(\d+) requests in", attack)
bad = count(r"Non-2xx or 3xx responses:\s+(\d+)", loaded) + count(r"Non-2xx or 3xx responses:\s+(\d+)", health)
label = {"down": "Hub down (SYNs dropped)", "slow": "Hub 300 ms away"}.get(mode, mode)
print(f"{label}: {attacks} plans for Hub ids answered in the run (16 connections)")
print(f"  GET /healthz    p50 {ms(50, health):.2f} ms, p99 {ms(99, health):.2f} ms (target < {max_health:g} ms)")
print(f"  catalog plans   alone p50 {ms(50, alone):.2f} ms, p99 {ms(99, alone):.2f} ms; during the "
      f"attack p50 {ms(50, loaded):.2f} ms, p99 {ms(99, loaded):.2f} ms (target < {max_catalog:g} ms, all 2xx)")
ok = ms(99, health) < max_health and ms(99, loaded) < max_catalog and bad == 0 and attacks > 0
print("  PASS" if ok else "  FAIL")
sys.exit(0 if ok else 1)
PY
}

for mode in $HUB_RUNS; do
  case $mode in down) ids=1000000000 ;; *) ids=50 ;; esac
  hub_run "$mode" "$ids" || VERDICT=1
done
exit "${VERDICT:-0}"
