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
(`MambaMixer2.get_kv_cache_spec`) starts in 0.32.

0.21-0.27 (each release checked by its own code): hybrids opt in to prefix caching, and with it
models that declare Mamba prefix caching (granite-4.0-h, Falcon-H1, Nemotron-H, Jamba; Bamba
until 0.23) take mamba_cache_mode "all": a state block for every `mamba_block_size` tokens of a
request (+ speculative blocks; 0.21 takes "align" with speculative decoding), the block whole
chunks of lcm(the model's Mamba chunk size, the kernel alignment) covering the state; the other
hybrids take "align" (0.28's rules without checkpoints; MLA hybrids align to 128 from 0.27).
A text-only Qwen3.5 config keeps its recurrent state in the model dtype before 0.25 and takes
no MTP draft before 0.28.

0.15-0.20 (each release checked by its own code, issue #20): 0.21's rules, except that before
0.20 the block is raised while the config is built (`HybridAttentionMambaModelConfig`), aligned
to the kernel block alone (16; 64 for MLA) and not to --block-size, models that declare Mamba
prefix caching keep "all" with speculation, and 0.16 refuses an explicit async scheduling with
Mamba prefix caching. 0.14 has no mamba_cache_mode: prefix caching keeps a state block for every
block of tokens for the models that declare Mamba prefix caching and is switched off for the
others, a state group needs cdiv(length, mamba_block_size) blocks (mamba_block_size =
max_model_len without prefix caching: 1 at the configured length), and speculation runs on
Qwen3-Next only. 0.12-0.13 are refused.
"""

from __future__ import annotations

from dataclasses import replace
from math import lcm

from planner.core.engines.versions import Version, since, version_text
from planner.core.engines.vllm.releases import (
    ALIGN_MODE_ONLY_SINCE,
    ALIGN_MODE_WITH_SPEC_SINCE,
    ALL_MODE_WITH_SPEC_SINCE,
    ASYNC_MAMBA_PREFIX_REFUSED,
    BAMBA_ALIGN_SINCE,
    CONFIG_MLA_ALIGNMENT,
    GDN_CHECKPOINT_SINCE,
    HYBRID_ALIGN_AFTER_LOAD_SINCE,
    HYBRID_PREFIX_DEFAULT_SINCE,
    MAMBA2_CHECKPOINT_SINCE,
    MAMBA_CACHE_MODES_SINCE,
    MAMBA_PREFIX_CACHING_TYPES,
    MLA_HYBRID_128_SINCE,
    OLD_STATE_RULES,
    QWEN3_5_TEXT_ARCHITECTURES,
    QWEN3_5_TEXT_FP32_SINCE,
    QWEN3_5_TEXT_MTP_SINCE,
    SHORT_CONV_SPEC_ROWS_SINCE,
    STATE_LAYERS_V1_SINCE,
    STATE_RULES_SINCE,
)
from planner.core.errors import FieldError
from planner.core.model import ModelShape, with_layers
from planner.core.model_hybrid import QWEN3_5_TYPES
from planner.core.notes import Note, note
from planner.core.specs import LayerSpec, MLASpec, cdiv
from planner.core.specs_state import GatedDeltaNetSpec, ShortConvSpec, StateSpec
from planner.core.units import KVDtype

# Smallest kernel block of the SM90 attention backends vLLM picks for these models
# (FlashAttention, FlashAttention-MLA, Triton MLA: MultipleOf(16); FlashInfer 16).
KERNEL_BLOCK = 16
MLA_HYBRID_ALIGNMENT = 128
# ModelConfig.get_mamba_chunk_size without a chunk size in the config (Mamba1 has none).
DEFAULT_MAMBA_CHUNK = 2048
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
    async_scheduling: bool | None = None,
) -> tuple[ModelShape, int, list[Note]]:
    """The shape with every state layer bound as vLLM `version` sizes it, the raised block
    size, and notes saying what changed."""
    if not since(version, STATE_LAYERS_V1_SINCE):
        raise FieldError("engine_version", "vllm.state_layers_v0", version=version_text(version))
    old = OLD_STATE_RULES[0] <= version <= OLD_STATE_RULES[1]
    if not old and not since(version, STATE_RULES_SINCE):
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
    text_arch = next((a for a in shape.architectures if a in QWEN3_5_TEXT_ARCHITECTURES), None)
    if not old and text_arch and shape.draft_layers and not since(version, QWEN3_5_TEXT_MTP_SINCE):
        raise FieldError(
            ("speculative_config", "method"),
            "vllm.qwen3_5_text_mtp_release",
            version=version_text(version),
        )
    if num_spec and shape.model_type != "qwen3_next" and not old:
        if not since(version, MAMBA_CACHE_MODES_SINCE):
            # MambaBase.get_kv_cache_spec: "Mamba with speculative decoding is not supported yet."
            raise FieldError(
                ("speculative_config", "method"),
                "vllm.mamba_spec_release",
                version=version_text(version),
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
    rows = {s: _spec_rows(version, s, num_spec) for s in states}
    if text_arch and not since(version, QWEN3_5_TEXT_FP32_SINCE):
        # No Qwen3.5 config hook for the text-only class: the SSM cache dtype stays "auto".
        own = {s: replace(s, ssm_dtype="model") if isinstance(s, GatedDeltaNetSpec) else s
               for s in states}  # fmt: skip
    else:
        own = {s: s for s in states}
    ranked = [
        replace(own[s], tp=tp).bind(model_dtype=model_dtype, num_spec=rows[s]) for s in states
    ]
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
        mode = _cache_mode(version, shape, prefix_caching, num_spec)
        first, lifted = ASYNC_MAMBA_PREFIX_REFUSED
        refused = since(version, first) and not since(version, lifted)
        if async_scheduling and mode != "none" and refused:
            # VllmConfig.__post_init__: an explicit --async-scheduling is refused.
            raise FieldError(
                "async_scheduling",
                "vllm.async_mamba_prefix_caching",
                version=version_text(version),
            )
        attn_1 = rank_attn.page_bytes(kv, 1)
        if not since(version, HYBRID_ALIGN_AFTER_LOAD_SINCE):
            # Raised while the config is built: the kernel block alone.
            align = CONFIG_MLA_ALIGNMENT if isinstance(attn, MLASpec) else KERNEL_BLOCK
        else:
            align = max(KERNEL_BLOCK, block_size)
        if isinstance(attn, MLASpec) and since(version, MLA_HYBRID_128_SINCE):
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
        if mode == "all":
            # Whole Mamba chunks (lcm with the kernel alignment) covering the state's tokens.
            chunk = lcm(shape.mamba_chunk_tokens or DEFAULT_MAMBA_CHUNK, align)
            needed = chunk * cdiv(cdiv(state_page, attn_1), chunk)
        else:
            needed = align * cdiv(state_page, align * attn_1)
        needed = KERNEL_BLOCK * cdiv(needed, KERNEL_BLOCK)
    block = max(block_size, needed)
    if block != block_size:
        notes.append(note("block.vllm_hybrid_raised", block=block, requested=block_size))
    page = block * attn_1
    block_tokens = max_model_len if mode == "none" else block
    bound: dict[LayerSpec, LayerSpec] = {}
    for s, r in zip(states, ranked, strict=True):
        per_block = mode == "all" or (not old and not since(version, MAMBA_CACHE_MODES_SINCE))
        if old:
            held = 1
        elif per_block and not since(version, MAMBA_CACHE_MODES_SINCE):
            # MambaSpec.max_memory_usage_bytes = cdiv(length, mamba_block_size) × page: a block
            # for every block_tokens tokens (max_model_len without prefix caching), nothing else.
            held = 0
        elif mode == "all":
            held = num_spec  # beyond the block per block_tokens tokens
        elif mode == "align":
            gdn_ckpt = checkpoints_on and isinstance(s, GatedDeltaNetSpec)
            declared = s.checkpoint_blocks if since(version, MAMBA2_CHECKPOINT_SINCE) else 0
            held = 2 + num_spec + (1 if gdn_ckpt else declared)
        else:
            held = 1 + num_spec
        # The model keeps the whole state; its ranks (on_rank(tp)) get the padded page.
        bound[s] = own[s].bind(
            model_dtype=model_dtype,
            num_spec=rows[s],
            page_padded_bytes=page if page != r.state_bytes else None,
            padded_at_tp=tp,
            held_blocks=held,
            block_tokens=block_tokens,
            per_block=per_block,
        )
    layers = tuple(bound.get(s, s) for s in shape.layers)
    label = ".".join(map(str, version[:2]))
    if mode == "all":
        notes.append(note("state.vllm_mode_all", version=label, block=block))
    else:
        held = next(iter(bound.values())).admission_blocks(0, block, 0) if bound else 0
        notes.append(note("state.vllm_mode", mode=mode, version=label, held=held))
    return with_layers(shape, layers), block, notes


class VllmStateLayers:
    """The Engine hook for vLLM (mixed into `Vllm`)."""

    version: Version

    def state_prefix_caching(self, requested: bool | None) -> bool:
        # 0.11's MambaModelConfig switches prefix caching off for every hybrid model; until
        # 0.28 hybrids opt in (None: the default).
        if OLD_STATE_RULES[0] <= self.version <= OLD_STATE_RULES[1]:
            return False
        if requested is None:
            return since(self.version, HYBRID_PREFIX_DEFAULT_SINCE)
        return requested

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
        async_scheduling: bool | None = None,
    ) -> tuple[ModelShape, int, list[Note]]:
        return bind_vllm_state(
            self.version, shape, block_size=block_size, kv=kv, model_dtype=model_dtype, tp=tp,
            pp=pp, prefix_caching=prefix_caching, max_model_len=max_model_len,
            num_spec=num_spec, attention_kv_heads=shape.num_key_value_heads,
            async_scheduling=async_scheduling,
        )  # fmt: skip


def _spec_rows(version: Version, spec: StateSpec, num_spec: int) -> int:
    """Speculative tokens a state's conv rows grow by (MambaStateShapeCalculator)."""
    if isinstance(spec, ShortConvSpec) and not since(version, SHORT_CONV_SPEC_ROWS_SINCE):
        return 0
    return num_spec


def _cache_mode(version: Version, shape: ModelShape, prefix_caching: bool, num_spec: int) -> str:
    """vLLM's mamba_cache_mode (MambaModelConfig.verify_and_update_config)."""
    if not prefix_caching:
        return "none"
    declared = shape.model_type in MAMBA_PREFIX_CACHING_TYPES and not (
        shape.model_type == "bamba" and since(version, BAMBA_ALIGN_SINCE)
    )
    if not since(version, MAMBA_CACHE_MODES_SINCE):
        # MambaModelConfig switches prefix caching off for the models that do not declare it.
        return "all" if declared else "none"
    if since(version, ALIGN_MODE_ONLY_SINCE) or not declared:
        return "align"
    spec_align = since(version, ALIGN_MODE_WITH_SPEC_SINCE) and not since(
        version, ALL_MODE_WITH_SPEC_SINCE
    )
    return "align" if num_spec and spec_align else "all"


def _bytes(kv: KVDtype) -> int:
    return max(1, kv.bits // 8)


__all__ = ["VllmStateLayers", "bind_vllm_state"]
