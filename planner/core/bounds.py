"""Lower bounds on time: bandwidth floors for decode, compute floors for prefill.

Seed 004: a decode step reads every layer's KV of every request once, plus the weights, so
`bytes / bandwidth` is a floor (1 GiB at 1.5 TB/s ≈ 0.716 ms). A single decode query does ~1
FLOP per byte in bf16; GQA raises it by sharing one KV read across the query group. Amdahl tells
what compressing KV buys: only the attention share shrinks.
"""

from __future__ import annotations

from dataclasses import dataclass


def read_seconds(n_bytes: int, bandwidth_bytes_per_s: float) -> float:
    """Time to stream `n_bytes` once at `bandwidth_bytes_per_s` (decimal B/s)."""
    return n_bytes / bandwidth_bytes_per_s


def decode_attention_intensity(
    *,
    query_heads_per_kv_head: int,
    head_size_k: int,
    head_size_v: int,
    bytes_per_token_head: float,
    mla: bool = False,
) -> float:
    """FLOPs per byte of decode attention at q_len = 1 (2 FLOPs per multiply-add, no softmax).

    For one KV head read over T tokens: bytes = T × bytes_per_token_head. Each of the g query
    heads sharing it does QK (T × d_k multiply-adds) and AV (T × d_v), so FLOPs = g·2T(d_k+d_v).
    MLA: K is the whole latent (kv_lora_rank + rope) and V its first kv_lora_rank columns."""
    if mla:
        d_k = head_size_k + head_size_v  # latent + rope part
        d_v = head_size_k
    else:
        d_k, d_v = head_size_k, head_size_v
    flops_per_token = query_heads_per_kv_head * 2 * (d_k + d_v)
    return flops_per_token / bytes_per_token_head


def amdahl_speedup(attention_share: float, kv_ratio: float) -> float:
    """Step-time speedup when only the KV part (a share p of the step) scales by `kv_ratio`."""
    return 1.0 / ((1.0 - attention_share) + attention_share * kv_ratio)


def positions_processed(prompt_tokens: int, output_tokens: int) -> tuple[int, int]:
    """Positions run through the model to produce `output_tokens` tokens after a prompt.

    Without a cache every step re-runs the whole prefix: P + (P+1) + … ; with a cache the
    prefill runs P positions and each later step one (seed 004 §04: 4+5+6 = 15 vs 4+1+1 = 6)."""
    if output_tokens == 0:
        return 0, 0
    without = output_tokens * prompt_tokens + output_tokens * (output_tokens - 1) // 2
    with_cache = prompt_tokens + (output_tokens - 1)
    return without, with_cache


def prefill_flops(
    *, num_parameters: int, prompt_tokens: int, layers: int, query_heads: int, head_dim: int
) -> float:
    """Dense prefill FLOPs: 2 per parameter per token, plus causal attention (QK and AV over the
    lower triangle: 2 × 2 × L × Hq × d × T²/2)."""
    linear = 2.0 * num_parameters * prompt_tokens
    attention = 2.0 * layers * query_heads * head_dim * prompt_tokens * prompt_tokens
    return linear + attention


@dataclass(frozen=True, slots=True)
class StepFloor:
    kv_read_seconds: float
    weights_read_seconds: float

    @property
    def step_seconds(self) -> float:
        return self.kv_read_seconds + self.weights_read_seconds

    @property
    def attention_share(self) -> float:
        total = self.step_seconds
        return self.kv_read_seconds / total if total > 0 else 0.0
