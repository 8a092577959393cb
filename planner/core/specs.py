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
    # False for state layers (specs_state): a constant per-request state, nothing per token.
    grows_with_context: ClassVar[bool] = True
    # Whether the layer keeps a cache of its own (vLLM gives KV-sharing layers no spec).
    owns_kv: ClassVar[bool] = True
    # Specs of one family and different sizes form one vLLM group whose block costs the sum of
    # their pages (`UniformTypeKVCacheSpecs`): full attention of several shapes, MLA + indexer.
    family: ClassVar[str] = "full"

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

    def request_bytes(self, ctx: int, policy: WindowPolicy, dtype: KVDtype) -> int:
        """Exact bytes this layer holds for one request (no paging)."""
        return self.tokens_kept(ctx, policy) * self.bytes_per_token(dtype)

    def paged_request(
        self, ctx: int, policy: WindowPolicy, dtype: KVDtype, block_size: int
    ) -> tuple[int, int]:
        """(blocks, bytes) this layer holds for one request once rounded up to blocks."""
        held = cdiv(self.tokens_kept(ctx, policy), block_size)
        return held, held * block_size * self.bytes_per_token(dtype)

    def admission_blocks(self, ctx: int, block_size: int, in_flight_tokens: int) -> int:
        """Blocks vLLM budgets for one request (`max_memory_usage_bytes // page_size_bytes`)."""
        return cdiv(ctx, block_size)

    def group_block_size(self, block_size: int) -> int:
        """Tokens per block of this layer's group when the pool's block is `block_size`."""
        return block_size

    def cyclic_blocks(self, ctx: int, block_size: int) -> int:
        """Blocks of a cyclic buffer (TensorRT-LLM): the whole sequence for full layers."""
        return cdiv(ctx, block_size)

    def as_full(self) -> LayerSpec:
        """The spec sized for the whole sequence (window dropped)."""
        return self

    def per_rank(self, kv_heads: int) -> LayerSpec:
        return self if kv_heads == self.kv_heads else replace(self, kv_heads=kv_heads)

    def tp_divisors(self) -> tuple[tuple[str, int], ...]:
        """(config field, value) pairs tensor parallelism must divide (state layers)."""
        return ()

    def on_rank(self, tp: int, kv_heads: int) -> LayerSpec:
        """This layer on one of `tp` ranks holding `kv_heads` KV heads (state layers shard
        their own dimensions by `tp`)."""
        return self.per_rank(kv_heads)

    @property
    def is_window(self) -> bool:
        return self.window_tokens is not None

    def cache_specs(self) -> tuple[LayerSpec, ...]:
        """The caches this decoder layer keeps, as vLLM's spec dict lists them: itself; none for
        a KV-sharing layer; the MLA cache and its indexer for DeepSeek-V3.2."""
        return (self,)


@dataclass(frozen=True, slots=True)
class FullAttentionSpec(LayerSpec):
    kind: ClassVar[str] = "full"


@dataclass(frozen=True, slots=True)
class SlidingWindowSpec(LayerSpec):
    """Attention over the last `window` tokens (vLLM `SlidingWindowSpec`)."""

    window: int = 1
    # vLLM keeps this many tokens below the window alive (not attended) when a multi-module MTP
    # draft may re-prefill them: num_prefill_lookahead_tokens − 1 (get_global_kv_cache_groups).
    extra_retained_tokens: int = 0
    kind: ClassVar[str] = "sliding"
    prefix_shareable: ClassVar[bool] = False
    family: ClassVar[str] = "sliding"

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
        # vLLM frees blocks outside the window (W − 1 past tokens live, plus any retained for a
        # multi-module MTP draft); transformers keeps the last W − 1 tokens.
        return min(ctx, self.window - 1 + self.extra_retained_tokens)

    def admission_blocks(self, ctx: int, block_size: int, in_flight_tokens: int) -> int:
        # SlidingWindowSpec.max_admission_blocks_per_request: the window (and retained tokens)
        # plus the tokens that can be in flight, plus one block for the unaligned start.
        kept = self.window - 1 + self.extra_retained_tokens + in_flight_tokens
        return cdiv(min(kept, ctx), block_size) + 1

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
    family: ClassVar[str] = "chunked"

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
    family: ClassVar[str] = "mla"

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


# fp8 sparse MLA (DeepSeek-V3.2) is stored as vLLM's fp8_ds_mla: 512 fp8 latent values, four
# fp32 scales and 64 bf16 RoPE values per token (`state_content_bytes`, flashmla_sparse.py).
FP8_DS_MLA_BYTES_PER_TOKEN = 656
# DeepSeek-V3.2's lightning indexer caches one uint8 key of 128 fp8 values plus a fp32 scale per
# token and layer (DeepseekV32Indexer: head_dim + head_dim // quant_block_size × 4).
INDEXER_BYTES_PER_TOKEN = 132


@dataclass(frozen=True, slots=True)
class SparseMLASpec(MLASpec):
    """DeepSeek-V3.2's MLA under sparse attention: an fp8 cache becomes fp8_ds_mla (656 B per
    token, vLLM `_canonicalize_sparse_mla_kv_cache_dtype`); 16-bit caches are plain MLA. Each
    such layer also keeps its indexer's key cache (`cache_specs`). `plain_fp8` names fp8 dtypes
    an engine stores as plain fp8 latents instead (vLLM 0.33: fp8_e4m3, see `bind_layers`)."""

    indexer_bytes_per_token: int = INDEXER_BYTES_PER_TOKEN
    plain_fp8: tuple[str, ...] = ()
    kind: ClassVar[str] = "mla"

    def bytes_per_token(self, dtype: KVDtype) -> int:
        if dtype.bits == 8 and dtype.name.startswith("fp8") and dtype.name not in self.plain_fp8:
            return FP8_DS_MLA_BYTES_PER_TOKEN
        return MLASpec.bytes_per_token(self, dtype)

    def cache_specs(self) -> tuple[LayerSpec, ...]:
        return (self, IndexerSpec(1, self.indexer_bytes_per_token, 0))


