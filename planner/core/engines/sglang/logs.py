"""The KV-cache lines SGLang prints at start-up (model_runner.py, memory_pool.py), as rules."""

from __future__ import annotations

from planner.core.logs.lines import KV_EQ, P_INT, P_NUM, P_WORD, Rule, labelled, pairs

LOG_RULES: tuple[Rule, ...] = (
    Rule(
        "load_begin",
        "load weight begin.",
        labelled([("avail_gb", "avail mem=", P_NUM)], ("avail_gb",)),
    ),
    Rule(
        "load_end",
        "load weight end.",
        labelled(
            [
                ("avail_gb", "avail mem=", P_NUM),
                ("usage_gb", "mem usage=", P_NUM),
                ("dtype", "dtype=", P_WORD),
            ],
            ("avail_gb",),
        ),
    ),
    Rule(
        "kv_allocated",
        "kv cache is allocated.",
        labelled(
            [
                ("tokens", "#tokens:", P_INT),
                ("k_gb", ", k size:", P_NUM),
                ("v_gb", ", v size:", P_NUM),
                ("kv_gb", ", kv size:", P_NUM),
                ("dtype", "dtype:", P_WORD),
            ],
            ("tokens",),
        ),
    ),
    Rule(
        "pool_end",
        "memory pool end.",
        labelled([("avail_gb", "avail mem=", P_NUM)], ("avail_gb",)),
    ),
    Rule(
        "max_total_tokens",
        "max_total_num_tokens=",
        labelled(
            [
                ("tokens", "max_total_num_tokens=", P_INT),
                ("max_running_requests", "max_running_requests=", P_INT),
                ("context_len", "context_len=", P_INT),
                ("available_gpu_mem_gb", "available_gpu_mem=", P_NUM),
            ],
            ("tokens",),
        ),
    ),
    Rule("args", "serverargs(", pairs(KV_EQ), echo=False),
)

LOG_HINTS = ("sglang",)
LOG_VERSION_MARKERS = ("sglang version",)

LOG_EXAMPLE = "'KV Cache is allocated. #tokens: …'"

__all__ = ["LOG_EXAMPLE", "LOG_HINTS", "LOG_RULES", "LOG_VERSION_MARKERS"]
