"""Vision encoder + projector parameters of a multimodal config's `vision_config` (pure).

Exact, as transformers 5.24's modules hold them, for:

* Qwen3.5 / Qwen3.6 (`Qwen3_5VisionModel`): a Conv3d patch embedding with bias over
  temporal_patch_size x patch_size^2, a learned `pos_embed` of num_position_embeddings rows,
  `depth` blocks (two biased LayerNorms, a fused biased qkv, proj, a biased fc1/fc2 MLP) and one
  patch merger (LayerNorm over hidden_size, fc1 over the 2x2-merged width, fc2 into
  out_hidden_size, both biased); no deepstack mergers.
* Qwen3-VL (`Qwen3VLVisionModel`, also the MoE's): the same encoder and merger, plus one
  deepstack merger per `deepstack_visual_indexes` entry, whose LayerNorm is over the merged
  width (`use_postshuffle_norm`).
* Gemma-3's SigLIP (`SiglipVisionTransformer` + `Gemma3MultiModalProjector`): a biased patch
  convolution, (image_size / patch_size)^2 positions (no class token), the encoder layers,
  `post_layernorm`, the attention-pooling head only where `vision_use_head` is true, then the
  projector's matrix (vision hidden x text hidden) and its RMSNorm.
* Llama-4's encoder plus its pixel-shuffle adapter.

Other encoders get a generic ViT count (an estimate).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.core.errors import ModelConfigError
from planner.core.model import text_config

# The vision_config model_type as transformers writes it (later releases add "_vision").
_QWEN3_5_VISION = {"qwen3_5", "qwen3_5_moe", "qwen3_5_vision", "qwen3_5_moe_vision"}
_QWEN3_VL_VISION = {"qwen3_vl", "qwen3_vl_moe", "qwen3_vl_vision", "qwen3_vl_moe_vision"}


def config_int(cfg: Mapping[str, Any], *keys: str, lo: int = 0, hi: int = 1 << 40) -> int | None:
    """The first of `keys` the config sets, checked to be an integer in [lo, hi] (also used by
    planner.core.layout, which imports this module)."""
    for key in keys:
        value = cfg.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ModelConfigError(("model", key), "input.not_integer", value=value)
        if not lo <= value <= hi:
            raise ModelConfigError(
                ("model", key), "input.value_out_of_range", lo=lo, hi=hi, value=value
            )
        return value
    return None


def _encoder_layer(h: int, width: int) -> int:
    """Q/K/V/O with biases, a biased two-matrix MLP, two biased LayerNorms."""
    return 4 * (h * h + h) + (h * width + width) + (width * h + h) + 4 * h


def _qwen3_5(v: Mapping[str, Any], text_hidden: int) -> int:
    # Qwen3_5VisionConfig's defaults for what a config leaves out.
    depth = config_int(v, "depth", hi=1024) or 27
    h = config_int(v, "hidden_size", lo=1, hi=1 << 20) or 1152
    width = config_int(v, "intermediate_size", lo=1) or 4304
    channels = config_int(v, "in_channels", lo=1, hi=16) or 3
    patch = config_int(v, "patch_size", lo=1, hi=1024) or 16
    temporal = config_int(v, "temporal_patch_size", lo=1, hi=64) or 2
    merge = config_int(v, "spatial_merge_size", lo=1, hi=64) or 2
    positions = config_int(v, "num_position_embeddings", lo=1, hi=1 << 24) or 2304
    out = config_int(v, "out_hidden_size", lo=1) or text_hidden
    merged = h * merge * merge
    total = channels * temporal * patch * patch * h + h + positions * h
    total += depth * _encoder_layer(h, width)
    total += 2 * h + merged * merged + merged + merged * out + out
    deepstack = v.get("deepstack_visual_indexes") or ()
    if str(v.get("model_type") or "") in _QWEN3_VL_VISION and isinstance(deepstack, list):
        total += len(deepstack) * (2 * merged + merged * merged + merged + merged * out + out)
    return total


def _siglip(v: Mapping[str, Any], text_hidden: int) -> int:
    # SiglipVisionConfig's defaults for what a config leaves out.
    layers = config_int(v, "num_hidden_layers", hi=1024) or 12
    h = config_int(v, "hidden_size", lo=1, hi=1 << 20) or 768
    width = config_int(v, "intermediate_size", lo=1) or 3072
    channels = config_int(v, "num_channels", lo=1, hi=16) or 3
    patch = config_int(v, "patch_size", lo=1, hi=1024) or 16
    image = config_int(v, "image_size", lo=1, hi=1 << 16) or 224
    total = channels * patch * patch * h + h + (image // patch) ** 2 * h
    total += layers * _encoder_layer(h, width) + 2 * h  # post_layernorm
    if v.get("vision_use_head", True) is not False:
        # SiglipMultiheadAttentionPoolingHead: probe, nn.MultiheadAttention, LayerNorm, MLP.
        total += h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (h * width + width)
        total += width * h + h
    return total + h * text_hidden + h  # mm_input_projection_weight, mm_soft_emb_norm


def vision_parameters(config: Mapping[str, Any]) -> int:
    """Vision encoder + projector of a multimodal config (`vision_config`), 0 if none."""
    v = config.get("vision_config")
    if not isinstance(v, Mapping):
        return 0
    text_hidden = config_int(text_config(config), "hidden_size", lo=1)
    vision_type = str(v.get("model_type") or "")
    if text_hidden is not None and vision_type in _QWEN3_5_VISION | _QWEN3_VL_VISION:
        return _qwen3_5(v, text_hidden)
    if (
        text_hidden is not None
        and vision_type == "siglip_vision_model"
        and config.get("model_type") == "gemma3"
    ):
        return _siglip(v, text_hidden)
    layers = config_int(v, "num_hidden_layers", "depth", hi=1024) or 0
    h = config_int(v, "hidden_size", "embed_dim", lo=1, hi=1 << 20)
    if not layers or h is None:
        return 0
    text_hidden = text_hidden or h
    width = config_int(v, "intermediate_size", lo=1) or 4 * h
    channels = config_int(v, "num_channels", "in_chans", "in_channels", lo=1, hi=16) or 3
    patch = config_int(v, "patch_size", "spatial_patch_size", lo=1, hi=1024) or 14
    image = config_int(v, "image_size", lo=1, hi=1 << 16)
    total = layers * _encoder_layer(h, width) + channels * patch * patch * h
    if image:
        total += ((image // patch) ** 2 + 1) * h
    if vision_type == "llama4_vision_model":
        ratio = v.get("pixel_shuffle_ratio") or 0.5
        shuffled = round(h / (ratio * ratio))
        proj_in = config_int(v, "projector_input_dim", lo=1) or text_hidden
        proj_out = config_int(v, "projector_output_dim", lo=1) or proj_in
        out_dim = config_int(v, "vision_output_dim", lo=1) or proj_out
        total += h + 4 * h  # class embedding, pre/post layer norms
        total += shuffled * proj_in + proj_in * proj_out + out_dim * text_hidden
    else:
        out_dim = config_int(v, "out_hidden_size", "vision_output_dim", "projection_dim", lo=1) or h
        total += out_dim * text_hidden
    return total


__all__ = ["vision_parameters"]
