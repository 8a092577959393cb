"""vLLM's rules for the layer kinds beyond plain attention (KV sharing, sparse MLA), the
speculative draft's methods, and the model length it derives from the config."""

from __future__ import annotations

from dataclasses import replace

from planner.core.engines.versions import Version, since, version_text
from planner.core.engines.vllm.releases import DFLASH_FILL_IN_SLOT_SINCE, DFLASH_SINCE
from planner.core.errors import FieldError
from planner.core.model import ModelShape
from planner.core.notes import Note, note
from planner.core.specs import IndexerSpec
from planner.core.speculative import Speculation

# FlashMLA-sparse's only kernel block size on SM90 (DeepSeek-V3.2's indexer backend).
SPARSE_MLA_BLOCK = 64


def check_shared_kv_parallel(shape: ModelShape, pp: int) -> None:
    """Gemma3nForCausalLM does not implement SupportsPP: a layer sharing KV and the layer whose
    cache it reads run on one worker."""
    if pp > 1 and any(not s.owns_kv for s in shape.layers):
        raise FieldError(
            "pipeline_parallel_size",
            f"vLLM runs {shape.model_type or 'this model'} (layers sharing KV) without pipeline "
            "parallelism; use pipeline_parallel_size 1",
        )


def sparse_mla_block(requested: int | None, shape: ModelShape) -> tuple[int, list[Note]] | None:
    """The block size for sparse MLA (DeepSeek-V3.2): every sparse backend on Hopper takes 64
    (vLLM picks it when none is given, and refuses 16 or 32); None without an indexer."""
    if not any(isinstance(g.spec, IndexerSpec) for g in shape.groups):
        return None
    if requested is not None and requested % SPARSE_MLA_BLOCK:
        raise FieldError(
            "block_size",
            f"vLLM's sparse MLA backend (DeepSeek-V3.2 indexer) needs block_size a multiple of "
            f"{SPARSE_MLA_BLOCK}; got {requested}",
        )
    block = requested or SPARSE_MLA_BLOCK
    return block, [note("block.vllm_sparse_mla", block=block)]


def derived_max_model_len(shape: ModelShape) -> int | None:
    """`_get_and_verify_max_len` (0.14+: derive_max_model_len_and_key): the config's length
    scaled by RoPE scaling (not for su/longrope/llama3 types, nor Gemma-3, whose length is
    already scaled; yarn scales its original length), and `model_max_length` over both, even
    when larger."""
    derived = shape.max_position_embeddings
    rope = shape.rope_scaling
    if derived is not None and rope is not None and "gemma3" not in (shape.model_type or ""):
        kind, factor, original = rope
        if kind not in ("su", "longrope", "llama3", "default", "mrope"):
            base = original if kind == "yarn" and original else derived
            derived = int(base * factor)
    if shape.model_max_length is not None:
        return shape.model_max_length
    return derived


def speculation_at(version: Version, sp: Speculation) -> Speculation:
    """The draft as this release sizes it (kvplan's speculative rules are 0.33's); a method the
    release lacks is refused with its reason."""
    if sp.method != "dflash":
        return sp
    if not since(version, DFLASH_SINCE):
        raise FieldError(
            ("speculative_config", "method"),
            f"vLLM {version_text(version)} has no speculative method 'dflash' (SpeculativeConfig "
            "takes it from vLLM 0.20); use eagle3, or plan for vLLM 0.20 or later",
        )
    if not since(version, DFLASH_FILL_IN_SLOT_SINCE):
        # Before 0.23 the scheduler reserved DFlash k lookahead slots, as for EAGLE.
        return replace(sp, lookahead_tokens=sp.num_speculative_tokens)
    return sp


__all__ = [
    "SPARSE_MLA_BLOCK",
    "check_shared_kv_parallel",
    "derived_max_model_len",
    "sparse_mla_block",
    "speculation_at",
]
