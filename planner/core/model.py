"""A model's KV-relevant shape, resolved from a Hugging Face `config.json` object.

Rules (docs/engine-rules.md): explicit `head_dim` wins over `hidden_size // heads`; KV heads
fall back to query heads; MLA (DeepSeek) caches one latent of `kv_lora_rank + qk_rope_head_dim`
per layer-token with no ×2; per-layer windows come from `layer_types`, else Gemma-2/gpt-oss
alternation, else `sliding_window_pattern`, else the model-level `sliding_window` on every layer
(unless `use_sliding_window` is false, as in Qwen2); Llama-4 chunked local attention.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from planner.core.config_defaults import with_class_defaults
from planner.core.config_fields import int_field as _int_field
from planner.core.errors import ModelConfigError
from planner.core.kv_declared import KVDeclared, kv_declared
from planner.core.model_hybrid import PURE_STATE, hybrid_layers, is_hybrid, mamba_chunk_tokens
from planner.core.model_layers import (
    _GEMMA3,
    LayerKind,
    _attention_spec,
    _window_kinds,
    attention_factory,
)
from planner.core.sharing import apply_layer_forms, mlp_width
from planner.core.specs import (
    LayerSpec,
    MLASpec,
    Stack,
    cdiv,
    stack_of,
)

MAX_LAYERS = 4096
MAX_HEADS = 65536
MAX_HEAD_DIM = 65536

# DeepSeek-style MLA (vLLM `is_deepseek_mla`).
_MLA_TYPES = {"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "deepseek_mtp", "kimi_vl"}

_DTYPE_NAMES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
}


@dataclass(frozen=True, slots=True)
class LayerGroup:
    """Layers of identical spec (the unit engines bucket by)."""

    spec: LayerSpec
    layer_indices: tuple[int, ...]

    @property
    def layers(self) -> int:
        return len(self.layer_indices)


@dataclass(frozen=True, slots=True)
class ModelShape:
    id: str | None
    model_type: str | None
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    hidden_size: int | None
    max_position_embeddings: int | None
    dtype: str  # model dtype name in our vocabulary (bf16, fp16, fp32)
    dtype_from_config: bool
    layers: tuple[LayerSpec, ...]
    is_mla: bool
    kv_lora_rank: int | None
    qk_rope_head_dim: int | None
    num_parameters: int | None
    intermediate_size: int | None
    vocab_size: int | None
    # Mixture of experts: routed experts, each expert's MLP width, shared-expert MLP width.
    num_experts: int | None
    expert_intermediate_size: int | None
    shared_expert_intermediate_size: int | None
    # Layers bucketed by spec in first-appearance order (derived from `layers` once).
    groups: tuple[LayerGroup, ...] = ()
    # A speculative draft's KV layers, after the target's (they join its groups, last stage).
    draft_layers: tuple[LayerSpec, ...] = ()
    # What engines derive the longest context from besides max_position_embeddings.
    rope_scaling: tuple[str, float, int | None] | None = None  # (type, factor, original max)
    model_max_length: int | None = None
    quant_method: str | None = None  # the checkpoint's quantization_config.quant_method
    kv_declared: KVDeclared | None = None  # the KV cache quantization it declares
    architectures: tuple[str, ...] = ()  # config.json's "architectures" (model classes)
    mamba_chunk_tokens: int | None = None  # a hybrid's Mamba chunk size (vLLM aligns blocks to it)

    @property
    def stack(self) -> Stack:
        return tuple((g.spec, g.layers) for g in self.groups)

    @property
    def query_group_size(self) -> int:
        """Query heads sharing one KV head (GQA group; Hq for MQA and MLA)."""
        if self.is_mla:
            return self.num_attention_heads
        return max(1, self.num_attention_heads // self.num_key_value_heads)

    @property
    def has_window(self) -> bool:
        return any(s.is_window for s in self.layers)

    @property
    def has_state(self) -> bool:
        """Whether any layer keeps a constant per-request state (Mamba, linear attention)."""
        return any(not g.spec.grows_with_context for g in self.groups)

    @property
    def attention_spec(self) -> LayerSpec | None:
        """The first layer that attends (None for attention-free models)."""
        return next((g.spec for g in self.groups if g.spec.grows_with_context), None)


def _required(cfg: Mapping[str, Any], key: str, *, hi: int) -> int:
    value = _int_field(cfg, key, hi=hi)
    if value is None:
        raise ModelConfigError(("model", key), "model.required_for_kv_cache")
    return value


def text_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The decoder's config: `text_config` for multimodal wrappers, else the config itself,
    with transformers' class defaults under the keys it omits (planner.core.config_defaults)."""
    inner = config.get("text_config")
    if inner is None:
        return with_class_defaults(dict(config))
    if not isinstance(inner, Mapping):
        raise ModelConfigError(("model", "text_config"), "model.not_object")
    merged = dict(inner)
    # Dtype and architecture often live only at the top level of a multimodal config.
    for key in ("torch_dtype", "dtype", "model_type", "tie_word_embeddings"):
        if key not in merged and key in config:
            merged[key] = config[key]
    wrapper = config.get("model_type")
    return with_class_defaults(merged, wrapper if isinstance(wrapper, str) else None)


