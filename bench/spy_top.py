"""Top entries of a py-spy profile (`py-spy record -f raw`: collapsed stacks, one per line).

    py-spy record -r 1000 -f raw -o build/plan.spy -- .venv/bin/python bench/plan_speed.py --loop 8
    python bench/spy_top.py build/plan.spy [--within planner.service:plan] [--top 30]

Prints each function's share of the samples: self (it was the frame running) and inclusive (it
was on the stack), counting only samples whose stack passes through `--within` when given.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

# py-spy frames: "function (path/to/file.py:line)"
_FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>[^():]+)(?::\d+)?\)$")


def _name(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    file = m.group("file")
    for marker in ("/planner/", "/site-packages/", "/lib/python3"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    return f"{file.removesuffix('.py').replace('/', '.')}:{m.group('fn')}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("profile", type=Path)
    ap.add_argument("--within", default=None, help="only stacks through this function")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in args.profile.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = [_name(f) for f in stack.split(";")]
        if args.within is not None:
            hits = [i for i, f in enumerate(frames) if f.endswith(args.within)]
            if not hits:
                continue
            frames = frames[hits[0] :]
        n = int(count_text)
        total += n
        own[frames[-1]] += n
        for f in set(frames):
            incl[f] += n
    print(f"{total} samples" + (f" within {args.within}" if args.within else ""))
    print(f"{'self %':>7}  function")
    for name, n in own.most_common(args.top):
        print(f"{100 * n / total:7.1f}  {name}")
    print(f"\n{'incl %':>7}  function")
    for name, n in incl.most_common(args.top):
        print(f"{100 * n / total:7.1f}  {name}")


if __name__ == "__main__":
    main()
