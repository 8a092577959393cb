"""The KV-cache lines TensorRT-LLM prints at start-up (C++ runtime and PyTorch backend)."""

from __future__ import annotations

from planner.core.logs.lines import (
    INT,
    KV_EQ,
    NUM,
    P_INT,
    P_NUM,
    P_NUM_GIB,
    Rule,
    labelled,
    pairs,
    re_at,
)

LOG_RULES: tuple[Rule, ...] = (
    Rule(
        "free_memory",
        "memory usage when calculating max tokens in paged kv cache:",
        labelled(
            [("total_gib", "total:", P_NUM_GIB), ("available_gib", "available:", P_NUM_GIB)],
            ("available_gib",),
        ),
    ),
    Rule(
        "primary_blocks",
        "number of blocks in kv cache primary pool:",
        re_at(r"number of blocks in kv cache primary pool:\s{0,4}" + INT, ("blocks",)),
    ),
    Rule(
        "secondary_blocks",
        "number of blocks in kv cache secondary pool:",
        re_at(r"number of blocks in kv cache secondary pool:\s{0,4}" + INT, ("blocks",)),
    ),
    Rule(
        "tokens_per_block",
        "number of tokens per block:",
        re_at(r"number of tokens per block:\s{0,4}" + INT, ("tokens",)),
    ),
    Rule(
        "allocated",
        "for max tokens",
        re_at(
            r"allocated\s{0,4}"
            + NUM
            + r"\s{0,4}GiB for max tokens(?: in paged kv cache)?\s{0,4}\(\s{0,4}"
            + INT
            + r"\s{0,4}\)",
            ("gib", "tokens"),
            back="allocated",
        ),
    ),
    Rule(
        "using_tokens",
        " tokens in paged kv cache",
        re_at(r"using\s{1,4}" + INT + r"\s{1,4}tokens in paged kv cache", ("tokens",), "using"),
    ),
    Rule(
        "profile",
        "peak memory during memory usage profiling",
        labelled(
            [
                ("peak_gib", "(torch + non-torch):", P_NUM_GIB),
                (
                    "available_gib",
                    "available kv cache memory when calculating max tokens:",
                    P_NUM_GIB,
                ),
                ("fraction", "fraction is set", P_NUM),
                ("kv_bytes_per_token", "kv size is", P_INT),
                ("kv_bytes_per_token", "kv size per token is", P_INT),
                ("total_gib", "device total memory", P_NUM_GIB),
            ],
            ("available_gib",),
        ),
    ),
    Rule(
        "weights",
        "memory used after loading model weights (inside torch)",
        labelled([("gib", "in memory usage profiling:", P_NUM_GIB)], ("gib",)),
    ),
    Rule("args", "max_num_requests=", pairs(KV_EQ), echo=False),
)

LOG_HINTS = ("[tensorrt-llm]", "[trt-llm]")
LOG_VERSION_MARKERS: tuple[str, ...] = ()

LOG_EXAMPLE = "'[MemUsageChange] Allocated … for max tokens in paged KV cache (N)'"

__all__ = ["LOG_EXAMPLE", "LOG_HINTS", "LOG_RULES", "LOG_VERSION_MARKERS"]