def _dtype(cfg: Mapping[str, Any]) -> tuple[str, bool]:
    raw = cfg.get("torch_dtype", cfg.get("dtype"))
    if raw is None:
        return "bf16", False
    if not isinstance(raw, str):
        raise ModelConfigError(("model", "torch_dtype"), "model.dtype_not_string")
    name = _DTYPE_NAMES.get(raw.removeprefix("torch.").lower())
    if name is None:
        raise ModelConfigError(("model", "torch_dtype"), "model.unknown_torch_dtype", raw=raw)
    return name, True


def shape_from_config(
    config: Mapping[str, Any], *, model_id: str | None = None, num_parameters: int | None = None
) -> ModelShape:
    """Resolve a config.json object (all keys accepted, unused ignored) into a ModelShape."""
    cfg = text_config(config)
    model_type = cfg.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise ModelConfigError(("model", "model_type"), "model.not_string")

    num_layers = _required(cfg, "num_hidden_layers", hi=MAX_LAYERS)
    if model_type in PURE_STATE:  # attention-free (Mamba): no attention heads to read
        num_heads = _int_field(cfg, "num_attention_heads", hi=MAX_HEADS) or 1
    else:
        num_heads = _required(cfg, "num_attention_heads", hi=MAX_HEADS)
    hidden = _int_field(cfg, "hidden_size", hi=1 << 24)

    kv_heads: int | None = None
    for key in ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num"):
        kv_heads = _int_field(cfg, key, hi=MAX_HEADS)
        if kv_heads is not None:
            break
    if kv_heads is None:
        kv_heads = num_heads

    head_dim = _int_field(cfg, "head_dim", lo=0, hi=MAX_HEAD_DIM) or None
    if head_dim is None and model_type in PURE_STATE:
        head_dim = 0
    elif head_dim is None:
        if hidden is None:
            raise ModelConfigError(
                ("model", "head_dim"),
                "model.head_dim_needed",
            )
        if hidden % num_heads:
            raise ModelConfigError(
                ("model", "hidden_size"),
                "model.hidden_size_not_divisible",
                hidden=hidden,
                num_heads=num_heads,
            )
        head_dim = hidden // num_heads

    kv_lora_rank = _int_field(cfg, "kv_lora_rank", hi=MAX_HEAD_DIM)
    rope_dim = _int_field(cfg, "qk_rope_head_dim", lo=0, hi=MAX_HEAD_DIM)
    is_mla = kv_lora_rank is not None and (model_type in _MLA_TYPES or rope_dim is not None)

    hybrid: tuple[LayerSpec, ...] | None = None
    if is_hybrid(cfg, model_type):
        hybrid = hybrid_layers(
            cfg, num_layers, model_type,
            attention_factory(cfg, is_mla, kv_lora_rank, rope_dim, kv_heads, num_heads, head_dim),
        )  # fmt: skip
    if hybrid is not None:
        layers: tuple[LayerSpec, ...] = hybrid
    elif is_mla:
        assert kv_lora_rank is not None  # for the type checker: is_mla implies it
        # One latent per layer-token: K and V share it (no ×2, no head factor).
        layers = (MLASpec.of(kv_lora_rank, rope_dim or 0),) * num_layers
    else:
        if num_heads % kv_heads:
            raise ModelConfigError(
                ("model", "num_key_value_heads"),
                "model.heads_not_multiple_of_kv_heads",
                num_heads=num_heads,
                kv_heads=kv_heads,
            )
        v_dim = _int_field(cfg, "v_head_dim", hi=MAX_HEAD_DIM) or head_dim
        kinds = _window_kinds(cfg, num_layers, model_type)
        layers = tuple(_attention_spec(kind, kv_heads, head_dim, v_dim, w) for kind, w in kinds)
    layers = apply_layer_forms(cfg, layers, model_type)

    max_pos: int | None = None
    for key in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"):
        max_pos = _int_field(cfg, key, hi=1 << 30)
        if max_pos is not None:
            break
    if max_pos is None and model_type in _GEMMA3:
        # Gemma3TextConfig's default: published Gemma-3 text_configs omit the key, and both
        # transformers and vLLM then use 131,072.
        max_pos = 131072
    dtype, from_config = _dtype(cfg)
    experts = None
    for key in ("num_local_experts", "num_experts", "n_routed_experts"):
        experts = _int_field(cfg, key, hi=1 << 16)
        if experts is not None:
            break
    expert_width = shared_width = None
    if experts is not None:
        expert_width = _int_field(cfg, "moe_intermediate_size", hi=1 << 24) or _int_field(
            cfg, "intermediate_size", hi=1 << 24
        )
        # 0 means no shared expert (Qwen3-Coder-480B-A35B-Instruct publishes it so).
        shared_width = _int_field(cfg, "shared_expert_intermediate_size", lo=0, hi=1 << 24) or None
        n_shared = _int_field(cfg, "n_shared_experts", lo=0, hi=1 << 10)
        if shared_width is None and n_shared and expert_width:
            shared_width = n_shared * expert_width

    return ModelShape(
        rope_scaling=_rope_scaling(cfg),
        model_max_length=_int_field(cfg, "model_max_length", hi=1 << 30),
        quant_method=_quant_method(config),
        kv_declared=kv_declared(config),
        architectures=_architectures(config),
        mamba_chunk_tokens=mamba_chunk_tokens(cfg, model_type) if hybrid is not None else None,
        groups=group_layers(layers),
        id=model_id,
        model_type=model_type,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=kv_heads,
        head_dim=(kv_lora_rank or 0) + (rope_dim or 0) if is_mla else head_dim,
        hidden_size=hidden,
        max_position_embeddings=max_pos,
        dtype=dtype,
        dtype_from_config=from_config,
        layers=layers,
        is_mla=is_mla,
        kv_lora_rank=kv_lora_rank,
        qk_rope_head_dim=rope_dim,
        num_parameters=num_parameters,
        intermediate_size=mlp_width(cfg),
        vocab_size=_int_field(cfg, "vocab_size", hi=1 << 24),
        num_experts=experts,
        expert_intermediate_size=expert_width,
        shared_expert_intermediate_size=shared_width,
    )


