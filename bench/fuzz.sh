#!/usr/bin/env bash
# Long schemathesis run against a live kvplan server on loopback (the in-process contract test,
# tests/api/test_schemathesis.py, runs 40 examples per operation in `make test`).
#
#   bash bench/fuzz.sh                          # 600 s, up to 2000 examples per operation
#   MAX_TIME=120 MAX_EXAMPLES=500 bash bench/fuzz.sh
#   URL=http://127.0.0.1:8000 TOKEN=... bash bench/fuzz.sh   # an already running server
#
# All of schemathesis' checks (`--checks all`, CHECKS to narrow), every phase (examples, coverage, fuzzing, stateful), every
# operation except POST /api/v1/probe, which would run the real probe for up to 120 s a call and
# one at a time (it is fuzzed in-process with a stub probe). The server gets an admin token (so
# admin routes are exercised with and without it) and a lifted admin rate limit (fuzzing checks
# the contract; tests/api/test_limits.py checks the limit). Prints the operations, test cases and
# failures; the exit status is schemathesis's (0: no failure). Reports land in $REPORT_DIR.
set -euo pipefail

source "$(dirname "$0")/_server.sh"
ST=${ST:-$(dirname "$PY")/st}
command -v "$ST" >/dev/null 2>&1 || ST=st
ST=$(realpath "$(command -v "$ST")")
CONFIG=$PWD/bench/schemathesis.toml
MAX_TIME=${MAX_TIME:-600}
MAX_EXAMPLES=${MAX_EXAMPLES:-2000}
WORKERS=${WORKERS:-2}
SEED=${SEED:-7}
REPORT_DIR=${REPORT_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/kvplan-fuzz.XXXXXX")}
mkdir -p "$REPORT_DIR"
REPORT_DIR=$(realpath "$REPORT_DIR")

if [ -z "${URL:-}" ]; then
  URL=$BASE
  TOKEN=$("$PY" -c 'import secrets; print(secrets.token_urlsafe(32))')
  start_server KVPLAN_ADMIN_TOKEN="$TOKEN" KVPLAN_DATABASE_URL="${KVPLAN_DATABASE_URL:-}" \
    KVPLAN_ADMIN_RATE_PER_MINUTE=100000 KVPLAN_ADMIN_RATE_BURST=100000 KVPLAN_LOG_LEVEL=warning
fi
[ -n "${TOKEN:-}" ] || { echo "fuzz.sh: set TOKEN (the server's KVPLAN_ADMIN_TOKEN) with URL" >&2; exit 2; }

set +e
# Run from the scratch dir: schemathesis keeps a .schemathesis/ cache in its working directory.
cd "$WORK"
"$ST" --config-file "$CONFIG" run "$URL/api/v1/openapi.json" \
  --header "Authorization: Bearer $TOKEN" \
  --exclude-operation-id run_probe --checks "${CHECKS:-all}" \
  --max-time "$MAX_TIME" --max-examples "$MAX_EXAMPLES" --workers "$WORKERS" --seed "$SEED" \
  --suppress-health-check too_slow,filter_too_much \
  --report junit,ndjson --report-dir "$REPORT_DIR" \
  --no-color >"$WORK/st.log" 2>&1
rc=$?
set -e
# The summary schemathesis prints last: operations, test cases, failures, duration.
sed -n '/SUMMARY/,$p' "$WORK/st.log"
grep -qi "SUMMARY" "$WORK/st.log" || tail -40 "$WORK/st.log"
cp "$WORK/st.log" "$REPORT_DIR/st.log"
if [ -n "$SERVER_PID" ] && grep -q '"level": "error"' "$WORK/server.log"; then
  echo "server logged errors:" >&2
  grep '"level": "error"' "$WORK/server.log" | tail -5 >&2
fi
echo "fuzz.sh: schemathesis exit $rc; reports in $REPORT_DIR (st.log, junit.xml, events.ndjson)"
exit "$rc"
