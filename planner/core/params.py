"""Parameter counts and weight bytes from a Hugging Face `config.json` object (pure).

The count walks the decoder module by module (attention, dense MLP, routed experts, shared
experts, router, norms, embeddings) with the layer rules the reference implementations use:

- which layers are mixture-of-experts: Llama-4 `moe_layers` / `interleave_moe_layer_step`
  (layers step-1, 2·step-1, …), DeepSeek/GLM `first_k_dense_replace` + `moe_layer_freq`,
  Qwen-MoE `decoder_sparse_step` + `mlp_only_layers`, else every layer;
- every routed expert counted once per MoE layer, shared experts counted once (DeepSeek
  `n_shared_experts × moe_intermediate_size`, Qwen2-MoE `shared_expert_intermediate_size`,
  Llama-4's one shared expert);
- multi-token-prediction layers (`num_nextn_predict_layers`) are reported apart and left out
  of the total: engines skip them unless speculative decoding is on, and the published totals
  (DeepSeek-V3 671 B) leave them out.

Bytes are sized as stored for `quantization_config` (fp8, fbgemm_fp8, AWQ/GPTQ int4 with group
scales, MXFP4, ModelOpt NVFP4/FP8, compressed-tensors); what a scheme leaves unquantized
(`modules_to_not_convert`, `ignore`, `exclude_modules`, routers, embeddings, norms) is sized at
the model dtype. fp32 checkpoints are sized at 2 bytes: engines serve them in 16-bit.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from planner.core.errors import ModelConfigError
from planner.core.model import text_config

LinearKind = Literal["attention", "mlp", "expert", "shared_expert", "router", "lm_head"]

_MLA_TYPES = {"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "kimi_vl"}
# Families whose published configs omit tie_word_embeddings but tie (HF default for them).
_TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3", "gemma3_text", "starcoder2"}
_QKV_BIAS_ALWAYS = {"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl", "gpt_oss", "mimo"}
# Routers with a learned correction bias per expert (DeepSeek-V3 noaux_tc routing and kin).
_ROUTER_BIAS = {"deepseek_v3", "kimi_k2", "glm4_moe", "minimax_m2"}
# gpt-oss biases its output projection too, whatever attention_bias says.
_O_BIAS_ALWAYS = {"gpt_oss"}
_FOUR_NORMS = {"gemma2", "gemma3", "gemma3_text"}
# Layer norms with a bias (two vectors per norm) instead of RMSNorm.
_BIASED_NORMS = {"starcoder2"}
# Q/K norms over the whole projection (all heads) rather than one head_dim vector each.
_FULL_QK_NORM = {"olmo2"}
_QK_NORM = {"qwen3", "qwen3_moe", "gemma3", "gemma3_text"}
# Two-matrix (non-gated) MLPs; every other family uses gate/up/down.
_NON_GATED = {"gpt2", "gpt_bigcode", "starcoder2", "falcon", "gpt_neox", "phi", "opt", "bloom"}
# Unquantized element size. fp32 is 2: engines serve fp32 checkpoints in 16-bit.
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 2, "float": 2}


@dataclass(frozen=True, slots=True)
class Linear:
    """One linear layer of the decoder (`count` identical copies, e.g. a layer's experts)."""

    name: str  # module path in the Hugging Face layout, e.g. model.layers.3.mlp.experts.0.up_proj
    kind: LinearKind
    in_features: int
    out_features: int
    count: int = 1
    bias: bool = False
    layer: int | None = None

    @property
    def parameters(self) -> int:
        return self.count * (
            self.in_features * self.out_features + (self.out_features if self.bias else 0)
        )


@dataclass(frozen=True, slots=True)
class Decoder:
    """The decoder's parameters as linears plus the unquantizable rest (embeddings, norms)."""

    linears: tuple[Linear, ...]
    embedding_parameters: int  # input embedding table (also the LM head when tied)
    other_parameters: int  # norms, attention sinks, router correction biases
    tied_embeddings: bool
    num_experts: int  # routed experts per MoE layer (0: dense)
    top_k: int
    num_shared_experts: int
    moe_layer_indices: tuple[int, ...]
    mtp_layers: int


@dataclass(frozen=True, slots=True)
class ParameterCounts:
    total: int  # every parameter the engine loads (MTP layers excluded)
    active_per_token: int  # total minus the routed experts a token does not use
    dense: int  # total minus all routed experts (attention, dense MLPs, shared experts, ...)
    embedding: int  # the input embedding table
    lm_head: int  # 0 when tied to the embedding
    expert: int  # one routed expert of one MoE layer (0 for dense models)
    num_experts: int
    top_k: int
    num_shared_experts: int
    moe_layers: int
    mtp: int  # parameters of multi-token-prediction layers (not in total)
    vision: int = 0  # vision encoder + projector of a multimodal repo (in total; estimate)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and self.moe_layers > 0

    @property
    def active_without_embedding_lookup(self) -> int:
        """Active parameters a decode step multiplies by: the input table is only indexed
        (a few rows), unless it doubles as the LM head."""
        return self.active_per_token - (self.embedding if self.lm_head else 0)


@dataclass(frozen=True, slots=True)
class WeightBytes:
    """Weight bytes as served, split the way a decode step reads them."""

    total: int
    embedding: int  # input table bytes (indexed, not streamed, unless tied)
    dense: int  # everything but routed experts, embedding table included
    expert: int  # one routed expert of one MoE layer
    num_experts: int
    top_k: int
    moe_layers: int
    tied_embeddings: bool
    vision: int = 0  # vision encoder bytes (in total and dense; not read by a text decode step)

    @property
    def dense_read(self) -> int:
        """Dense bytes one decode step streams: the input table is only indexed and the vision
        encoder does not run."""
        return self.dense - self.vision - (0 if self.tied_embeddings else self.embedding)

    @property
    def active(self) -> int:
        """Bytes one token reads: dense part plus top-k experts in every MoE layer."""
        return self.dense_read + self.moe_layers * min(self.top_k, self.num_experts) * self.expert

    @property
    def all_experts(self) -> int:
        """Bytes a step reads when every expert is touched (large batches)."""
        return self.dense_read + self.moe_layers * self.num_experts * self.expert

    def scaled_to(self, total_bytes: int) -> WeightBytes:
        """This split scaled to a measured total (e.g. a safetensors index's total_size)."""
        if self.total <= 0 or total_bytes == self.total:
            return self
        r = total_bytes / self.total
        return WeightBytes(
            total=total_bytes,
            embedding=round(self.embedding * r),
            dense=round(self.dense * r),
            expert=round(self.expert * r),
            num_experts=self.num_experts,
            top_k=self.top_k,
            moe_layers=self.moe_layers,
            tied_embeddings=self.tied_embeddings,
            vision=round(self.vision * r),
        )


# --- reading the config ---------------------------------------------------------------------


def _int(cfg: Mapping[str, Any], *keys: str, lo: int = 0, hi: int = 1 << 40) -> int | None:
    for key in keys:
        value = cfg.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ModelConfigError(("model", key), f"must be an integer, got {value!r}")
        if not lo <= value <= hi:
            raise ModelConfigError(("model", key), f"must be between {lo} and {hi}, got {value}")
        return value
    return None


def _need(cfg: Mapping[str, Any], *keys: str, hi: int = 1 << 24) -> int:
    value = _int(cfg, *keys, lo=1, hi=hi)
    if value is None:
        raise ModelConfigError(
            ("model", keys[0]), "is required to count the model's parameters (config.json field)"
        )
    return value


def _int_list(cfg: Mapping[str, Any], key: str) -> list[int] | None:
    value = cfg.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ModelConfigError(("model", key), "must be a list of layer indices")
    return list(value)


def _moe_layers(
    cfg: Mapping[str, Any], model_type: str, num_layers: int, experts: int
) -> list[int]:
    if experts <= 0:
        return []
    explicit = _int_list(cfg, "moe_layers")
    if explicit is not None and model_type in ("llama4", "llama4_text"):
        return sorted({i for i in explicit if 0 <= i < num_layers})
    step = _int(cfg, "interleave_moe_layer_step", lo=0, hi=num_layers)
    if step is not None and model_type in ("llama4", "llama4_text"):
        # transformers Llama4TextConfig: range(step - 1, num_layers, step); 0 means no MoE.
        return list(range(step - 1, num_layers, step)) if step > 0 else []
    flags = cfg.get("moe_layer_freq")
    if isinstance(flags, list):
        # MiniMax-M3 / MiMo-V2 publish one 0/1 flag per layer.
        if len(flags) != num_layers:
            raise ModelConfigError(
                ("model", "moe_layer_freq"), f"must be an integer or a list of {num_layers} flags"
            )
        return [i for i, flag in enumerate(flags) if flag]
    first_dense = _int(cfg, "first_k_dense_replace", hi=num_layers)
    freq = _int(cfg, "moe_layer_freq", lo=1, hi=num_layers)
    if first_dense is not None or (freq is not None and "n_routed_experts" in cfg):
        k, f = first_dense or 0, freq or 1
        return [i for i in range(num_layers) if i >= k and i % f == 0]
    sparse_step = _int(cfg, "decoder_sparse_step", lo=1, hi=num_layers)
    dense_only = set(_int_list(cfg, "mlp_only_layers") or [])
    if sparse_step is not None or dense_only:
        s = sparse_step or 1
        return [i for i in range(num_layers) if i not in dense_only and (i + 1) % s == 0]
    return list(range(num_layers))


def decoder(config: Mapping[str, Any]) -> Decoder:
    """The decoder of a config.json (its `text_config` for multimodal wrappers) as linears."""
    cfg = text_config(config)
    model_type = str(cfg.get("model_type") or "")
    num_layers = _need(cfg, "num_hidden_layers", hi=4096)
    hidden = _need(cfg, "hidden_size")
    vocab = _need(cfg, "vocab_size", hi=1 << 26)
    heads = _need(cfg, "num_attention_heads", hi=1 << 16)
    kv_heads = _int(cfg, "num_key_value_heads", "num_kv_heads", lo=1, hi=1 << 16) or heads
    head_dim = _int(cfg, "head_dim", lo=1, hi=1 << 16) or hidden // heads
    v_dim = _int(cfg, "v_head_dim", lo=1, hi=1 << 16) or head_dim
    tied = cfg.get("tie_word_embeddings")
    tied = bool(tied) if tied is not None else model_type in _TIED_BY_DEFAULT

    experts = _int(cfg, "num_local_experts", "num_experts", "n_routed_experts", hi=1 << 16) or 0
    top_k = _int(cfg, "num_experts_per_tok", "experts_per_token", "moe_topk", hi=1 << 16) or 0
    if experts and not top_k:
        raise ModelConfigError(
            ("model", "num_experts_per_tok"), "is required for a mixture-of-experts config"
        )
    moe_idx = _moe_layers(cfg, model_type, num_layers, experts)
    moe_set = set(moe_idx)
    llama4 = model_type in ("llama4", "llama4_text")
    gpt_oss = model_type == "gpt_oss"
    if llama4:
        expert_width = _need(cfg, "intermediate_size")
        dense_width = _int(cfg, "intermediate_size_mlp", lo=1) or expert_width
    else:
        expert_width = (
            _int(cfg, "moe_intermediate_size", lo=1) or _int(cfg, "intermediate_size", lo=1) or 0
        )
        dense_width = _int(cfg, "intermediate_size", lo=1) or 0
    shared_width = _int(cfg, "shared_expert_intermediate_size", lo=0) or 0
    n_shared = _int(cfg, "n_shared_experts", "num_shared_experts", hi=1 << 10) or 0
    if shared_width:
        n_shared = max(n_shared, 1)
    elif n_shared:
        shared_width = n_shared * expert_width  # DeepSeek: one MLP n_shared times as wide
    elif llama4 and experts:
        n_shared, shared_width = 1, expert_width

    linears: list[Linear] = []
    other = 0
    mla = _int(cfg, "kv_lora_rank", lo=1) is not None and (
        model_type in _MLA_TYPES or "qk_rope_head_dim" in cfg
    )
    any_bias = bool(cfg.get("use_bias"))  # Starcoder2: every linear has a bias
    qkv_bias = bool(cfg.get("attention_bias")) or any_bias or model_type in _QKV_BIAS_ALWAYS
    o_bias = (
        any_bias
        or model_type in _O_BIAS_ALWAYS
        or (bool(cfg.get("attention_bias")) and model_type not in ("glm4_moe", "glm4"))
    )
    mlp_mats = 2 if model_type in _NON_GATED else 3
    prefix = "model.layers"

    for i in range(num_layers):
        at = f"{prefix}.{i}.self_attn"
        if mla:
            linears.extend(_mla_linears(cfg, at, i, hidden, heads))
            q_rank = _int(cfg, "q_lora_rank", lo=1) or 0
            other += q_rank + _need(cfg, "kv_lora_rank")  # q_a / kv_a layer norms
        else:
            linears += [
                Linear(
                    f"{at}.q_proj", "attention", hidden, heads * head_dim, bias=qkv_bias, layer=i
                ),
                Linear(
                    f"{at}.k_proj", "attention", hidden, kv_heads * head_dim, bias=qkv_bias, layer=i
                ),
                Linear(
                    f"{at}.v_proj", "attention", hidden, kv_heads * v_dim, bias=qkv_bias, layer=i
                ),
                Linear(f"{at}.o_proj", "attention", heads * v_dim, hidden, bias=o_bias, layer=i),
            ]
            if cfg.get("qk_norm_type") == "per_layer" or model_type in _FULL_QK_NORM:
                other += (heads + kv_heads) * head_dim  # MiniMax: one norm over all heads
            elif model_type in _QK_NORM or (cfg.get("use_qk_norm") and not llama4):
                other += 2 * head_dim
            if gpt_oss:
                other += heads  # attention sinks
        norm_vectors = 2 if model_type in _BIASED_NORMS else 1
        other += (4 if model_type in _FOUR_NORMS else 2) * hidden * norm_vectors

        if i in moe_set:
            linears.extend(
                _moe_linears(cfg, model_type, i, hidden, experts, expert_width, shared_width)
            )
            if cfg.get("topk_method") == "noaux_tc" or model_type in _ROUTER_BIAS:
                other += experts  # e_score_correction_bias
        elif dense_width:
            mlp = f"{prefix}.{i}.mlp"
            mlp_bias = any_bias or bool(cfg.get("mlp_bias"))
            linears += [
                Linear(f"{mlp}.gate_proj", "mlp", hidden, dense_width, bias=mlp_bias, layer=i),
                Linear(f"{mlp}.up_proj", "mlp", hidden, dense_width, bias=mlp_bias, layer=i),
                Linear(f"{mlp}.down_proj", "mlp", dense_width, hidden, bias=mlp_bias, layer=i),
            ][3 - mlp_mats :]
    other += hidden * (2 if model_type in _BIASED_NORMS else 1)  # final norm
    if not tied:
        linears.append(Linear("lm_head", "lm_head", hidden, vocab))
    mtp = _int(cfg, "num_nextn_predict_layers", hi=64) or 0
    return Decoder(
        linears=tuple(linears),
        embedding_parameters=vocab * hidden,
        other_parameters=other,
        tied_embeddings=tied,
        num_experts=experts if moe_idx else 0,
        top_k=top_k if moe_idx else 0,
        num_shared_experts=n_shared if moe_idx else 0,
        moe_layer_indices=tuple(moe_idx),
        mtp_layers=mtp,
    )


def _mla_linears(cfg: Mapping[str, Any], at: str, i: int, hidden: int, heads: int) -> list[Linear]:
    kv_rank = _need(cfg, "kv_lora_rank")
    rope = _int(cfg, "qk_rope_head_dim") or 0
    nope = _int(cfg, "qk_nope_head_dim") or 0
    v_dim = _need(cfg, "v_head_dim")
    q_rank = _int(cfg, "q_lora_rank", lo=1)
    q_width = heads * (nope + rope)
    out: list[Linear] = []
    if q_rank:
        out += [
            Linear(f"{at}.q_a_proj", "attention", hidden, q_rank, layer=i),
            Linear(f"{at}.q_b_proj", "attention", q_rank, q_width, layer=i),
        ]
    else:
        out.append(Linear(f"{at}.q_proj", "attention", hidden, q_width, layer=i))
    out += [
        Linear(f"{at}.kv_a_proj_with_mqa", "attention", hidden, kv_rank + rope, layer=i),
        Linear(f"{at}.kv_b_proj", "attention", kv_rank, heads * (nope + v_dim), layer=i),
        Linear(f"{at}.o_proj", "attention", heads * v_dim, hidden, layer=i),
    ]
    return out


def _moe_linears(
    cfg: Mapping[str, Any],
    model_type: str,
    i: int,
    hidden: int,
    experts: int,
    width: int,
    shared_width: int,
) -> list[Linear]:
    if not width:
        raise ModelConfigError(
            ("model", "moe_intermediate_size"), "is required to size the experts of a MoE layer"
        )
    if model_type in ("mixtral", "minimax_m2", "minimax"):
        moe, names, router = f"model.layers.{i}.block_sparse_moe", ("w1", "w3", "w2"), "gate"
    elif model_type in ("llama4", "llama4_text"):
        moe, names, router = f"model.layers.{i}.feed_forward", ("gate", "up", "down"), "router"
    elif model_type == "gpt_oss":
        moe, names, router = f"model.layers.{i}.mlp", ("gate", "up", "down"), "router"
    else:
        moe, names, router = f"model.layers.{i}.mlp", ("gate_proj", "up_proj", "down_proj"), "gate"
    ex = f"{moe}.experts.0"
    if model_type == "gpt_oss":
        # Fused gate_up (h -> 2w) and down (w -> h), both with bias; router with bias.
        out = [
            Linear(f"{moe}.experts.gate_up_proj", "expert", hidden, 2 * width, experts, True, i),
            Linear(f"{moe}.experts.down_proj", "expert", width, hidden, experts, True, i),
            Linear(f"{moe}.{router}", "router", hidden, experts, bias=True, layer=i),
        ]
        return out
    out = [
        Linear(f"{ex}.{names[0]}", "expert", hidden, width, experts, layer=i),
        Linear(f"{ex}.{names[1]}", "expert", hidden, width, experts, layer=i),
        Linear(f"{ex}.{names[2]}", "expert", width, hidden, experts, layer=i),
        Linear(f"{moe}.{router}", "router", hidden, experts, layer=i),
    ]
    if shared_width:
        sh = (
            f"{moe}.shared_expert"
            if model_type in ("qwen2_moe", "llama4", "llama4_text")
            else (f"{moe}.shared_experts")
        )
        out += [
            Linear(f"{sh}.gate_proj", "shared_expert", hidden, shared_width, layer=i),
            Linear(f"{sh}.up_proj", "shared_expert", hidden, shared_width, layer=i),
            Linear(f"{sh}.down_proj", "shared_expert", shared_width, hidden, layer=i),
        ]
        if model_type == "qwen2_moe":
            out.append(Linear(f"{moe}.shared_expert_gate", "router", hidden, 1, layer=i))
    return out


def vision_parameters(config: Mapping[str, Any]) -> int:
    """Vision encoder + projector of a multimodal config (`vision_config`), 0 if none.

    A ViT count: patch embedding, position table, per layer Q/K/V/O and a two-matrix MLP with
    biases and two biased layer norms, then the projector into the text model. Exact for
    Llama-4's encoder (plus its pixel-shuffle adapter); an estimate for other encoders.
    """
    v = config.get("vision_config")
    if not isinstance(v, Mapping):
        return 0
    layers = _int(v, "num_hidden_layers", "depth", hi=1024) or 0
    h = _int(v, "hidden_size", "embed_dim", lo=1, hi=1 << 20)
    if not layers or h is None:
        return 0
    width = _int(v, "intermediate_size", lo=1) or 4 * h
    channels = _int(v, "num_channels", "in_chans", "in_channels", lo=1, hi=16) or 3
    patch = _int(v, "patch_size", "spatial_patch_size", lo=1, hi=1024) or 14
    image = _int(v, "image_size", lo=1, hi=1 << 16)
    per_layer = 4 * (h * h + h) + (h * width + width) + (width * h + h) + 4 * h
    total = layers * per_layer + channels * patch * patch * h
    if image:
        total += ((image // patch) ** 2 + 1) * h
    text_hidden = _int(text_config(config), "hidden_size", lo=1) or h
    if str(v.get("model_type")) == "llama4_vision_model":
        ratio = v.get("pixel_shuffle_ratio") or 0.5
        shuffled = round(h / (ratio * ratio))
        proj_in = _int(v, "projector_input_dim", lo=1) or text_hidden
        proj_out = _int(v, "projector_output_dim", lo=1) or proj_in
        out_dim = _int(v, "vision_output_dim", lo=1) or proj_out
        total += h + 4 * h  # class embedding, pre/post layer norms
        total += shuffled * proj_in + proj_in * proj_out + out_dim * text_hidden
    else:
        out_dim = _int(v, "out_hidden_size", "vision_output_dim", "projection_dim", lo=1) or h
        total += out_dim * text_hidden
    return total


def _mtp_parameters(cfg: Mapping[str, Any], dec: Decoder) -> int:
    """One MTP layer is a decoder layer (the last one's shape) plus its projection and norms."""
    if not dec.mtp_layers:
        return 0
    last = max((lin.layer for lin in dec.linears if lin.layer is not None), default=None)
    if last is None:
        return 0
    hidden = _need(text_config(cfg), "hidden_size")
    layer = sum(lin.parameters for lin in dec.linears if lin.layer == last)
    return dec.mtp_layers * (layer + 2 * hidden * hidden + 4 * hidden)


def parameter_counts(config: Mapping[str, Any]) -> ParameterCounts:
    """Parameter counts of a config.json: total, active per token, dense part, one expert."""
    dec = decoder(config)
    vision = vision_parameters(config)
    total = (
        dec.embedding_parameters
        + dec.other_parameters
        + sum(x.parameters for x in dec.linears)
        + vision
    )
    expert_params = _one_expert(dec, lambda lin: lin.parameters // lin.count)
    moe_layers = len(dec.moe_layer_indices)
    routed = moe_layers * dec.num_experts * expert_params
    lm_head = sum(x.parameters for x in dec.linears if x.kind == "lm_head")
    return ParameterCounts(
        total=total,
        active_per_token=total
        - vision
        - moe_layers * (dec.num_experts - dec.top_k) * expert_params,
        dense=total - routed,
        embedding=dec.embedding_parameters,
        lm_head=lm_head,
        expert=expert_params,
        num_experts=dec.num_experts,
        top_k=dec.top_k,
        num_shared_experts=dec.num_shared_experts,
        moe_layers=moe_layers,
        mtp=_mtp_parameters(config, dec),
        vision=vision,
    )


def _one_expert(dec: Decoder, size: Any) -> int:
    """Size of one routed expert in the first MoE layer (every MoE layer is alike)."""
    if not dec.moe_layer_indices:
        return 0
    first = dec.moe_layer_indices[0]
    return int(sum(size(x) for x in dec.linears if x.kind == "expert" and x.layer == first))


# --- bytes as stored ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Scheme:
    """How one linear's weight is stored: bits per element plus scale/zero bytes."""

    bits: int
    group: int | None  # elements along in_features sharing a scale; None: per output channel
    scale_bytes: float
    zero_bytes: float = 0.0  # per group (asymmetric int schemes)
    block: tuple[int, int] | None = None  # 2-D block scales (out, in), DeepSeek fp8
    per_tensor_bytes: int = 0  # global scales (NVFP4 weight_scale_2 etc.)
    per_in_feature_bytes: int = 0  # GPTQ g_idx

    def linear_bytes(self, lin: Linear) -> float:
        n_in, n_out = lin.in_features, lin.out_features
        weight = n_in * n_out * self.bits / 8
        if self.block is not None:
            bo, bi = self.block
            scales = -(-n_out // bo) * -(-n_in // bi) * self.scale_bytes
        elif self.group is None:
            scales = n_out * (self.scale_bytes + self.zero_bytes)
        elif self.group <= 0:
            scales = self.scale_bytes + self.zero_bytes  # one per tensor
        else:
            groups = -(-n_in // self.group) * n_out
            scales = groups * (self.scale_bytes + self.zero_bytes)
        return lin.count * (
            weight + scales + self.per_tensor_bytes + self.per_in_feature_bytes * n_in
        )


def _matches(name: str, kind: LinearKind, patterns: Sequence[str]) -> bool:
    for raw in patterns:
        p = str(raw)
        if p.startswith("re:"):
            if re.match(p[3:], name):
                return True
            continue
        if p == "Linear":
            continue
        if p.endswith("Attention") and kind == "attention":
            return True  # a class name (Llama4TextAttention)
        if any(ch in p for ch in "*?["):
            if fnmatchcase(name, p) or fnmatchcase(name, p + ".*"):
                return True
            continue
        # transformers' modules_to_not_convert: a name fragment matched on dotted boundaries.
        if (
            name == p
            or name.endswith("." + p)
            or f".{p}." in f".{name}."
            or name.startswith(p + ".")
        ):
            return True
    return False


def _compressed_scheme(group_cfg: Mapping[str, Any], fmt: str, model_bytes: int) -> _Scheme | None:
    w = group_cfg.get("weights")
    if not isinstance(w, Mapping):
        return None
    bits = int(w.get("num_bits") or 16)
    strategy = str(w.get("strategy") or "tensor")
    kind = str(w.get("type") or "int")
    group_size = w.get("group_size")
    zero = 0.0 if w.get("symmetric", True) else bits / 8
    if "nvfp4" in fmt or (kind == "float" and bits == 4):
        return _Scheme(4, int(group_size or 16), 1.0, per_tensor_bytes=4)
    if strategy == "block":
        bs = w.get("block_structure") or [128, 128]
        return _Scheme(bits, None, model_bytes, block=(int(bs[0]), int(bs[1])))
    if strategy in ("group", "tensor_group"):
        return _Scheme(bits, int(group_size or 128), model_bytes, zero_bytes=zero)
    if strategy == "channel":
        return _Scheme(bits, None, model_bytes, zero_bytes=zero)
    return _Scheme(bits, 0, 4.0)


def _schemes(
    cfg: Mapping[str, Any], model_bytes: int
) -> Iterator[tuple[Sequence[str] | None, _Scheme | None, Sequence[str], set[LinearKind]]]:
    """(targets or None for all, scheme, ignore patterns, kinds quantized) per scheme group."""
    q = cfg.get("quantization_config")
    if q is None:
        return
    if not isinstance(q, Mapping):
        raise ModelConfigError(("model", "quantization_config"), "must be an object")
    method = str(q.get("quant_method") or "").lower()
    skip = list(q.get("modules_to_not_convert") or q.get("ignored_layers") or [])
    body: set[LinearKind] = {"attention", "mlp", "expert", "shared_expert"}
    if method == "fp8":
        block = q.get("weight_block_size")
        if block:
            scheme = _Scheme(8, None, 4.0, block=(int(block[0]), int(block[1])))
        else:
            scheme = _Scheme(8, 0, 4.0)
        yield None, scheme, skip, body
    elif method == "fbgemm_fp8":
        yield None, _Scheme(8, None, 4.0), skip, body
    elif method in ("awq", "gptq"):
        bits = int(q.get("bits") or q.get("w_bit") or 4)
        group = int(q.get("group_size") or q.get("q_group_size") or 128)
        g = None if group == -1 else group
        if method == "awq":
            scheme = _Scheme(bits, g, 2.0, zero_bytes=bits / 8 if q.get("zero_point", True) else 0)
        else:
            scheme = _Scheme(bits, g, 2.0, zero_bytes=bits / 8, per_in_feature_bytes=4)
        yield None, scheme, skip, body
    elif method == "mxfp4":
        # transformers/vLLM MXFP4: only the routed experts; e8m0 scale per 32 elements.
        yield None, _Scheme(4, 32, 1.0), skip, {"expert"}
    elif method == "modelopt":
        algo = str(q.get("quant_algo") or "").upper()
        excl = list(q.get("exclude_modules") or q.get("ignore") or skip)
        if algo == "NVFP4":
            yield (
                None,
                _Scheme(4, int(q.get("group_size") or 16), 1.0, per_tensor_bytes=8),
                excl,
                body,
            )
        elif algo == "FP8":
            yield None, _Scheme(8, 0, 4.0, per_tensor_bytes=4), excl, body
        else:
            raise ModelConfigError(
                ("model", "quantization_config", "quant_algo"),
                f"ModelOpt quant_algo {algo or 'missing'!r} is not sized (NVFP4 and FP8 are); "
                "set weights_bytes to the checkpoint size",
            )
    elif method == "compressed-tensors":
        fmt = str(q.get("format") or "")
        ignore = list(q.get("ignore") or [])
        groups = q.get("config_groups") or {}
        if not isinstance(groups, Mapping) or not groups:
            raise ModelConfigError(
                ("model", "quantization_config", "config_groups"),
                "compressed-tensors config without config_groups cannot be sized",
            )
        for group_cfg in groups.values():
            if not isinstance(group_cfg, Mapping):
                continue
            targets = [str(t) for t in group_cfg.get("targets") or ["Linear"]]
            ct_scheme = _compressed_scheme(group_cfg, fmt, model_bytes)
            all_linear: set[LinearKind] = {*body, "lm_head", "router"}
            yield (None if "Linear" in targets else targets), ct_scheme, ignore, all_linear
    else:
        raise ModelConfigError(
            ("model", "quantization_config", "quant_method"),
            f"quantization {method or 'without quant_method'!r} is not sized (fp8, fbgemm_fp8, "
            "awq, gptq, mxfp4, modelopt, compressed-tensors are); set weights_bytes to the "
            "checkpoint size",
        )


def _model_dtype_bytes(cfg: Mapping[str, Any]) -> int:
    raw = cfg.get("torch_dtype", cfg.get("dtype"))
    if raw is None:
        return 2
    return _DTYPE_BYTES.get(str(raw).removeprefix("torch.").lower(), 2)


def weight_bytes(config: Mapping[str, Any]) -> WeightBytes:
    """Weight bytes as served: quantized linears as stored, the rest at the model dtype."""
    dec = decoder(config)
    inner = text_config(config)
    model_bytes = _model_dtype_bytes(inner)
    # quantization_config sits at the top level of multimodal configs.
    qcfg = config if "quantization_config" in config else inner
    schemes = list(_schemes(qcfg, model_bytes))

    def linear_bytes(lin: Linear) -> float:
        for targets, scheme, ignore, kinds in schemes:
            if scheme is None or lin.kind not in kinds:
                continue
            if targets is not None and not _matches(lin.name, lin.kind, targets):
                continue
            if _matches(lin.name, lin.kind, ignore):
                continue
            bias = lin.count * lin.out_features * model_bytes if lin.bias else 0
            return scheme.linear_bytes(lin) + bias
        return float(lin.parameters * model_bytes)

    sizes = [(lin, linear_bytes(lin)) for lin in dec.linears]
    embedding = dec.embedding_parameters * model_bytes
    vision = vision_parameters(config) * model_bytes  # encoders stay unquantized
    total = embedding + vision + dec.other_parameters * model_bytes + sum(b for _, b in sizes)
    moe_layers = len(dec.moe_layer_indices)
    expert = 0.0
    if moe_layers:
        first = dec.moe_layer_indices[0]
        expert = sum(
            b / lin.count for lin, b in sizes if lin.kind == "expert" and lin.layer == first
        )
    routed = sum(b for lin, b in sizes if lin.kind == "expert")
    return WeightBytes(
        total=round(total),
        embedding=embedding,
        dense=round(total - routed),
        expert=round(expert),
        num_experts=dec.num_experts,
        top_k=dec.top_k,
        moe_layers=moe_layers,
        tied_embeddings=dec.tied_embeddings,
        vision=vision,
    )


__all__ = [
    "Decoder",
    "Linear",
    "ParameterCounts",
    "WeightBytes",
    "decoder",
    "parameter_counts",
    "vision_parameters",
    "weight_bytes",
]