def _architectures(config: Mapping[str, Any]) -> tuple[str, ...]:
    raw = config.get("architectures")
    if not isinstance(raw, list | tuple):
        return ()
    return tuple(a for a in raw if isinstance(a, str))


def _quant_method(config: Mapping[str, Any]) -> str | None:
    qc = config.get("quantization_config")
    method = qc.get("quant_method") if isinstance(qc, Mapping) else None
    if not isinstance(method, str):
        return None
    # vLLM's name for the config class: ModelOpt NVFP4 is ModelOptNvFp4Config ("modelopt_fp4").
    algo = str(qc.get("quant_algo") or "").upper() if isinstance(qc, Mapping) else ""
    return "modelopt_fp4" if method.lower() == "modelopt" and algo == "NVFP4" else method.lower()


def _rope_scaling(cfg: Mapping[str, Any]) -> tuple[str, float, int | None] | None:
    """(rope type, factor, original_max_position_embeddings) of a config's RoPE scaling."""
    raw = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if not isinstance(raw, Mapping):
        return None
    kind = raw.get("rope_type", raw.get("type"))
    factor = raw.get("factor")
    if not isinstance(kind, str) or isinstance(factor, bool) or not isinstance(factor, int | float):
        return None
    original = raw.get("original_max_position_embeddings")
    orig = original if isinstance(original, int) and not isinstance(original, bool) else None
    return kind, float(factor), orig


def group_layers(
    layers: Iterable[LayerSpec], draft_layers: Iterable[LayerSpec] = ()
) -> tuple[LayerGroup, ...]:
    """Caches bucketed by spec, in first-appearance order: each decoder layer's caches (none for
    a KV-sharing layer), then the draft's layers numbered after the target's."""
    buckets: dict[LayerSpec, list[int]] = {}
    for i, layer in enumerate((*layers, *draft_layers)):
        for spec in layer.cache_specs():
            buckets.setdefault(spec, []).append(i)
    return tuple(LayerGroup(spec, tuple(idx)) for spec, idx in buckets.items())


def with_windows(shape: ModelShape, windows: Sequence[int], max_seq_tokens: int) -> ModelShape:
    """The shape with per-layer attention windows set explicitly, as TensorRT-LLM's
    `KvCacheConfig.max_attention_window` does: the list repeats over the layers; a window
    shorter than `max_seq_tokens` makes the layer a cyclic sliding-window layer, a longer one
    full attention. MLA layers are left alone."""
    if shape.is_mla:
        return shape
    layers: list[LayerSpec] = []
    for i, spec in enumerate(shape.layers):
        w = windows[i % len(windows)]
        kind: LayerKind = "sliding" if w < max_seq_tokens else "full"
        layers.append(_attention_spec(kind, spec.kv_heads, spec.head_size, spec.head_size_v, w))
    return with_layers(shape, tuple(layers))


def with_layers(shape: ModelShape, layers: tuple[LayerSpec, ...]) -> ModelShape:
    """The shape with other layer specs; its groups derived again (never left stale)."""
    return replace(shape, layers=layers, groups=group_layers(layers, shape.draft_layers))


__all__ = [
    "LayerGroup",
    "LayerKind",
    "LayerSpec",
    "ModelShape",
    "Stack",
    "cdiv",
    "group_layers",
    "shape_from_config",
    "stack_of",
    "text_config",
    "with_layers",
    "with_windows",
]
