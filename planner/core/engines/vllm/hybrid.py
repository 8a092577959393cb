"""vLLM's rules for models with state layers (Mamba, gated delta net, KDA, short conv).

Two rule sets, each read in its release's wheel:

0.33 (`platforms/interface.py` `_align_hybrid_block_size`, `models/config.py`
`MambaModelConfig`, `v1/kv_cache_interface.py` `MambaSpec`):
- prefix caching stays on (the default), which sets `mamba_cache_mode="align"` with
  `mamba_block_size = block_size`; without it the mode is "none" and
  `mamba_block_size = max_model_len`;
- after load the attention block size is raised (overriding --block-size) to the smallest
  multiple of the kernel alignment whose page covers the state: alignment = max(smallest kernel
  block, block_size), at least 128 for MLA hybrids, times lcm with the prefill checkpoint
  alignment in align mode; then rounded to the backends' common kernel block;
- the state page is padded to exactly the attention page;
- blocks per request: align mode 2 + speculative tokens + checkpoint blocks (Mamba2 1; GDN 1
  only with FlashInfer's prefill on SM90, alignment 64; Mamba1 and KDA 0), else 1 + speculative.

0.11 (`models/config.py` `HybridAttentionMambaModelConfig`, the same in 0.10.2, the first
release that runs these models on V1 by default; both checked by their oracles): prefix
caching is switched off for hybrids, the block is 16 × cdiv(state, 16 × a FullAttentionSpec
token page, K and V even for MLA), one state block per request,
`mamba_block_size = max_model_len`.

0.28-0.32 (read in their wheels, checked by the oracle) have 0.33's rules except the prefill
checkpoints of gated delta nets: `QwenGatedDeltaNetAttention` declares none and the platform
alignment has no checkpoint lcm (both 0.33); Mamba2's one checkpoint block
(`MambaMixer2.get_kv_cache_spec`) starts in 0.32. Releases between 0.11 and 0.28 changed these
rules in steps kvplan has not checked (0.25's prefix caching picks mamba_cache_mode "all" for
some models); they are refused.
"""

from __future__ import annotations

from dataclasses import replace
from math import lcm

from planner.core.engines.versions import Version, since, version_text
from planner.core.engines.vllm.releases import STATE_LAYERS_V1_SINCE
from planner.core.errors import FieldError
from planner.core.model import ModelShape, with_layers
from planner.core.model_hybrid import QWEN3_5_TYPES
from planner.core.notes import Note, note
from planner.core.specs import LayerSpec, MLASpec, cdiv
from planner.core.specs_state import GatedDeltaNetSpec, StateSpec
from planner.core.units import KVDtype

# The two rule sets read (first release each applies to, last release verified).
OLD_RULES = ((0, 10, 2), (0, 11, 99))
# The platform alignment (`Platform._align_hybrid_block_size`) with prefix caching kept on,
# as far back as the oracle has checked it (0.28.0's own code gives 0.29's answers).
PLATFORM_ALIGN_SINCE = (0, 28, 0)
# MambaMixer2.get_kv_cache_spec declares one prefill checkpoint block (num_prefill_checkpoint_
# blocks=1); before, Mamba2 held 2 + speculative blocks in align mode.
MAMBA2_CHECKPOINT_SINCE = (0, 32, 0)
# GDN layers export prefill checkpoints (FlashInfer prefill on SM90) and the platform aligns to
# them (QwenGatedDeltaNetAttention._exports_checkpoints, get_mamba_prefill_checkpoint_alignment).
GDN_CHECKPOINT_SINCE = (0, 33, 0)
# Smallest kernel block of the SM90 attention backends vLLM picks for these models
# (FlashAttention, FlashAttention-MLA, Triton MLA: MultipleOf(16); FlashInfer 16).
KERNEL_BLOCK = 16
MLA_HYBRID_ALIGNMENT = 128
GDN_FLASHINFER_ALIGNMENT = 64  # v1/attention/backends/gdn_attn.py


