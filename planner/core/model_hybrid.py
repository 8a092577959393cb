"""Hybrid configs: which layers keep a state (Mamba, gated delta net, KDA, short convolution)
and which attend, in every spelling published configs use.

- `layer_types` (granite-4.0-h, Qwen3-Next, LFM2, Jamba/NemotronH in transformers 5):
  `attention` / `full_attention` / `sliding_attention` / `chunked_attention` attend;
  `mamba`, `linear_attention`, `conv` keep a state whose mixer the architecture decides;
  `mlp` / `moe` layers hold no cache.
- `hybrid_override_pattern` (Nemotron-H): `M` Mamba2, `*` attention, `-` MLP, `E` MoE.
- `layers_block_type` (older granite / Jamba / NemotronH configs): the `layer_types` words.
- `attn_layer_period` + `attn_layer_offset` (Jamba), `attn_layer_indices`.
- `linear_attn_config` (Kimi-Linear): 1-based `kda_layers` / `full_attn_layers`.
- `full_attention_interval` (Qwen3-Next without `layer_types`).
- Falcon-H1: every layer runs attention and a Mamba2 mixer side by side.

Anything else gets a refusal naming the field, the layer and the type: never a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from planner.core.errors import ModelConfigError
from planner.core.specs import LayerSpec
from planner.core.specs_state import (
    GatedDeltaNetSpec,
    KimiDeltaSpec,
    Mamba1Spec,
    Mamba2Spec,
    ShortConvSpec,
    StateDtype,
    StateSpec,
)

# Architectures with state layers, and the config keys that only hybrid configs carry.
STATE_MODEL_TYPES = frozenset(
    {
        "kimi_linear", "jamba", "qwen3_next", "granitemoehybrid", "nemotron_h", "falcon_h1",
        "bamba", "lfm2", "lfm2_moe", "mamba", "mamba2", "falcon_mamba", "zamba", "zamba2",
        "minimax", "minimax_text_01", "plamo2", "qwen3_5", "qwen3_5_moe", "qwen3_5_text",
        "qwen3_5_moe_text",
    }
)  # fmt: skip
# Qwen3.5 / Qwen3.6 (text configs and their multimodal wrappers): gated delta nets whose
# recurrent state takes the config's mamba_ssm_dtype (vLLM 0.33
# Qwen3_5ForConditionalGenerationConfig.verify_and_update_config sets mamba_ssm_cache_dtype).
QWEN3_5_TYPES = frozenset({"qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text"})
HYBRID_KEYS = (
    "linear_attn_config",
    "hybrid_override_pattern",
    "layers_block_type",
    "attn_layer_period",
    "attn_layer_indices",
    "full_attention_interval",
)
ATTENTION_WORDS = frozenset(
    {"attention", "full_attention", "sliding_attention", "chunked_attention"}
)
NO_CACHE_WORDS = frozenset({"mlp", "moe"})
# Which mixer a state word means, per architecture (vLLM's model files).
_MAMBA_MIXER = {
    "granitemoehybrid": "mamba2",
    "bamba": "mamba2",
    "nemotron_h": "mamba2",
    "falcon_h1": "mamba2",
    "jamba": "mamba1",
}
_LINEAR_MIXER = {
    "qwen3_next": "gdn",
    **dict.fromkeys(QWEN3_5_TYPES, "gdn"),
    "kimi_linear": "kda",
    "jamba": "mamba1",  # transformers' JambaConfig.layer_types spells Mamba linear_attention
    "nemotron_h": "mamba2",  # NemotronHConfig: "mamba" is remapped to linear_attention
    "granitemoehybrid": "mamba2",  # GraniteMoeHybridConfig remaps mamba → linear_attention
    "bamba": "mamba2",
}
_CONV_MIXER = {"lfm2": "short_conv", "lfm2_moe": "short_conv"}
# Attention-free architectures: every layer is one mixer.
PURE_MAMBA1 = frozenset({"mamba", "falcon_mamba"})
PURE_STATE = {"mamba2": "mamba2", "mamba": "mamba1", "falcon_mamba": "mamba1"}

AttentionFactory = Callable[[str], LayerSpec]
Slot = str | None  # "attention" words, a mixer name, or None (no cache)


def is_hybrid(cfg: Mapping[str, Any], model_type: str | None) -> bool:
    """Whether the config has (or may have) state layers: constant-time on plain configs."""
    if model_type in STATE_MODEL_TYPES or any(k in cfg for k in HYBRID_KEYS):
        return True
    types = cfg.get("layer_types")
    return isinstance(types, list) and any(
        t not in ATTENTION_WORDS for t in types if isinstance(t, str)
    )


def _int(cfg: Mapping[str, Any], key: str, *, lo: int = 1, loc: tuple[str, ...] = ()) -> int:
    value = cfg.get(key)
    where = ("model", *loc, key)
    if value is None:
        raise ModelConfigError(where, "model.required_for_state")
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise ModelConfigError(where, "model.not_integer", value=value)
    if not lo <= int(value) <= 1 << 24:
        raise ModelConfigError(where, "model.value_out_of_range", lo=lo, hi=1 << 24, value=value)
    return int(value)


def _mixer_spec(mixer: str, cfg: Mapping[str, Any], model_type: str | None) -> StateSpec:
    """The state spec of one mixer kind from the config fields vLLM's model file reads."""
    hidden = cfg.get("hidden_size")
    if mixer == "mamba2" and model_type == "mamba2":
        # Mamba2Config (attention-free Mamba2): num_heads, head_dim, expand·hidden_size.
        return Mamba2Spec(
            0, 0, 0,
            intermediate=int(_number(cfg, "expand") * _int(cfg, "hidden_size")),
            n_groups=_int(cfg, "n_groups"),
            num_heads=_int(cfg, "num_heads"),
            head_dim=_int(cfg, "head_dim"),
            state_size=_int(cfg, "state_size"),
            conv_kernel=_int(cfg, "conv_kernel"),
        )  # fmt: skip
    if mixer == "mamba1" and model_type in PURE_MAMBA1:
        return Mamba1Spec(
            0, 0, 0,
            intermediate=_int(cfg, "intermediate_size"),
            state_size=_int(cfg, "state_size"),
            conv_kernel=_int(cfg, "conv_kernel"),
        )  # fmt: skip
    if mixer == "mamba2":
        if model_type == "nemotron_h":
            heads, head_dim = _int(cfg, "mamba_num_heads"), _int(cfg, "mamba_head_dim")
            raw = cfg.get("mamba_ssm_cache_dtype", "float32")
            return Mamba2Spec(
                0, 0, 0,
                intermediate=heads * head_dim,
                n_groups=_int(cfg, "n_groups"),
                num_heads=heads,
                head_dim=head_dim,
                state_size=_int(cfg, "ssm_state_size"),
                conv_kernel=_int(cfg, "conv_kernel"),
                ssm_dtype=_state_dtype(raw, "mamba_ssm_cache_dtype"),
            )  # fmt: skip
        if model_type == "falcon_h1" and cfg.get("mamba_d_ssm") is not None:
            inner = _int(cfg, "mamba_d_ssm")
        else:
            inner = int(_number(cfg, "mamba_expand") * _int(cfg, "hidden_size"))
        return Mamba2Spec(
            0, 0, 0,
            intermediate=inner,
            n_groups=_int(cfg, "mamba_n_groups"),
            num_heads=_int(cfg, "mamba_n_heads"),
            head_dim=_int(cfg, "mamba_d_head"),
            state_size=_int(cfg, "mamba_d_state"),
            conv_kernel=_int(cfg, "mamba_d_conv"),
        )  # fmt: skip
    if mixer == "mamba1":
        return Mamba1Spec(
            0, 0, 0,
            intermediate=int(_number(cfg, "mamba_expand") * _int(cfg, "hidden_size")),
            state_size=_int(cfg, "mamba_d_state"),
            conv_kernel=_int(cfg, "mamba_d_conv"),
        )  # fmt: skip
    if mixer == "gdn":
        return GatedDeltaNetSpec(
            0, 0, 0,
            num_k_heads=_int(cfg, "linear_num_key_heads"),
            num_v_heads=_int(cfg, "linear_num_value_heads"),
            head_k_dim=_int(cfg, "linear_key_head_dim"),
            head_v_dim=_int(cfg, "linear_value_head_dim"),
            conv_kernel=_int(cfg, "linear_conv_kernel_dim"),
            ssm_dtype=(
                _state_dtype(cfg.get("mamba_ssm_dtype"), "mamba_ssm_dtype")
                if model_type in QWEN3_5_TYPES
                else "model"
            ),
        )  # fmt: skip
    if mixer == "kda":
        lac = cfg.get("linear_attn_config")
        if not isinstance(lac, Mapping):
            raise ModelConfigError(("model", "linear_attn_config"), "model.not_object")
        loc = ("linear_attn_config",)
        return KimiDeltaSpec(
            0, 0, 0,
            num_heads=_int(lac, "num_heads", loc=loc),
            head_dim=_int(lac, "head_dim", loc=loc),
            conv_kernel=_int(lac, "short_conv_kernel_size", loc=loc),
        )  # fmt: skip
    if mixer == "short_conv":
        # LFM2: conv_dim channels (vLLM's ShortConv(dim=config.conv_dim)), kernel conv_L_cache.
        channels = _int(cfg, "conv_dim") if "conv_dim" in cfg else hidden
        if not isinstance(channels, int):
            raise ModelConfigError(("model", "conv_dim"), "model.required_for_lfm2")
        return ShortConvSpec(0, 0, 0, channels=channels, conv_kernel=_int(cfg, "conv_L_cache"))
    raise AssertionError(mixer)  # pragma: no cover - callers only pass known mixers


