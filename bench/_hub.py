"""A Hub for bench/load.sh's Hub runs: `python bench/_hub.py down|slow|drip PORT_FILE`.

`down`: an address whose SYNs are dropped (an air-gapped cluster's firewall); `slow`: a healthy
Hub 300 ms away (every answer 0.3 s late; unknown ids are 401 RepoNotFound); `drip`: every byte
0.3 s apart. Writes the endpoint URL to PORT_FILE and serves until killed. The loopback Hub of
the tests (tests/resolve/hub_server.py) answers.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.resolve.hub_server import HubState, black_hole, hub_server


def main(mode: str, url_file: str) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if mode == "down":
        with black_hole() as url:
            Path(url_file).write_text(url)
            stop.wait()
        return
    state = HubState()
    state.mode = mode
    with hub_server(state) as url:
        Path(url_file).write_text(url)
        stop.wait()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