def bind_vllm_state(
    version: Version,
    shape: ModelShape,
    *,
    block_size: int,
    kv: KVDtype,
    model_dtype: str,
    tp: int,
    pp: int,
    prefix_caching: bool,
    max_model_len: int,
    num_spec: int = 0,
    attention_kv_heads: int,
) -> tuple[ModelShape, int, list[Note]]:
    """The shape with every state layer bound as vLLM `version` sizes it, the raised block
    size, and notes saying what changed."""
    if not since(version, STATE_LAYERS_V1_SINCE):
        raise FieldError("engine_version", "vllm.state_layers_v0", version=version_text(version))
    old = OLD_RULES[0] <= version <= OLD_RULES[1]
    if not old and not since(version, PLATFORM_ALIGN_SINCE):
        raise FieldError(
            "engine_version",
            "vllm.state_release_unmodelled",
            version=".".join(map(str, version[:2])),
        )
    if old and shape.model_type in QWEN3_5_TYPES:
        raise FieldError(
            "engine_version",
            "vllm.qwen3_5_not_in_0_11",
        )
    if old and shape.draft_layers and any(isinstance(s, GatedDeltaNetSpec) for s in shape.layers):
        raise FieldError(
            ("speculative_config", "method"),
            "vllm.mtp_hybrid_release",
        )
    if pp > 1:
        raise FieldError(
            "pipeline_parallel_size",
            "vllm.hybrid_pipeline_unmodelled",
        )
    attn = shape.attention_spec
    states = [g.spec for g in shape.groups if isinstance(g.spec, StateSpec)]
    if attn is None:
        raise FieldError(
            "model",
            "vllm.attention_free_unmodelled",
        )
    if any(s.is_window for s in (g.spec for g in shape.groups)):
        raise FieldError(
            "model",
            "vllm.state_with_sliding_unmodelled",
        )
    # The model-level state vLLM aligns to: the model's mixer with this TP and speculation.
    ranked = [replace(s, tp=tp).bind(model_dtype=model_dtype, num_spec=num_spec) for s in states]
    state_page = max(s.state_bytes for s in ranked)
    rank_attn = attn.on_rank(tp, max(1, attention_kv_heads // tp))
    notes: list[Note] = []
    if old:
        mode = "none"
        # FullAttentionSpec(num_kv_heads, head_size): K and V, even for MLA's latent.
        attn_1 = rank_attn.page_bytes(kv, 1)
        if isinstance(attn, MLASpec):
            attn_1 = 2 * attn.elements_per_token * _bytes(kv)
        needed = KERNEL_BLOCK * cdiv(state_page, KERNEL_BLOCK * attn_1)
        checkpoints_on = False
    else:
        mode = "align" if prefix_caching else "none"
        attn_1 = rank_attn.page_bytes(kv, 1)
        align = max(KERNEL_BLOCK, block_size)
        if isinstance(attn, MLASpec):
            align = max(align, MLA_HYBRID_ALIGNMENT)
        # GDN exports prefill checkpoints only with FlashInfer's prefill (SM90) in align mode,
        # and the platform aligns to them only when every state layer can.
        checkpoints_on = (
            mode == "align"
            and since(version, GDN_CHECKPOINT_SINCE)
            and all(isinstance(s, GatedDeltaNetSpec) for s in states)
        )
        if checkpoints_on:
            align = lcm(align, GDN_FLASHINFER_ALIGNMENT)
        needed = align * cdiv(state_page, align * attn_1)
        needed = KERNEL_BLOCK * cdiv(needed, KERNEL_BLOCK)
    block = max(block_size, needed)
    if block != block_size:
        notes.append(note("block.vllm_hybrid_raised", block=block, requested=block_size))
    page = block * attn_1
    block_tokens = block if mode == "align" else max_model_len
    bound: dict[LayerSpec, LayerSpec] = {}
    for s, r in zip(states, ranked, strict=True):
        if old:
            held = 1
        elif mode == "align":
            gdn_ckpt = checkpoints_on and isinstance(s, GatedDeltaNetSpec)
            declared = s.checkpoint_blocks if since(version, MAMBA2_CHECKPOINT_SINCE) else 0
            held = 2 + num_spec + (1 if gdn_ckpt else declared)
        else:
            held = 1 + num_spec
        # The model keeps the whole state; its ranks (on_rank(tp)) get the padded page.
        bound[s] = s.bind(
            model_dtype=model_dtype,
            num_spec=num_spec,
            page_padded_bytes=page if page != r.state_bytes else None,
            padded_at_tp=tp,
            held_blocks=held,
            block_tokens=block_tokens,
        )
    layers = tuple(bound.get(s, s) for s in shape.layers)
    notes.append(
        note(
            "state.vllm_mode",
            mode=mode,
            version=".".join(map(str, version[:2])),
            held=next(iter(bound.values())).admission_blocks(0, block, 0) if bound else 0,
        )
    )
    return with_layers(shape, layers), block, notes


class VllmStateLayers:
    """The Engine hook for vLLM (mixed into `Vllm`)."""

    version: Version

    def state_prefix_caching(self, requested: bool) -> bool:
        # 0.11's MambaModelConfig switches prefix caching off for every hybrid model.
        return requested and not OLD_RULES[0] <= self.version <= OLD_RULES[1]

    def bind_state(
        self,
        shape: ModelShape,
        *,
        block_size: int,
        kv: KVDtype,
        model_dtype: str,
        tp: int,
        pp: int,
        prefix_caching: bool,
        max_model_len: int,
        num_spec: int = 0,
    ) -> tuple[ModelShape, int, list[Note]]:
        return bind_vllm_state(
            self.version, shape, block_size=block_size, kv=kv, model_dtype=model_dtype, tp=tp,
            pp=pp, prefix_caching=prefix_caching, max_model_len=max_model_len,
            num_spec=num_spec, attention_kv_heads=shape.num_key_value_heads,
        )  # fmt: skip


def _bytes(kv: KVDtype) -> int:
    return max(1, kv.bits // 8)


__all__ = ["VllmStateLayers", "bind_vllm_state"]
