#!/usr/bin/env bash
# CLI start-up against the nearest peer's import (issue 26): whole processes, alternating
# A B A B ..., the median of RUNS (7) pairs after one warm-up each.
#
#   bash bench/cli_speed.sh
#   RUNS=11 PEER_PYTHON=/path/to/python bash bench/cli_speed.sh
#
# A: `kvplan plan --model meta-llama/Llama-3.1-8B --context 8k --budget 48GiB --json`
#    (run as `python -m planner`, the console script's code path).
# B: `python -c "import llm_analysis.analysis"` in a side venv (build/peer-venv, made on the
#    first run with `pip install llm-analysis==0.2.2`; PEER_PYTHON names another).
# Prints each side's median wall and CPU (user + system, from the OS's accounting of the
# finished child) and the median of the per-pair ratios A/B (goal: wall <= 0.5). Pairing keeps
# the ratio meaningful when the machine's speed drifts; on a shared box trust the ratio, not
# the seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
RUNS=${RUNS:-7}
PEER_PYTHON=${PEER_PYTHON:-build/peer-venv/bin/python}
if [ ! -x "$PEER_PYTHON" ]; then
  echo "making the peer's venv: build/peer-venv (llm-analysis 0.2.2)" >&2
  python3 -m venv build/peer-venv
  build/peer-venv/bin/pip install -q llm-analysis==0.2.2
  PEER_PYTHON=build/peer-venv/bin/python
fi

"$PY" - "$RUNS" "$PY" "$PEER_PYTHON" <<'PY'
import os, statistics, subprocess, sys, time
runs, py, peer = int(sys.argv[1]), sys.argv[2], sys.argv[3]
a = [py, "-m", "planner", "plan", "--model", "meta-llama/Llama-3.1-8B", "--context", "8k",
     "--budget", "48GiB", "--json"]
b = [peer, "-c", "import llm_analysis.analysis"]

def once(cmd):
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{cmd[0]} ... exited {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_utime + usage.ru_stime

once(a), once(b)  # warm-up: file caches, .pyc
pairs = [(once(a), once(b)) for _ in range(runs)]
med = statistics.median
print(f"{runs} alternating pairs, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}")
print(f"{'':34} {'wall s':>8} {'cpu s':>8}")
print(f"{'A kvplan plan ... --json':34} {med(x[0][0] for x in pairs):8.3f} {med(x[0][1] for x in pairs):8.3f}")
print(f"{'B import llm_analysis.analysis':34} {med(x[1][0] for x in pairs):8.3f} {med(x[1][1] for x in pairs):8.3f}")
print(f"A/B median of pair ratios: wall {med(x[0][0] / x[1][0] for x in pairs):.2f}x (goal <= 0.5), "
      f"cpu {med(x[0][1] / x[1][1] for x in pairs):.2f}x")
PY