_STATE_DTYPES: dict[str, StateDtype] = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _state_dtype(raw: object, key: str) -> StateDtype:
    """A config's recurrent-state dtype name; None or "auto" is the model's dtype."""
    if raw is None or raw == "auto":
        return "model"
    if not isinstance(raw, str) or raw not in _STATE_DTYPES:
        raise ModelConfigError(("model", key), "model.unknown_dtype", raw=raw)
    return _STATE_DTYPES[raw]


def _number(cfg: Mapping[str, Any], key: str) -> float:
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 64:
        raise ModelConfigError(("model", key), "model.not_in_0_64", value=value)
    return float(value)


def _refuse(loc: tuple[str | int, ...], word: object, i: int, model_type: str | None) -> None:
    arch = model_type or "this architecture"
    raise ModelConfigError(
        ("model", *loc), "model.layer_type_unmodelled", i=i, word=word, arch=arch
    )


def _word_slot(word: object, i: int, model_type: str | None, field: str) -> Slot:
    if not isinstance(word, str):
        raise ModelConfigError(("model", field, i), "model.not_string_got", word=word)
    if word in ATTENTION_WORDS:
        return "full_attention" if word == "attention" else word
    if word in NO_CACHE_WORDS:
        return None
    table = {"mamba": _MAMBA_MIXER, "linear_attention": _LINEAR_MIXER, "conv": _CONV_MIXER}
    mixer = table.get(word, {}).get(model_type or "")
    if mixer is None:
        _refuse((field, i), word, i, model_type)
    return mixer


