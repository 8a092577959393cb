"""The parameters a pasted EAGLE draft adds to GPU memory, as vLLM 0.33 loads it (pure).

A draft config is a one-layer Llama-style config, but vLLM does not build a whole model from it:

* Embedding: shared with the target when the widths match
  (`v1/spec_decode/llm_base_proposer.py` `_maybe_share_embeddings`): EAGLE-3 checkpoints carry
  no `embed_tokens`, EAGLE-1 checkpoints carry a copy identical to the target's, and either way
  the draft's table is replaced by the target's.
* LM head: EAGLE-1 (`llama_eagle.py` EagleLlamaForCausalLM) builds none and uses the target's
  (`_maybe_share_lm_head`); EAGLE-3 (`llama_eagle3.py`) keeps its own over `draft_vocab_size`
  (the vocabulary when that is absent).
* Extra modules: EAGLE-1's `fc` maps [embeds, hidden] (2 × hidden_size) to hidden_size (and it
  drops layer 0's input norm and the final norm); EAGLE-3's
  `fc` maps its aux hidden states (`eagle_aux_hidden_state_layer_ids`, 3 by default, each
  `target_hidden_size` wide) to hidden_size, its first layer's q/k/v read [embeds, hidden]
  (2 × hidden_size) and it has one more norm (`hidden_norm`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.core.errors import ModelConfigError
from planner.core.layout import decoder
from planner.core.model import text_config
from planner.core.quant import weight_bytes

EAGLE_METHODS = ("eagle", "eagle3")
_DEFAULT_AUX_HIDDEN_STATES = 3  # llama_eagle3.py when no layer ids are given
_QKV = (".q_proj", ".k_proj", ".v_proj")


def _int(cfg: Mapping[str, Any], key: str) -> int | None:
    v = cfg.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _aux_states(cfg: Mapping[str, Any]) -> int:
    explicit = _int(cfg, "num_aux_hidden_states")
    if explicit is not None:
        return explicit
    eagle = cfg.get("eagle_config")
    ids = eagle.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle, Mapping) else None
    return len(ids) if isinstance(ids, list) and ids else _DEFAULT_AUX_HIDDEN_STATES


def eagle_draft_parameters(
    config: Mapping[str, Any], method: str, target_hidden_size: int | None
) -> int:
    """Parameters vLLM allocates for an EAGLE / EAGLE-3 draft beside its target."""
    cfg = text_config(config)
    dec = decoder(config)
    hidden = int(cfg["hidden_size"])  # decoder() has checked it
    body = sum(x.parameters for x in dec.linears if x.kind != "lm_head") + dec.other_parameters
    shares_embedding = target_hidden_size is None or target_hidden_size == hidden
    embedding = 0 if shares_embedding else dec.embedding_parameters
    if method == "eagle3":
        first_qkv = sum(
            x.parameters - (x.out_features if x.bias else 0)
            for x in dec.linears
            if x.layer == 0 and x.kind == "attention" and x.name.endswith(_QKV)
        )
        vocab = _int(cfg, "draft_vocab_size") or int(cfg["vocab_size"])
        fc_in = (_int(cfg, "target_hidden_size") or hidden) * _aux_states(cfg)
        # q/k/v twice as wide at layer 0, hidden_norm, own LM head, fc.
        return body + first_qkv + hidden + vocab * hidden + fc_in * hidden + embedding
    # EAGLE-1: the target's LM head, its own fc; no input norm at layer 0 and no final norm
    # (llama_eagle.py replaces the one by Identity and builds no other).
    return body + 2 * hidden * hidden - 2 * hidden + embedding


def eagle_draft_weight_bytes(
    config: Mapping[str, Any],
    method: str,
    target_hidden_size: int | None,
    dtype_bytes: int | None = None,
) -> int:
    """Bytes of those parameters at `dtype_bytes` per unquantized element (the dtype served),
    else at the draft config's own storage width; quantized drafts at their stored bytes."""
    params = eagle_draft_parameters(config, method, target_hidden_size)
    stored = weight_bytes(config, dtype_bytes).total
    counted = decoder(config)
    whole = (
        sum(x.parameters for x in counted.linears)
        + counted.embedding_parameters
        + counted.other_parameters
    )
    return round(params * stored / whole) if whole else params * 2


def draft_weight_bytes(
    config: Mapping[str, Any],
    method: str,
    target_config: Mapping[str, Any] | None,
    dtype_bytes: int | None = None,
) -> int | None:
    """A pasted draft's bytes in GPU memory, unquantized tensors at `dtype_bytes` (the dtype
    served): EAGLE heads as above, a draft model whole; None when its config cannot be counted."""
    try:
        if method in EAGLE_METHODS:
            hidden = text_config(target_config).get("hidden_size") if target_config else None
            width = hidden if type(hidden) is int else None
            return eagle_draft_weight_bytes(config, method, width, dtype_bytes)
        return weight_bytes(config, dtype_bytes).total
    except ModelConfigError:
        return None


__all__ = [
    "EAGLE_METHODS",
    "draft_weight_bytes",
    "eagle_draft_parameters",
    "eagle_draft_weight_bytes",
]
