# Shared set-up for the bench scripts (sourced, not run): the Python to use, a scratch dir removed
# on exit, a free loopback port, and `start_server [ENV=VALUE ...]`, which runs `kvplan serve`
# there with the given environment, waits for /readyz, and stops it on exit.
# Sets: PY, WORK, PORT, BASE, SERVER_PID.

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3

WORK=$(mktemp -d)
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
BASE="http://127.0.0.1:$PORT"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  [ -n "${KEEP_LOG:-}" ] && cp "$WORK/server.log" "$KEEP_LOG" 2>/dev/null; rm -rf "$WORK"
}
trap cleanup EXIT

need_wrk() {
  if ! command -v wrk >/dev/null 2>&1; then
    echo "wrk not found: apt-get update && apt-get install -y wrk" >&2
    exit 2
  fi
}

start_server() {
  env KVPLAN_DATA_DIR="$WORK/data" "$@" \
    "$PY" -m planner serve --host 127.0.0.1 --port "$PORT" >"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 300); do
    if "$PY" -c "import urllib.request; urllib.request.urlopen('$BASE/readyz', timeout=1)" 2>/dev/null; then return 0; fi
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 2; }
    sleep 0.1
  done
  echo "kvplan serve did not become ready; see $WORK/server.log" >&2
  exit 2
}