def _slots(cfg: Mapping[str, Any], n: int, model_type: str | None) -> list[list[str]]:
    """Per decoder layer, the cached slots it holds (Falcon-H1 holds two)."""
    if model_type == "falcon_h1":
        return [["full_attention", "mamba2"] for _ in range(n)]
    if model_type in PURE_STATE:
        return [[PURE_STATE[model_type]] for _ in range(n)]
    pattern = cfg.get("hybrid_override_pattern")
    if pattern is not None:
        if not isinstance(pattern, str) or len(pattern) != n:
            raise ModelConfigError(
                ("model", "hybrid_override_pattern"), "model.pattern_length", n=n
            )
        chars = {"M": "mamba2", "*": "full_attention", "-": None, "E": None}
        out: list[list[str]] = []
        for i, ch in enumerate(pattern):
            if ch not in chars:
                _refuse(("hybrid_override_pattern", i), ch, i, model_type)
            slot = chars[ch]
            out.append([slot] if slot else [])
        return out
    lac = cfg.get("linear_attn_config")
    if model_type == "kimi_linear" or isinstance(lac, Mapping):
        return _kimi_slots(lac, n)
    for field in ("layer_types", "layers_block_type"):
        words = cfg.get(field)
        if words is None:
            continue
        if not isinstance(words, list) or len(words) != n:
            raise ModelConfigError(("model", field), "model.layer_strings_invalid", n=n)
        result: list[list[str]] = []
        for i, w in enumerate(words):
            slot = _word_slot(w, i, model_type, field)
            result.append([slot] if slot else [])
        return result
    if "attn_layer_indices" in cfg:
        idx = cfg.get("attn_layer_indices")
        if not isinstance(idx, list) or not all(isinstance(i, int) and 0 <= i < n for i in idx):
            raise ModelConfigError(
                ("model", "attn_layer_indices"), "model.layer_indices_invalid", n=n
            )
        mixer = _MAMBA_MIXER.get(model_type or "")
        if mixer is None:
            raise ModelConfigError(
                ("model", "model_type"),
                "model.attn_layer_indices_unknown_mixer",
                model_type=model_type,
            )
        chosen = set(idx)
        return [["full_attention"] if i in chosen else [mixer] for i in range(n)]
    if model_type == "jamba" or "attn_layer_period" in cfg:
        period = _int(cfg, "attn_layer_period") if "attn_layer_period" in cfg else 8
        offset = _int(cfg, "attn_layer_offset", lo=0) if "attn_layer_offset" in cfg else 4
        if offset >= period:
            raise ModelConfigError(
                ("model", "attn_layer_offset"),
                "model.attn_layer_offset_range",
                period=period,
                offset=offset,
            )
        return [["full_attention"] if i % period == offset else ["mamba1"] for i in range(n)]
    if model_type == "qwen3_next" or "full_attention_interval" in cfg:
        every = _int(cfg, "full_attention_interval") if "full_attention_interval" in cfg else 4
        return [["gdn"] if (i + 1) % every else ["full_attention"] for i in range(n)]
    raise ModelConfigError(
        ("model", "model_type"), "model.state_layers_unplaced", model_type=model_type
    )


