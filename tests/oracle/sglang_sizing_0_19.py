"""SGLang 0.5.19's own start-up sizing: `sglang_sizing_0_20.py`'s path with two facts of 0.5.19
restated (sglang-0.5.19 wheel):

- the derived parallel widths (attention TP and DP, MoE widths) are stamped on the runtime
  context when the process groups are built (distributed/parallel_state.py
  `initialize_model_parallel`, `get_parallel().stamp_derived_widths`), and no group is built
  here: after `publish`, SGLang's own `runtime_context.derive_parallel_widths` gives them from
  the published leaves;
- 0.5.19 registers config classes (qwen3_asr) under model types that the virtualenv's
  transformers 5.19 already has (0.5.19 asks 5.12.1, which has none of them and whose image
  processors do not load without torchvision): `AutoConfig.register` takes them with `exist_ok`,
  so SGLang's own class holds the name, as on 5.12.1.

    python sglang_sizing_0_19.py inputs.json outputs.json
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))

_register = transformers.AutoConfig.register


def _register_over(model_type: str, config: Any, exist_ok: bool = False) -> None:
    _register(model_type, config, exist_ok=True)


transformers.AutoConfig.register = _register_over  # type: ignore[method-assign]

import sglang_sizing_0_20  # noqa: E402
from sglang_sizing_0_20 import base  # noqa: E402

rc = base.rc
_publish = rc.publish


def _publish_and_stamp(server_args: Any, **kw: Any) -> Any:
    ctx = _publish(server_args, **kw)
    p = rc.get_parallel()
    attn_dp, _ = rc.derive_attention_widths(
        tp_size=p.tp_size, attn_cp_size=p.attn_cp_size, dp_size=p.dp_size,
        enable_dp_attention=p.enable_dp_attention,
    )  # fmt: skip
    p.clear_derived_widths()
    p.stamp_derived_widths(
        **rc.derive_parallel_widths(
            tp_size=p.tp_size, attn_cp_size=p.attn_cp_size, attn_dp_size=attn_dp,
            moe_ep_size=p.ep_size, moe_dp_size=p.moe_dp_size, dcp_size=p.dcp_size,
            dcp_enabled=False,
        )
    )  # fmt: skip
    return ctx


if hasattr(rc.ParallelContext, "stamp_derived_widths"):
    rc.publish = _publish_and_stamp

main = sglang_sizing_0_20.main

if __name__ == "__main__":
    main()
