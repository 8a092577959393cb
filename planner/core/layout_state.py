"""Per-layer blocks of a hybrid decoder for the parameter walk (pure): which mixer each layer
runs (attention or a state mixer) and which feed-forward (dense MLP, MoE, none), and a state
mixer's parameters as transformers' modules hold them.

- Nemotron-H (`hybrid_override_pattern`, or `layers_block_type` words: mamba, attention, mlp,
  moe): one block per layer: `M` a Mamba2 mixer, `*` attention, `-` a two-matrix MLP, `E` a
  MoE; one norm per block (NemotronHBlock).
- Jamba: attention on `i % attn_layer_period == attn_layer_offset`, else a Mamba mixer, every
  layer with a feed-forward that is a MoE on `i % expert_layer_period == expert_layer_offset`
  and a gated MLP elsewhere (JambaConfig.layers_num_experts).
- granite-4.0-h (granitemoehybrid): a Mamba2 mixer or attention per `layer_types`, every layer
  with its MoE and shared MLP.
- Falcon-H1: attention and a Mamba2 mixer side by side on every layer, then a gated MLP.
- LFM2: a short convolution or attention per `layer_types`, every layer with a gated MLP whose
  width Lfm2MLP adjusts (`block_auto_adjust_ff_dim`).

- Qwen3-Next / Qwen3.5: a gated DeltaNet or gated attention (q_proj twice as wide) per layer.
- Kimi-Linear: a Kimi delta attention (KimiLinearDeltaAttention) or MLA per
  `linear_attn_config`, a dense MLP before `first_k_dense_replace` and a MoE after
  (KimiLinearConfig.mlp_layer_types).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from planner.core.model_hybrid import _slots

# (mixers: "attention" and/or state mixers, feed-forward: "mlp", "moe" or None)
Block = tuple[tuple[str, ...], str | None]
# (module name, in_features, out_features, bias) of a mixer's linears.
MixerLinear = tuple[str, int, int, bool]

_GDN = frozenset({"qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text"})
_STATE_WALKED = frozenset(
    {"nemotron_h", "jamba", "granitemoehybrid", "falcon_h1", "lfm2", "kimi_linear", *_GDN}
)


def _get(cfg: Mapping[str, Any], key: str, default: int) -> int:
    value = cfg.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def layer_blocks(cfg: Mapping[str, Any], model_type: str, n: int) -> list[Block] | None:
    """Each layer's (mixer, feed-forward), or None where every layer is attention + MLP."""
    if model_type not in _STATE_WALKED:
        return None
    if model_type == "nemotron_h":
        pattern = cfg.get("hybrid_override_pattern")
        words = cfg.get("layers_block_type")
        if not isinstance(pattern, str) and not isinstance(words, list):
            return None
        _slots(cfg, n, model_type)  # the pattern / words are checked where KV layers are read
        kinds: dict[str, Block] = {
            "M": (("mamba2",), None),
            "*": (("attention",), None),
            "-": ((), "mlp"),
            "E": ((), "moe"),
        }
        if isinstance(pattern, str):
            return [kinds[ch] for ch in pattern]
        # transformers 5.24 NemotronHConfig.layers_block_type, legacy words remapped
        # (configuration_utils._LEGACY_LAYER_TYPE_REMAP: mamba, attention).
        letter = {"mamba": "M", "linear_attention": "M", "attention": "*"}
        letter |= {"full_attention": "*", "mlp": "-", "moe": "E"}
        return [kinds[letter[str(w)]] for w in words or []]
    slots = _slots(cfg, n, model_type)
    mixers = [tuple("attention" if s.endswith("attention") else s for s in per) for per in slots]
    if model_type == "jamba":
        period = _get(cfg, "expert_layer_period", 2)
        offset = _get(cfg, "expert_layer_offset", 1)
        return [(m, "moe" if i % period == offset else "mlp") for i, m in enumerate(mixers)]
    if model_type == "kimi_linear":
        # KimiLinearConfig: "dense" below first_k_dense_replace (1 when absent), else "sparse".
        first_dense = _get(cfg, "first_k_dense_replace", 1)
        return [(m, "moe" if i >= first_dense else "mlp") for i, m in enumerate(mixers)]
    experts = _get(cfg, "num_local_experts", 0) or _get(cfg, "num_experts", 0)
    ffn = "moe" if model_type in ("granitemoehybrid", *_GDN) and experts else "mlp"
    return [(m, ffn) for m in mixers]