def _kimi_slots(lac: object, n: int) -> list[list[str]]:
    if not isinstance(lac, Mapping):
        raise ModelConfigError(("model", "linear_attn_config"), "model.not_object")
    kda, full = lac.get("kda_layers"), lac.get("full_attn_layers")
    for key, val in (("kda_layers", kda), ("full_attn_layers", full)):
        if not isinstance(val, list) or not all(isinstance(i, int) and 1 <= i <= n for i in val):
            raise ModelConfigError(
                ("model", "linear_attn_config", key), "model.layer_numbers_invalid", n=n, val=val
            )
    assert isinstance(kda, list) and isinstance(full, list)
    kda_set = set(kda)
    missing = [i for i in range(1, n + 1) if i not in kda_set and i not in set(full)]
    if missing or kda_set & set(full):
        raise ModelConfigError(
            ("model", "linear_attn_config"),
            "model.kda_layers_cover",
        )
    # KimiLinearConfig.is_kda_layer: (layer_idx + 1) in kda_layers.
    return [["kda"] if i + 1 in kda_set else ["full_attention"] for i in range(n)]


# Transformers' config classes' Mamba chunk size where a config omits it (GraniteMoeHybridConfig,
# FalconH1Config, BambaConfig, Zamba2Config, Mamba2Config: 256; NemotronHConfig: 128).
_CHUNK_DEFAULTS = {
    "granitemoehybrid": 256, "falcon_h1": 256, "bamba": 256, "zamba2": 256, "mamba2": 256,
    "nemotron_h": 128,
}  # fmt: skip


def mamba_chunk_tokens(cfg: Mapping[str, Any], model_type: str | None) -> int | None:
    """vLLM's ModelConfig.get_mamba_chunk_size: `mamba_chunk_size`, else `chunk_size` (as the
    config class holds them), else None (vLLM: 2048, Mamba1 has no chunks)."""
    for key in ("mamba_chunk_size", "chunk_size"):
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 1 << 20:
            return value
    return _CHUNK_DEFAULTS.get(model_type or "")


def hybrid_layers(
    cfg: Mapping[str, Any], n: int, model_type: str | None, attention: AttentionFactory
) -> tuple[LayerSpec, ...] | None:
    """Cached layers in order (state and attention), or None when no layer keeps a state."""
    slots = _slots(cfg, n, model_type)
    if not any(s not in ATTENTION_WORDS for per in slots for s in per):
        return None
    made: dict[str, LayerSpec] = {}
    out: list[LayerSpec] = []
    for per in slots:
        for slot in per:
            spec = made.get(slot)
            if spec is None:
                spec = (
                    attention(slot)
                    if slot in ATTENTION_WORDS
                    else _mixer_spec(slot, cfg, model_type)
                )
                made[slot] = spec
            out.append(spec)
    if not any(not s.grows_with_context for s in out):
        return None
    return tuple(out)


__all__ = [
    "HYBRID_KEYS",
    "PURE_STATE",
    "QWEN3_5_TYPES",
    "STATE_MODEL_TYPES",
    "hybrid_layers",
    "is_hybrid",
    "mamba_chunk_tokens",
]
