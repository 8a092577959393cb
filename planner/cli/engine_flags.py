"""`kvplan plan`'s SGLang engine flags: one option per PlanRequest field, named as SGLang names it.

Declared here so `planner/cli/plan.py` stays readable; each help text says which engine flag the
option is and its default, and `--help` lists them under their own panel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

_PANEL = "SGLang engine flags"

ContextLength = Annotated[
    str | None,
    typer.Option(
        help="SGLang --context-length: the model length the engine serves, e.g. 32k "
        "(k = 1024); default: the model's maximum",
        rich_help_panel=_PANEL,
    ),
]
ChunkedPrefillSize = Annotated[
    str | None,
    typer.Option(
        help="SGLang --chunked-prefill-size in tokens, e.g. 8k; it sets the automatic "
        "mem_fraction_static; default: by GPU memory",
        rich_help_panel=_PANEL,
    ),
]
CudaGraphMaxBs = Annotated[
    int | None,
    typer.Option(
        help="SGLang --cuda-graph-max-bs (--cuda-graph-max-bs-decode in 0.5.23): the decode "
        "CUDA-graph max batch; default: by GPU memory and TP",
        rich_help_panel=_PANEL,
    ),
]
MaxTotalTokens = Annotated[
    str | None,
    typer.Option(
        help="SGLang --max-total-tokens: caps the token pool below what memory allows, e.g. "
        "64k; default: no cap",
        rich_help_panel=_PANEL,
    ),
]
SwaFullTokensRatio = Annotated[
    float | None,
    typer.Option(
        help="SGLang --swa-full-tokens-ratio: the sliding-window pool's tokens per full-pool "
        "token (hybrid SWA models); default 0.8",
        rich_help_panel=_PANEL,
    ),
]
DpSize = Annotated[
    int | None,
    typer.Option(
        "--dp-size",
        help="SGLang --dp-size (vLLM --data-parallel-size): replicas; with "
        "--enable-dp-attention each replica's attention runs at TP / dp-size; default 1",
        rich_help_panel=_PANEL,
    ),
]
EnableDpAttention = Annotated[
    bool | None,
    typer.Option(
        "--enable-dp-attention",
        help="SGLang --enable-dp-attention (with --dp-size); default off",
        rich_help_panel=_PANEL,
    ),
]

# Request fields → the flags that set them, for error messages (merged into plan's FLAGS).
FLAGS: dict[str, str] = {
    "context_length": "--context-length",
    "chunked_prefill_size": "--chunked-prefill-size",
    "cuda_graph_max_bs": "--cuda-graph-max-bs",
    "max_total_tokens": "--max-total-tokens",
    "swa_full_tokens_ratio": "--swa-full-tokens-ratio",
    "data_parallel_size": "--dp-size",
    "enable_dp_attention": "--enable-dp-attention",
}
# Fields whose flag takes tokens as --context does ("8k" = 8192).
_TOKEN_FIELDS = frozenset({"context_length", "chunked_prefill_size", "max_total_tokens"})


def engine_body(
    values: dict[str, Any], parse_tokens: Callable[[str, str], int]
) -> dict[str, Any]:
    """The request fields the given flags set (unset ones are left out, so the engine's
    defaults apply); token-valued text is read by `parse_tokens`, plan's reader for --context."""
    body: dict[str, Any] = {}
    for field, value in values.items():
        if field not in FLAGS:
            raise KeyError(field)  # a programming error: every option has its field here
        if value is None:
            continue
        if field in _TOKEN_FIELDS:
            value = parse_tokens(value, field)
        body[field] = value
    return body
