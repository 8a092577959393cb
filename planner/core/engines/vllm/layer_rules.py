"""vLLM's rules for the layer kinds beyond plain attention: KV sharing and sparse MLA."""

from __future__ import annotations

from dataclasses import replace

from planner.core.engines.versions import Version, since
from planner.core.engines.vllm.releases import CHUNKED_SPEC_SINCE, SPARSE_PLAIN_FP8_E4M3_SINCE
from planner.core.errors import FieldError
from planner.core.model import ModelShape, with_layers
from planner.core.notes import Note, note
from planner.core.specs import (
    ChunkedLocalSpec,
    IndexerSpec,
    LayerSpec,
    SlidingWindowSpec,
    SparseMLASpec,
)

# FlashMLA-sparse's only kernel block size on SM90 (DeepSeek-V3.2's indexer backend).
SPARSE_MLA_BLOCK = 64

# 0.25-0.29: a sliding-window layer picks its own block, the backend's smallest kernel block,
# whatever --block-size says (Attention.get_kv_cache_spec: _largest_kernel_block_within with no
# page budget, read in the 0.25.1 and 0.29.0 wheels); 0.30 gives it the primary block again.
# Hybrid groups scale it back up (unify_kv_cache_spec_page_size); a model whose layers all
# slide keeps it.
SLIDING_OWN_BLOCK_SINCE = (0, 25)
SLIDING_PRIMARY_BLOCK_SINCE = (0, 30)
SLIDING_KERNEL_BLOCK = 16  # FlashAttention / Triton MultipleOf(16), FlashInfer 16 on SM90


def bind_sparse_mla(version: Version, shape: ModelShape) -> ModelShape:
    """The shape with its sparse MLA layers storing fp8_e4m3 as this release does."""
    if not since(version, SPARSE_PLAIN_FP8_E4M3_SINCE):
        return shape
    if not any(isinstance(s, SparseMLASpec) for s in shape.layers):
        return shape
    layers = tuple(
        replace(s, plain_fp8=("fp8_e4m3",)) if isinstance(s, SparseMLASpec) else s
        for s in shape.layers
    )
    return with_layers(shape, layers)


def bind_chunked(version: Version, shape: ModelShape) -> ModelShape:
    """Before ChunkedLocalAttentionSpec (0.10), chunked local layers are full attention to the
    KV cache: the attention backend chunks them, the spec is FullAttentionSpec."""
    if since(version, CHUNKED_SPEC_SINCE):
        return shape
    if not any(isinstance(s, ChunkedLocalSpec) for s in shape.layers):
        return shape
    layers = tuple(s.as_full() if isinstance(s, ChunkedLocalSpec) else s for s in shape.layers)
    return with_layers(shape, layers)


def check_shared_kv_parallel(shape: ModelShape, pp: int) -> None:
    """Gemma3nForCausalLM does not implement SupportsPP: a layer sharing KV and the layer whose
    cache it reads run on one worker."""
    if pp > 1 and any(not s.owns_kv for s in shape.layers):
        raise FieldError(
            "pipeline_parallel_size",
            "vllm.kv_sharing_pipeline",
            model_type=shape.model_type or "this model",
        )


def sparse_mla_block(requested: int | None, shape: ModelShape) -> tuple[int, list[Note]] | None:
    """The block size for sparse MLA (DeepSeek-V3.2): every sparse backend on Hopper takes 64
    (vLLM picks it when none is given, and refuses 16 or 32); None without an indexer."""
    if not any(isinstance(g.spec, IndexerSpec) for g in shape.groups):
        return None
    if requested is not None and requested % SPARSE_MLA_BLOCK:
        raise FieldError(
            "block_size",
            "vllm.sparse_mla_block_size",
            multiple=SPARSE_MLA_BLOCK,
            requested=requested,
        )
    block = requested or SPARSE_MLA_BLOCK
    return block, [note("block.vllm_sparse_mla", block=block)]


def sliding_block(version: Version, spec: LayerSpec, block: int) -> int:
    """The block a layer's own spec takes in `version` (before any hybrid unification)."""
    own = since(version, SLIDING_OWN_BLOCK_SINCE) and not since(
        version, SLIDING_PRIMARY_BLOCK_SINCE
    )
    return SLIDING_KERNEL_BLOCK if own and isinstance(spec, SlidingWindowSpec) else block


class VllmLayerBlocks:
    """The Engine hook for a layer's own block (mixed into `Vllm`)."""

    version: Version

    def layer_block_size(self, spec: LayerSpec, block: int) -> int:
        return sliding_block(self.version, spec, block)


__all__ = [
    "SPARSE_MLA_BLOCK",
    "VllmLayerBlocks",
    "bind_chunked",
    "bind_sparse_mla",
    "check_shared_kv_parallel",
    "sliding_block",
    "sparse_mla_block",
]
