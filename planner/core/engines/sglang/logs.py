"""The KV-cache lines SGLang prints at start-up (model_runner.py, memory_pool.py,
swa_memory_pool.py, pool_configurator.py), as rules."""

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
    # A hybrid SWA model's two pools print one line each (mem_cache/swa_memory_pool.py labels
    # them "Full" and "SWA"), after "Use sliding window memory pool. full_layer_tokens=…"; a
    # Mamba-ish model's state pool prints "Mamba Cache is allocated. max_mamba_cache_size: …".
    *(
        Rule(
            kind,
            marker,
            labelled(
                [
                    ("tokens", "#tokens:", P_INT),
                    ("k_gb", ", k size:", P_NUM),
                    ("v_gb", ", v size:", P_NUM),
                    ("kv_gb", ", kv size:", P_NUM),  # MLA's one latent pool
                    ("dtype", "dtype:", P_WORD),
                ],
                ("tokens",),
            ),
        )
        # The pools' own lines before the plain one, whose marker is inside theirs.
        for kind, marker in (
            ("swa_kv_allocated", "swa kv cache is allocated."),
            ("full_kv_allocated", "full kv cache is allocated."),
            ("kv_allocated", "kv cache is allocated."),
        )
    ),
    Rule(
        "swa_pool",
        "use sliding window memory pool.",
        labelled(
            [
                ("full_tokens", "full_layer_tokens=", P_INT),
                ("swa_tokens", "swa_layer_tokens=", P_INT),
            ],
            ("full_tokens", "swa_tokens"),
        ),
    ),
    Rule(
        "mamba_allocated",
        "mamba cache is allocated.",
        labelled(
            [
                ("slots", "max_mamba_cache_size:", P_INT),
                ("conv_gb", "conv_state size:", P_NUM),
                ("ssm_gb", "ssm_state size:", P_NUM),
            ],
            ("slots",),
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
# The pool flags its `server_args=ServerArgs(…)` line prints (server_args.py field names), read
# into the reconciled request: the SWA pool's ratio and the state pool's three.
LOGGED_FLAGS = (
    "swa_full_tokens_ratio",
    "mamba_full_memory_ratio",
    "max_mamba_cache_size",
    "mamba_ssm_dtype",
)
LOG_VERSION_MARKERS = ("sglang version",)

LOG_EXAMPLE = "'KV Cache is allocated. #tokens: …'"

__all__ = ["LOGGED_FLAGS", "LOG_EXAMPLE", "LOG_HINTS", "LOG_RULES", "LOG_VERSION_MARKERS"]
