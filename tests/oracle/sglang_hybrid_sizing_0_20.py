"""SGLang's own sizing of hybrid pools before 0.5.21: `sglang_hybrid_sizing.py` over
`sglang_sizing_0_20.py`'s older layer bookkeeping (that file says what differs).

    python sglang_hybrid_sizing_0_20.py inputs.json outputs.json
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sglang_sizing_0_20  # noqa: F401  (the pre-0.5.21 switches, before the hybrid path)
from sglang_hybrid_sizing import main

if __name__ == "__main__":
    main()
