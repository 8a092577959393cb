"""Per-layer blocks of a hybrid decoder for the parameter walk (pure): which mixer each layer
runs (attention or a state mixer) and which feed-forward (dense MLP, MoE, none), and a state
mixer's parameters as transformers' modules hold them.

- Nemotron-H (`hybrid_override_pattern`): one block per layer: `M` a Mamba2 mixer, `*`
  attention, `-` a two-matrix MLP, `E` a MoE; one norm per block (NemotronHBlock).
- Jamba: attention on `i % attn_layer_period == attn_layer_offset`, else a Mamba mixer, every
  layer with a feed-forward that is a MoE on `i % expert_layer_period == expert_layer_offset`
  and a gated MLP elsewhere (JambaConfig.layers_num_experts).

Other hybrids are walked as attention + MLP per layer still.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from planner.core.model_hybrid import _slots

Block = tuple[str | None, str | None]  # (mixer: "attention" or a state mixer, ffn: mlp/moe)
# (module name, in_features, out_features, bias) of a mixer's linears.
MixerLinear = tuple[str, int, int, bool]

_STATE_WALKED = frozenset({"nemotron_h", "jamba"})


def _get(cfg: Mapping[str, Any], key: str, default: int) -> int:
    value = cfg.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def layer_blocks(cfg: Mapping[str, Any], model_type: str, n: int) -> list[Block] | None:
    """Each layer's (mixer, feed-forward), or None where every layer is attention + MLP."""
    if model_type not in _STATE_WALKED:
        return None
    if model_type == "nemotron_h":
        pattern = cfg.get("hybrid_override_pattern")
        if not isinstance(pattern, str):
            return None
        _slots(cfg, n, model_type)  # the pattern is checked where the KV layers are read
        kinds: dict[str, Block] = {
            "M": ("mamba2", None),
            "*": ("attention", None),
            "-": (None, "mlp"),
            "E": (None, "moe"),
        }
        return [kinds[ch] for ch in pattern]
    mixers = _slots(cfg, n, model_type)
    period = _get(cfg, "expert_layer_period", 2)
    offset = _get(cfg, "expert_layer_offset", 1)
    return [
        (
            "attention" if "full_attention" in per else per[0] if per else None,
            "moe" if i % period == offset else "mlp",
        )
        for i, per in enumerate(mixers)
    ]


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


__all__ = ["Block", "layer_blocks", "mixer_parameters", "norms_per_layer"]
