"""A config.json read as transformers reads it: fields it omits take the default of
transformers' config class for its `model_type` (`planner.core.class_defaults`, generated from
transformers by scripts/class_defaults.py), and names in the class's `attribute_map` read
through to the field they are stored under. Explicit values, `null` included, are kept."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.core.class_defaults import ATTRIBUTE_MAP, DEFAULTS, TEXT_CONFIG


def class_of(cfg: Mapping[str, Any], wrapper_type: str | None = None) -> str | None:
    """The model type whose config class reads `cfg` (a wrapper's text sub-config class when
    the text_config names no type of its own), or None when the table has none."""
    own = cfg.get("model_type")
    if wrapper_type is not None and (own is None or own == wrapper_type):
        text = TEXT_CONFIG.get(wrapper_type)
        if text is not None:
            return text
    return own if isinstance(own, str) and own in DEFAULTS else None


def with_class_defaults(cfg: dict[str, Any], wrapper_type: str | None = None) -> dict[str, Any]:
    """`cfg` with its class's defaults under every key it omits (a new dict)."""
    kind = class_of(cfg, wrapper_type)
    if kind is None:
        return cfg
    out = dict(cfg)
    for public, stored in ATTRIBUTE_MAP.get(kind, {}).items():
        if public not in out and stored in out:
            out[public] = out[stored]
    # transformers 5.24 NemotronHConfig derives num_hidden_layers from layers_block_type's
    # length (newer Nemotron configs store no num_hidden_layers).
    if kind == "nemotron_h" and isinstance(out.get("layers_block_type"), list):
        out.setdefault("num_hidden_layers", len(out["layers_block_type"]))
    for key, value in DEFAULTS[kind].items():
        if key not in out:
            out[key] = value
    return out


__all__ = ["class_of", "with_class_defaults"]
