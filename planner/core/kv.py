"""Bytes of KV cache: per token, per request, paged, padded, prefix-shared.

The textbook product (seed 004 §05): 2 × L × Hkv × d × N × b. Everything else here refines it the
way engines do: K and V widths that differ, MLA's single latent, window caps, block rounding.
"""

from __future__ import annotations

from planner.core.engines import SlidingPolicy
from planner.core.model import LayerSpec, Stack
from planner.core.units import KVDtype


def dense_kv_bytes(
    *, layers: int, kv_heads: int, head_dim: int, tokens: int, bits_per_element: int
) -> int:
    """2 × L × Hkv × d × N × b for a plain (GQA/MQA/MHA) cache, K and V of equal width."""
    return -(-2 * layers * kv_heads * head_dim * tokens * bits_per_element // 8)


def layer_bytes_per_token(spec: LayerSpec, dtype: KVDtype) -> int:
    """One token in one layer: K and V (or MLA's latent) for every KV head, plus scales."""
    scale = spec.kv_heads * dtype.scale_bytes_per_token_head
    if spec.kind == "mla":
        scale //= 2  # one latent, one scale (no separate V)
    return dtype.bytes_for(spec.elements_per_token) + scale


def page_bytes(spec: LayerSpec, dtype: KVDtype, block_size: int) -> int:
    """One layer, one block (vLLM's `page_size_bytes`)."""
    return layer_bytes_per_token(spec, dtype) * block_size


def bytes_per_token(stack: Stack, dtype: KVDtype) -> int:
    """One token in every given layer, no window cap."""
    return sum(n * layer_bytes_per_token(s, dtype) for s, n in stack)


def tokens_kept(spec: LayerSpec, context_tokens: int, policy: SlidingPolicy) -> int:
    """Tokens a layer holds for a request of `context_tokens`, as the engine keeps them.

    Full and MLA layers keep everything. Sliding layers: transformers keeps the last W − 1
    (DynamicSlidingWindowLayer); vLLM frees blocks outside the window, so W − 1 past tokens are
    live; TensorRT-LLM's cyclic buffer holds W; engines without SWA support keep everything."""
    if spec.window_tokens is None or spec.kind in ("full", "mla"):
        return context_tokens
    if policy == "full_length":
        return context_tokens
    if spec.kind == "chunked":
        # Chunked local attention only needs the current chunk.
        return min(context_tokens, spec.window_tokens)
    if policy == "cyclic":
        return min(context_tokens, spec.window_tokens)
    if spec.window_tokens <= 1:
        # transformers slices `[-W + 1:]`, which for W = 1 is `[0:]`: nothing is dropped
        # (measured with transformers 5.24, tests/crosscheck).
        return context_tokens
    return min(context_tokens, spec.window_tokens - 1)


def request_kv_bytes(
    stack: Stack, dtype: KVDtype, context_tokens: int, policy: SlidingPolicy
) -> int:
    """Exact bytes one request holds: Σ layers tokens kept × bytes per token (no paging)."""
    return sum(
        n * tokens_kept(s, context_tokens, policy) * layer_bytes_per_token(s, dtype)
        for s, n in stack
    )


def request_paged_kv_bytes(
    stack: Stack,
    dtype: KVDtype,
    context_tokens: int,
    policy: SlidingPolicy,
    block_size: int,
) -> tuple[int, int]:
    """(blocks, bytes) a request holds once each layer's tokens are rounded up to blocks.

    Layers of identical spec share a block table, so blocks are counted once per spec."""
    blocks = 0
    paged = 0
    for s, n in stack:
        held = -(-tokens_kept(s, context_tokens, policy) // block_size)
        blocks += held
        paged += n * held * block_size * layer_bytes_per_token(s, dtype)
    return blocks, paged
