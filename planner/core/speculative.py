"""Speculative decoding as vLLM 0.33 sizes it (`config/speculative.py`, `config/vllm.py`,
`v1/core/kv_cache_manager.allocate_slots`, `v1/core/kv_cache_planning.get_global_kv_cache_groups`).

* The draft's attention layers are in the same spec dict as the target's (`is_draft` is left
  out of spec equality), so they join the target's KV-cache groups; on the last pipeline stage.
  EAGLE / EAGLE3 / DFlash / draft_model: the draft config's decoder layers (DFlash's are plain
  attention layers, `qwen3_dflash.py`); MTP: the target's
  `num_nextn_predict_layers` layers, shaped like its own; ngram: none.
* While a request decodes, `allocate_slots` reserves slots for the k draft tokens being
  verified plus `num_lookahead_tokens` (k for EAGLE-family and draft models, k + 1 for DFlash's
  fill-in drafting, 0 for ngram), capped at max_model_len. Start-up figures (num_blocks, the
  logged concurrency) ignore them.
* Sliding windows retain `num_prefill_lookahead_tokens − 1` more tokens: k − 1 with a
  multi-module MTP draft (min(num_nextn_predict_layers, k) > 1), 0 otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from planner.core.errors import FieldError, ModelConfigError
from planner.core.model import (
    ModelShape,
    group_layers,
    shape_from_config,
    text_config,
    with_layers,
)
from planner.core.model_hybrid import QWEN3_5_TYPES
from planner.core.specs import (
    LayerSpec,
    SlidingWindowSpec,
    bytes_per_token,
    cache_layers,
    stack_of,
)
from planner.core.speculative_schema import SpeculativeConfig
from planner.core.units import KVDtype

FIELD = "speculative_config"
# Targets whose MTP layers vLLM 0.33 builds (SpeculativeConfig.hf_config_override), by model
# type or architecture; each MTP layer has the target's own attention.
_MTP_MODEL_TYPES = {"deepseek_v3", "deepseek_v32", "glm_moe_dsa", "deepseek_mtp", "mimo"}
_MTP_ARCHITECTURES = {"Glm4MoeForCausalLM", "Ernie4_5_MoeForCausalLM", "MiMoForCausalLM"}
# Configs whose transformers class defaults num_nextn_predict_layers (num_mtp_layers) to 1.
_MTP_DEFAULT_ONE = {"deepseek_v3", "glm4_moe"}
# Hybrid (gated delta net) targets with an MTP model file in vLLM 0.33, and the config field
# that file reads for its full-attention layers (1 when absent): qwen3_next_mtp.py reads
# num_nextn_predict_layers, qwen3_5_mtp.py mtp_num_hidden_layers. SpeculativeConfig takes the
# same field as n_predict, so an absent one sets no multiple for num_speculative_tokens.
_HYBRID_MTP_FIELD = {
    "qwen3_next": "num_nextn_predict_layers",
    **dict.fromkeys(QWEN3_5_TYPES, "mtp_num_hidden_layers"),
}
# EAGLE-family methods (SpeculativeConfig.use_eagle).
_EAGLE_METHODS = {"eagle", "eagle3", "mtp", "dflash"}


@dataclass(frozen=True, slots=True)
class Speculation:
    """A speculative config resolved against its target."""

    method: str
    model_label: str | None
    num_speculative_tokens: int
    draft_layers: tuple[LayerSpec, ...]  # decoder layers, TP 1, after the target's
    lookahead_tokens: int  # vLLM num_lookahead_tokens
    prefill_lookahead_tokens: int  # vLLM num_prefill_lookahead_tokens
    acceptance_rate: float | None
    draft_weights_bytes: int | None  # read once per draft step, where known

    @property
    def extra_retained_tokens(self) -> int:
        return max(0, self.prefill_lookahead_tokens - 1)

    @property
    def reserved_tokens(self) -> int:
        """Slots past a decoding request's own tokens: k verified drafts + the lookahead."""
        return self.num_speculative_tokens + self.lookahead_tokens

    def draft_bytes_per_token(self, dtype: KVDtype) -> int:
        return bytes_per_token(stack_of(cache_layers(self.draft_layers)), dtype)

    def tokens_per_step(self) -> float | None:
        """Mean tokens a request gains per target step: 1 + a + a² + … + a^k."""
        a, k = self.acceptance_rate, self.num_speculative_tokens
        if a is None:
            return None
        return float(k + 1) if a >= 1 else (1 - a ** (k + 1)) / (1 - a)


def _n_predict(cfg: Mapping[str, Any]) -> int:
    n = cfg.get("num_nextn_predict_layers", cfg.get("num_mtp_layers"))
    if n is None and cfg.get("model_type") in _MTP_DEFAULT_ONE:
        n = 1  # transformers' DeepseekV3Config / Glm4MoeConfig default, which vLLM reads
    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n > 64:
        raise FieldError((FIELD, "method"), "speculative.mtp_nextn_invalid", n=n)
    return n


def _mtp_supported(cfg: Mapping[str, Any]) -> bool:
    archs = cfg.get("architectures") or []
    arch = archs[0] if isinstance(archs, list) and archs else None
    mtype = cfg.get("model_type")
    return mtype in _MTP_MODEL_TYPES or mtype in _HYBRID_MTP_FIELD or arch in _MTP_ARCHITECTURES