def gated_query(cfg: Mapping[str, Any], model_type: str) -> int:
    """2 where attention's q_proj also yields the output gate (Qwen3-Next, Qwen3.5)."""
    return 2 if model_type in _GDN and cfg.get("attn_output_gate", True) is not False else 1


def mlp_width(cfg: Mapping[str, Any], model_type: str, width: int) -> int:
    """The dense MLP's width as the model builds it (Lfm2MLP: 2/3 of it, times
    block_ffn_dim_multiplier, rounded up to block_multiple_of)."""
    if model_type != "lfm2" or cfg.get("block_auto_adjust_ff_dim") is False:
        return width
    out = int(2 * width / 3)
    factor = cfg.get("block_ffn_dim_multiplier")
    if isinstance(factor, int | float) and not isinstance(factor, bool):
        multiple = _get(cfg, "block_multiple_of", 256)
        out = multiple * (-(-int(factor * out) // multiple))
    return out


def norms_per_layer(model_type: str) -> int:
    """RMSNorm vectors of width hidden_size per decoder layer."""
    return 1 if model_type == "nemotron_h" else 2


def mixer_parameters(
    mixer: str, cfg: Mapping[str, Any], model_type: str, hidden: int
) -> tuple[list[MixerLinear], int]:
    """A state mixer's linears and its other parameters (convolution, A, D, dt, norms)."""
    if mixer == "mamba2" and model_type == "nemotron_h":
        # NemotronHMamba2Mixer: in_proj -> [z, x, B, C, dt], depthwise conv over x, B, C.
        heads, head_dim = _get(cfg, "mamba_num_heads", 128), _get(cfg, "mamba_head_dim", 64)
        inner = heads * head_dim
        groups, state = _get(cfg, "n_groups", 8), _get(cfg, "ssm_state_size", 128)
        conv_dim = inner + 2 * groups * state
        kernel = _get(cfg, "conv_kernel", 4)
        bias = bool(cfg.get("use_bias"))
        conv_bias = cfg.get("use_conv_bias", True) is not False
        linears = [
            ("mixer.in_proj", hidden, inner + conv_dim + heads, bias),
            ("mixer.out_proj", inner, hidden, bias),
        ]
        other = conv_dim * kernel + (conv_dim if conv_bias else 0) + 3 * heads + inner
        return linears, other
    if mixer == "mamba2":
        # Mamba2Mixer of granite-4.0-h / Falcon-H1 (mamba_* fields); FalconH1 gates a norm
        # behind mamba_rms_norm, granite always has one.
        heads, head_dim = _get(cfg, "mamba_n_heads", 128), _get(cfg, "mamba_d_head", 64)
        expand = cfg.get("mamba_expand", 2)
        inner = _get(cfg, "mamba_d_ssm", 0) or (
            int(expand * hidden) if isinstance(expand, int | float) else heads * head_dim
        )
        groups, state = _get(cfg, "mamba_n_groups", 1), _get(cfg, "mamba_d_state", 128)
        conv_dim = inner + 2 * groups * state
        kernel = _get(cfg, "mamba_d_conv", 4)
        bias = bool(cfg.get("mamba_proj_bias"))
        conv_bias = cfg.get("mamba_conv_bias", True) is not False
        gated_norm = model_type != "falcon_h1" or bool(cfg.get("mamba_rms_norm"))
        linears = [
            ("mamba.in_proj", hidden, inner + conv_dim + heads, bias),
            ("mamba.out_proj", inner, hidden, bias),
        ]
        other = conv_dim * kernel + (conv_dim if conv_bias else 0) + 3 * heads
        return linears, other + (inner if gated_norm else 0)
    if mixer == "gdn":
        # Qwen3NextGatedDeltaNet: in_proj to q, k, v, z and b, a; a conv over q, k, v.
        nk, nv = _get(cfg, "linear_num_key_heads", 16), _get(cfg, "linear_num_value_heads", 32)
        dk, dv = _get(cfg, "linear_key_head_dim", 128), _get(cfg, "linear_value_head_dim", 128)
        key_dim, value_dim = nk * dk, nv * dv
        conv_dim = 2 * key_dim + value_dim
        linears = [
            ("linear_attn.in_proj_qkvz", hidden, conv_dim + value_dim, False),
            ("linear_attn.in_proj_ba", hidden, 2 * nv, False),
            ("linear_attn.out_proj", value_dim, hidden, False),
        ]
        kernel = _get(cfg, "linear_conv_kernel_dim", 4)
        return linears, conv_dim * kernel + 2 * nv + dv
    if mixer == "kda":
        # KimiLinearDeltaAttention: q/k/v, a depthwise conv over them (no bias), the forget
        # gate (f_a, f_b, dt_bias, A_log), b_proj, the output gate (g_a, g_b), o_norm, o_proj.
        lac = cfg.get("linear_attn_config")
        lac = lac if isinstance(lac, Mapping) else {}
        heads, head_dim = _get(lac, "num_heads", 32), _get(lac, "head_dim", 128)
        qkv = heads * head_dim
        kernel = _get(lac, "short_conv_kernel_size", 4)
        linears = [
            ("self_attn.q_proj", hidden, qkv, False),
            ("self_attn.k_proj", hidden, qkv, False),
            ("self_attn.v_proj", hidden, qkv, False),
            ("self_attn.forget_gate.f_a_proj", hidden, head_dim, False),
            ("self_attn.forget_gate.f_b_proj", head_dim, qkv, False),
            ("self_attn.b_proj", hidden, heads, False),
            ("self_attn.g_a_proj", hidden, head_dim, False),
            ("self_attn.g_b_proj", head_dim, qkv, False),
            ("self_attn.o_proj", qkv, hidden, False),
        ]
        return linears, 3 * qkv * kernel + qkv + heads + head_dim
    if mixer == "short_conv":
        # Lfm2ShortConv: in_proj -> [B, C, x], a depthwise conv of conv_L_cache, out_proj.
        bias = bool(cfg.get("conv_bias"))
        kernel = _get(cfg, "conv_L_cache", 3)
        linears = [
            ("conv.in_proj", hidden, 3 * hidden, bias),
            ("conv.out_proj", hidden, hidden, bias),
        ]
        return linears, hidden * kernel + (hidden if bias else 0)
    if mixer == "mamba1":
        # JambaMambaMixer: in_proj -> [x, z], x_proj -> [dt, B, C], dt_proj, A (inner x state).
        expand = cfg.get("mamba_expand", 2)
        inner = int(expand * hidden) if isinstance(expand, int | float) else 2 * hidden
        state, kernel = _get(cfg, "mamba_d_state", 16), _get(cfg, "mamba_d_conv", 4)
        rank = cfg.get("mamba_dt_rank", "auto")
        dt_rank = rank if isinstance(rank, int) else math.ceil(hidden / 16)
        proj_bias = bool(cfg.get("mamba_proj_bias"))
        conv_bias = cfg.get("mamba_conv_bias", True) is not False
        linears = [
            ("mamba.in_proj", hidden, 2 * inner, proj_bias),
            ("mamba.x_proj", inner, dt_rank + 2 * state, False),
            ("mamba.dt_proj", dt_rank, inner, True),
            ("mamba.out_proj", inner, hidden, proj_bias),
        ]
        other = inner * kernel + (inner if conv_bias else 0) + inner * state + inner
        other += dt_rank + 2 * state  # dt / B / C layer norms
        return linears, other
    raise AssertionError(mixer)  # pragma: no cover - layer_blocks names only these


__all__ = [
    "Block",
    "gated_query",
    "layer_blocks",
    "mixer_parameters",
    "mlp_width",
    "norms_per_layer",
]
