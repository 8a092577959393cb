"""SGLang 0.5.19's own sizing of hybrid pools: `sglang_hybrid_sizing.py` over
`sglang_sizing_0_19.py`'s switches (that file says what differs).

    python sglang_hybrid_sizing_0_19.py inputs.json outputs.json
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sglang_sizing_0_19  # noqa: F401  (0.5.19's switches, before the hybrid path)
from sglang_hybrid_sizing import main

if __name__ == "__main__":
    main()