@dataclass(frozen=True, slots=True)
class IndexerSpec(MLASpec):
    """DeepSeek-V3.2's indexer key cache beside each MLA layer: 132 B per token whatever the KV
    dtype (uint8). vLLM gives it an MLA-type spec, so it joins the MLA layers' group and a block
    costs both pages (`UniformTypeKVCacheSpecs`)."""

    kind: ClassVar[str] = "indexer"
    prefix_shareable: ClassVar[bool] = True

    @property
    def elements_per_token(self) -> int:
        return self.head_size

    def bytes_per_token(self, dtype: KVDtype) -> int:
        return self.head_size


@dataclass(frozen=True, slots=True)
class SharedKVSpec(LayerSpec):
    """A layer that attends over another layer's cache (Gemma-3n's last `num_kv_shared_layers`;
    vLLM `kv_sharing_target_layer_name`, transformers' "reuse" layers): no cache of its own, so no
    spec in vLLM's dict and no bytes anywhere."""

    target_layer: int = -1
    kind: ClassVar[str] = "shared"
    owns_kv: ClassVar[bool] = False
    family: ClassVar[str] = "shared"

    @property
    def elements_per_token(self) -> int:
        return 0

    def bytes_per_token(self, dtype: KVDtype) -> int:
        return 0

    def tokens_kept(self, ctx: int, policy: WindowPolicy) -> int:
        return 0

    def admission_blocks(self, ctx: int, block_size: int, in_flight_tokens: int) -> int:
        return 0

    def cyclic_blocks(self, ctx: int, block_size: int) -> int:
        return 0

    def as_full(self) -> LayerSpec:
        return self

    def cache_specs(self) -> tuple[LayerSpec, ...]:
        return ()


# Layers as (spec, how many) pairs in first-appearance order: formulas sum over distinct specs
# instead of walking every layer (an 80-layer model has one or two specs).
Stack = tuple[tuple[LayerSpec, int], ...]


def stack_of(specs: Iterable[LayerSpec]) -> Stack:
    """Cache specs (see `cache_layers`) as (spec, count) pairs in first-appearance order."""
    counts: dict[LayerSpec, int] = {}
    for spec in specs:
        counts[spec] = counts.get(spec, 0) + 1
    return tuple(counts.items())


def cache_layers(specs: Iterable[LayerSpec]) -> tuple[LayerSpec, ...]:
    """Decoder layers' caches in layer order (what vLLM's per-worker spec dict holds): a
    KV-sharing layer keeps none, a DeepSeek-V3.2 layer two (MLA and its indexer)."""
    return tuple(spec for layer in specs for spec in layer.cache_specs())


def bytes_per_token(stack: Stack, dtype: KVDtype) -> int:
    """One token in every given layer, no window cap."""
    return sum(n * s.bytes_per_token(dtype) for s, n in stack)


def request_kv_bytes(stack: Stack, dtype: KVDtype, ctx: int, policy: WindowPolicy) -> int:
    """Exact bytes one request holds: Σ layers tokens kept × bytes per token (no paging)."""
    return sum(n * s.request_bytes(ctx, policy, dtype) for s, n in stack)


def request_paged_kv_bytes(
    stack: Stack, dtype: KVDtype, ctx: int, policy: WindowPolicy, block_size: int
) -> tuple[int, int]:
    """(blocks, bytes) a request holds once each layer's tokens are rounded up to blocks.

    Layers of identical spec share a block table, so blocks are counted once per spec."""
    blocks = paged = 0
    for s, n in stack:
        held, layer_bytes = s.paged_request(ctx, policy, dtype, block_size)
        blocks += held
        paged += n * layer_bytes
    return blocks, paged


def prefix_saved_bytes(stack: Stack, dtype: KVDtype, shared_tokens: int, copies_saved: int) -> int:
    """Bytes not stored twice: shared tokens in prefix-shareable (full, MLA) layers only."""
    if not shared_tokens or not copies_saved:
        return 0  # nothing shared (most plans): no need to price a token
    per_token = sum(n * s.bytes_per_token(dtype) for s, n in stack if s.prefix_shareable)
    return shared_tokens * per_token * copies_saved


def dense_kv_bytes(
    *, layers: int, kv_heads: int, head_dim: int, tokens: int, bits_per_element: int
) -> int:
    """2 × L × Hkv × d × N × b for a plain (GQA/MQA/MHA) cache, K and V of equal width."""
    return -(-2 * layers * kv_heads * head_dim * tokens * bits_per_element // 8)


__all__ = [
    "FP8_DS_MLA_BYTES_PER_TOKEN",
    "INDEXER_BYTES_PER_TOKEN",
    "ChunkedLocalSpec",
    "FullAttentionSpec",
    "IndexerSpec",
    "LayerSpec",
    "MLASpec",
    "SharedKVSpec",
    "SlidingWindowSpec",
    "SparseMLASpec",
    "Stack",
    "WindowPolicy",
    "bytes_per_token",
    "cache_layers",
    "cdiv",
    "dense_kv_bytes",
    "prefix_saved_bytes",
    "request_kv_bytes",
    "request_paged_kv_bytes",
    "stack_of",
]