def _mtp_layers(cfg: Mapping[str, Any]) -> tuple[int, int | None]:
    """(MTP decoder layers vLLM builds, the n_predict num_speculative_tokens must divide when
    larger; None for no such check)."""
    field = _HYBRID_MTP_FIELD.get(str(cfg.get("model_type")))
    if field is None:
        n = _n_predict(cfg)
        return n, n
    raw = cfg.get(field)
    if raw is None:
        return 1, None
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= 64:
        raise FieldError((FIELD, "method"), "speculative.mtp_field_invalid", field=field, raw=raw)
    return raw, raw


def resolve_speculation(
    spec: SpeculativeConfig,
    target: ModelShape,
    target_config: Mapping[str, Any] | None,
    draft_shape: ModelShape | None,
    draft_weights_bytes: int | None,
    tp: int,
) -> Speculation:
    """The draft's KV layers and lookahead, or a FieldError naming the speculative_config key."""
    method = spec.method
    if spec.draft_tensor_parallel_size not in (None, tp):
        raise FieldError(
            (FIELD, "draft_tensor_parallel_size"),
            "speculative.draft_tp",
            tp=tp,
            draft_tp=spec.draft_tensor_parallel_size,
        )
    if method in ("eagle", "eagle3", "dflash", "draft_model") and spec.model is None:
        raise FieldError((FIELD, "model"), "speculative.draft_required", method=method)
    if method == "ngram" and spec.model is not None:
        raise FieldError((FIELD, "model"), "speculative.ngram_has_no_draft")
    k = spec.num_speculative_tokens
    layers: tuple[LayerSpec, ...] = ()
    label = spec.model if isinstance(spec.model, str) else None
    if method == "mtp":
        cfg = text_config(spec.model) if isinstance(spec.model, dict) else None
        if cfg is None:
            if target_config is None:
                raise FieldError(
                    (FIELD, "model"),
                    "speculative.mtp_nextn_missing",
                )
            cfg = text_config(target_config)
        if not _mtp_supported(cfg):
            raise FieldError(
                (FIELD, "method"),
                "speculative.mtp_unknown_model_type",
                model_type=cfg.get("model_type"),
            )
        n, n_predict = _mtp_layers(cfg)
        if k is None and n_predict is None:
            raise FieldError(
                (FIELD, "num_speculative_tokens"),
                "speculative.mtp_modules_unknown",
            )
        k = k or n
        if n_predict is not None and k > n_predict and k % n_predict:
            # SpeculativeConfig: more draft tokens than MTP modules reuse the modules in turn.
            raise FieldError(
                (FIELD, "num_speculative_tokens"),
                "speculative.mtp_tokens_multiple",
                k=k,
                n_predict=n_predict,
                suggested=n_predict * (k // n_predict + 1),
            )
        # The first attention group (state layers keep no per-token cache to copy).
        main = next(
            (g.spec for g in target.groups if not g.spec.is_window and g.spec.grows_with_context),
            None,
        )
        if main is None:
            raise FieldError(
                (FIELD, "method"),
                "speculative.mtp_no_full_attention",
            )
        # The MTP module's decoder layer is the target's own kind of layer.
        source = next(s for s in target.layers if main in s.cache_specs())
        layers = (source,) * n
        label = label or "mtp"
        prefill = k if min(n, k) > 1 else 1
    else:
        if k is None:
            raise FieldError(
                (FIELD, "num_speculative_tokens"),
                "speculative.tokens_required",
                method=method,
            )
        if draft_shape is not None:
            layers = tuple(s for s in draft_shape.layers)
        prefill = 1 if method in _EAGLE_METHODS else 0
    # VllmConfig.num_lookahead_tokens: DFlash queries the last sampled token and each draft.
    lookahead = 0 if method == "ngram" else k + 1 if method == "dflash" else k
    return Speculation(
        method=method,
        model_label=label,
        num_speculative_tokens=k,
        draft_layers=layers,
        lookahead_tokens=lookahead,
        prefill_lookahead_tokens=prefill,
        acceptance_rate=spec.acceptance_rate,
        draft_weights_bytes=draft_weights_bytes,
    )


def draft_shape_of(config: Mapping[str, Any]) -> ModelShape:
    """A draft's shape from its config.json, errors named under speculative_config.model."""
    try:
        return shape_from_config(config)
    except ModelConfigError as exc:
        first = exc.problems[0]
        loc = first.loc[1:] if first.loc[:1] == ("model",) else first.loc
        raise ModelConfigError.at((FIELD, "model", *loc), first) from None


def with_draft(shape: ModelShape, draft_layers: tuple[LayerSpec, ...]) -> ModelShape:
    """The shape with a speculative draft's KV layers after its own; groups derived again."""
    return replace(
        shape, draft_layers=draft_layers, groups=group_layers(shape.layers, draft_layers)
    )


def apply_speculation(shape: ModelShape, sp: Speculation) -> ModelShape:
    """The target with the draft's layers after its own, and sliding windows widened by the
    tokens a multi-module MTP draft may re-prefill (target's and draft's)."""
    extra = sp.extra_retained_tokens

    def widen(s: LayerSpec) -> LayerSpec:
        return replace(s, extra_retained_tokens=extra) if isinstance(s, SlidingWindowSpec) else s

    if extra:
        shape = with_layers(shape, tuple(widen(s) for s in shape.layers))
    return with_draft(shape, tuple(widen(s) for s in sp.draft_layers))


__all__ = [
    "Speculation",
    "apply_speculation",
    "draft_shape_of",
    "resolve_speculation",
    "with_draft",
]
