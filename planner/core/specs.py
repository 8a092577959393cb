"""Layer kinds as small frozen specs, after vLLM's `v1/kv_cache_interface.py`.

Each spec knows what one token costs in its layer, its page size, how many tokens it keeps for a
request of `ctx` tokens, and how many blocks the engine reserves for one request under vLLM's
admission rule. Callers ask the spec; they never switch on its kind. A new kind (state layers,
shared KV, draft layers, sinks) is one more subclass here.

Sizes are whole model, before tensor parallelism: `per_rank(kv_heads)` gives a rank's copy.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import ClassVar, Literal

from planner.core.units import KVDtype

# How an engine treats window layers (sliding / chunked):
#   window       the layer keeps only its window (vLLM frees blocks outside it, W − 1 live)
#   full_length  every layer is sized for the whole sequence (window ignored)
#   cyclic       TensorRT-LLM's cyclic buffer of the last W tokens
#   keep_w_minus_1  transformers' DynamicSlidingWindowLayer
#   sglang_swa_pool SGLang's separate SWA pool (per-layer bytes as `window`)
WindowPolicy = Literal["window", "full_length", "cyclic", "keep_w_minus_1", "sglang_swa_pool"]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True, slots=True)
class LayerSpec:
    """Attention over the whole sequence: K and V for every KV head (vLLM `FullAttentionSpec`)."""

    kv_heads: int
    head_size: int  # K width per head
    head_size_v: int  # V width per head

    kind: ClassVar[str] = "full"
    # Full-attention blocks are shared across requests by prefix caching; window blocks are not.
    prefix_shareable: ClassVar[bool] = True

    @property
    def window_tokens(self) -> int | None:
        return None

    @property
    def elements_per_token(self) -> int:
        """Cached elements per token in this layer (K and V, all KV heads)."""
        return self.kv_heads * (self.head_size + self.head_size_v)

    def bytes_per_token(self, dtype: KVDtype) -> int:
        """One token in this layer: K and V for every KV head, plus any per-token-head scales."""
        return dtype.bytes_for(self.elements_per_token) + self.kv_heads * (
            dtype.scale_bytes_per_token_head
        )

    def page_bytes(self, dtype: KVDtype, block_size: int) -> int:
        """One layer, one block (vLLM's `page_size_bytes`)."""
        return self.bytes_per_token(dtype) * block_size

    def tokens_kept(self, ctx: int, policy: WindowPolicy) -> int:
        """Tokens this layer holds for a request of `ctx` tokens under the engine's policy."""
        return ctx

    def admission_blocks(self, ctx: int, block_size: int, in_flight_tokens: int) -> int:
        """Blocks vLLM budgets for one request (`max_memory_usage_bytes // page_size_bytes`)."""
        return cdiv(ctx, block_size)

    def cyclic_blocks(self, ctx: int, block_size: int) -> int:
        """Blocks of a cyclic buffer (TensorRT-LLM): the whole sequence for full layers."""
        return cdiv(ctx, block_size)

    def as_full(self) -> LayerSpec:
        """The spec sized for the whole sequence (window dropped)."""
        return self

    def per_rank(self, kv_heads: int) -> LayerSpec:
        return self if kv_heads == self.kv_heads else replace(self, kv_heads=kv_heads)

    @property
    def is_window(self) -> bool:
        return self.window_tokens is not None


@dataclass(frozen=True, slots=True)
class FullAttentionSpec(LayerSpec):
    kind: ClassVar[str] = "full"


@dataclass(frozen=True, slots=True)
class SlidingWindowSpec(LayerSpec):
    """Attention over the last `window` tokens (vLLM `SlidingWindowSpec`)."""

    window: int = 1
    kind: ClassVar[str] = "sliding"
    prefix_shareable: ClassVar[bool] = False

    @property
    def window_tokens(self) -> int | None:
        return self.window

    def tokens_kept(self, ctx: int, policy: WindowPolicy) -> int:
        if policy == "full_length":
            return ctx
        if policy == "cyclic":
            return min(ctx, self.window)
        if self.window <= 1:
            # transformers slices `[-W + 1:]`, which for W = 1 is `[0:]`: nothing is dropped
            # (measured with transformers 5.24, tests/crosscheck).
            return ctx
        # vLLM frees blocks outside the window (W − 1 past tokens live); transformers keeps
        # the last W − 1 tokens.
        return min(ctx, self.window - 1)

    def admission_blocks(self, ctx: int, block_size: int, in_flight_tokens: int) -> int:
        # SlidingWindowSpec.max_memory_usage_bytes: the window plus the tokens that can be in
        # flight (scheduled but not yet retired), plus one block for the unaligned start.
        return cdiv(min(self.window - 1 + in_flight_tokens, ctx), block_size) + 1

    def cyclic_blocks(self, ctx: int, block_size: int) -> int:
        # Cyclic buffer of W tokens, plus one block when the window is not block aligned.
        w = self.window
        return cdiv(min(ctx, w), block_size) + (1 if ctx > w and w % block_size else 0)

    def as_full(self) -> LayerSpec:
        return FullAttentionSpec(self.kv_heads, self.head_size, self.head_size_v)


@dataclass(frozen=True, slots=True)
class ChunkedLocalSpec(LayerSpec):
    """Attention within fixed chunks of `chunk` tokens (Llama-4; vLLM's
    `ChunkedLocalAttentionSpec`)."""

    chunk: int = 1
    kind: ClassVar[str] = "chunked"
    prefix_shareable: ClassVar[bool] = False

    @property
    def window_tokens(self) -> int | None:
        return self.chunk

    def tokens_kept(self, ctx: int, policy: WindowPolicy) -> int:
        if policy == "full_length":
            return ctx
        # Chunked local attention only needs the current chunk.
        return min(ctx, self.chunk)

    def admission_blocks(self, ctx: int, block_size: int, in_flight_tokens: int) -> int:
        # ChunkedLocalAttentionSpec.max_memory_usage_bytes: a chunk plus the tokens in flight.
        return cdiv(min(self.chunk + in_flight_tokens, ctx), block_size)

    def cyclic_blocks(self, ctx: int, block_size: int) -> int:
        c = self.chunk
        return cdiv(min(ctx, c), block_size) + (1 if ctx > c and c % block_size else 0)

    def as_full(self) -> LayerSpec:
        return FullAttentionSpec(self.kv_heads, self.head_size, self.head_size_v)


@dataclass(frozen=True, slots=True)
class MLASpec(LayerSpec):
    """Multi-head latent attention (DeepSeek): one latent of `latent_dim + rope_dim` per token,
    shared by K and V and by every head, replicated on every TP rank (vLLM `MLAAttentionSpec`,
    whose `head_size` is that whole width)."""

    kind: ClassVar[str] = "mla"

    @classmethod
    def of(cls, latent_dim: int, rope_dim: int) -> MLASpec:
        # Stored in the base fields as (1 head, latent, rope) so sums over specs stay uniform.
        return cls(1, latent_dim, rope_dim)

    @property
    def latent_dim(self) -> int:
        """`kv_lora_rank`: the compressed KV width."""
        return self.head_size

    @property
    def rope_dim(self) -> int:
        """`qk_rope_head_dim`: the decoupled RoPE key width."""
        return self.head_size_v

    @property
    def elements_per_token(self) -> int:
        return self.latent_dim + self.rope_dim

    def bytes_per_token(self, dtype: KVDtype) -> int:
        # One latent, one scale per token (no separate V).
        return dtype.bytes_for(self.elements_per_token) + dtype.scale_bytes_per_token_head // 2

    def per_rank(self, kv_heads: int) -> LayerSpec:
        return self  # the latent is replicated on every rank, never sharded


# Layers as (spec, how many) pairs in first-appearance order: formulas sum over distinct specs
# instead of walking every layer (an 80-layer model has one or two specs).
Stack = tuple[tuple[LayerSpec, int], ...]


def stack_of(specs: Iterable[LayerSpec]) -> Stack:
    counts: dict[LayerSpec, int] = {}
    for spec in specs:
        counts[spec] = counts.get(spec, 0) + 1
    return tuple(counts.items())


def bytes_per_token(stack: Stack, dtype: KVDtype) -> int:
    """One token in every given layer, no window cap."""
    return sum(n * s.bytes_per_token(dtype) for s, n in stack)


def request_kv_bytes(stack: Stack, dtype: KVDtype, ctx: int, policy: WindowPolicy) -> int:
    """Exact bytes one request holds: Σ layers tokens kept × bytes per token (no paging)."""
    return sum(n * s.tokens_kept(ctx, policy) * s.bytes_per_token(dtype) for s, n in stack)


def request_paged_kv_bytes(
    stack: Stack, dtype: KVDtype, ctx: int, policy: WindowPolicy, block_size: int
) -> tuple[int, int]:
    """(blocks, bytes) a request holds once each layer's tokens are rounded up to blocks.

    Layers of identical spec share a block table, so blocks are counted once per spec."""
    blocks = paged = 0
    for s, n in stack:
        held = cdiv(s.tokens_kept(ctx, policy), block_size)
        blocks += held
        paged += n * held * block_size * s.bytes_per_token(dtype)
    return blocks, paged


def prefix_saved_bytes(stack: Stack, dtype: KVDtype, shared_tokens: int, copies_saved: int) -> int:
    """Bytes not stored twice: shared tokens in prefix-shareable (full, MLA) layers only."""
    per_token = sum(n * s.bytes_per_token(dtype) for s, n in stack if s.prefix_shareable)
    return shared_tokens * per_token * copies_saved


def dense_kv_bytes(
    *, layers: int, kv_heads: int, head_dim: int, tokens: int, bits_per_element: int
) -> int:
    """2 × L × Hkv × d × N × b for a plain (GQA/MQA/MHA) cache, K and V of equal width."""
    return -(-2 * layers * kv_heads * head_dim * tokens * bits_per_element // 8)


__all__ = [
    "ChunkedLocalSpec",
    "FullAttentionSpec",
    "LayerSpec",
    "MLASpec",
    "SlidingWindowSpec",
    "Stack",
    "WindowPolicy",
    "bytes_per_token",
    "cdiv",
    "dense_kv_bytes",
    "prefix_saved_bytes",
    "request_kv_bytes",
    "request_paged_kv_bytes",
    "stack_of",
]
