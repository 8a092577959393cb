"""The decoder of a Hugging Face `config.json` as linear layers plus the rest (pure).

One walk over the layers with the rules the reference implementations use: which layers are
mixture-of-experts (Llama-4 `moe_layers` / `interleave_moe_layer_step`, DeepSeek/GLM
`first_k_dense_replace` + `moe_layer_freq`, Qwen-MoE `decoder_sparse_step` + `mlp_only_layers`,
else every layer), every routed expert once per MoE layer, shared experts once (DeepSeek
`n_shared_experts × moe_intermediate_size`, Qwen2-MoE `shared_expert_intermediate_size`,
Llama-4's one), MLA projections, biases and norms as each family has them. `planner.core.params`
counts parameters from it, `planner.core.quant` sizes its bytes as stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from planner.core.errors import ModelConfigError
from planner.core.gemma4 import GEMMA4_TYPES, gemma4_layer_rows
from planner.core.layout_state import (
    gated_query,
    layer_blocks,
    mixer_parameters,
    mlp_width,
    norms_per_layer,
)
from planner.core.model import text_config
from planner.core.vision import config_int as _int
from planner.core.vision import vision_parameters

LinearKind = Literal["attention", "mlp", "expert", "shared_expert", "router", "lm_head"]

_MLA_TYPES = {"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "kimi_vl"}
# Families whose published configs omit tie_word_embeddings but tie (HF default for them).
_TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3", "gemma3_text", "starcoder2"}
_QKV_BIAS_ALWAYS = {"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl", "gpt_oss", "mimo"}
# Routers with a learned correction bias per expert (DeepSeek-V3 noaux_tc routing and kin).
_ROUTER_BIAS = {"deepseek_v3", "kimi_k2", "glm4_moe", "minimax_m2", "kimi_linear", "nemotron_h"}
# gpt-oss biases its output projection too, whatever attention_bias says.
_O_BIAS_ALWAYS = {"gpt_oss"}
_FOUR_NORMS = {"gemma2", "gemma3", "gemma3_text", *GEMMA4_TYPES}
# Layer norms with a bias (two vectors per norm) instead of RMSNorm.
_BIASED_NORMS = {"starcoder2"}
# Q/K norms over the whole projection (all heads) rather than one head_dim vector each.
_FULL_QK_NORM = {"olmo2"}
# A sigmoid gate (hidden -> 1) on the shared expert, named shared_expert (Qwen2-MoE and kin).
_SHARED_GATE = {"qwen2_moe", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text"}
_QK_NORM = {
    "qwen3", "qwen3_moe", "gemma3", "gemma3_text", "lfm2", "qwen3_next", "qwen3_5", "qwen3_5_moe",
    "qwen3_5_text", "qwen3_5_moe_text", "qwen3_vl", "qwen3_vl_moe", "qwen3_vl_text",
    "qwen3_vl_moe_text",
}  # fmt: skip
# Two-matrix (non-gated) MLPs; every other family uses gate/up/down.
_NON_GATED = {
    "gpt2", "gpt_bigcode", "starcoder2", "falcon", "gpt_neox", "phi", "opt", "bloom", "nemotron_h"
}  # fmt: skip


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


# --- reading the config ---------------------------------------------------------------------


def _need(cfg: Mapping[str, Any], *keys: str, hi: int = 1 << 24) -> int:
    value = _int(cfg, *keys, lo=1, hi=hi)
    if value is None:
        raise ModelConfigError(("model", keys[0]), "input.required_for_parameters")
    return value


def _int_list(cfg: Mapping[str, Any], key: str) -> list[int] | None:
    value = cfg.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ModelConfigError(("model", key), "input.not_layer_indices")
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
                ("model", "moe_layer_freq"), "input.not_integer_or_flags", num_layers=num_layers
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
    top_k_keys = ("num_experts_per_tok", "experts_per_token", "moe_topk", "top_k_experts")
    top_k = _int(cfg, *top_k_keys, hi=1 << 16) or 0
    if experts and not top_k:
        raise ModelConfigError(("model", "num_experts_per_tok"), "input.required_for_moe")
    moe_idx = _moe_layers(cfg, model_type, num_layers, experts)
    # Hybrids whose layers hold a state mixer or no feed-forward (planner.core.layout_state).
    blocks = layer_blocks(cfg, model_type, num_layers)
    if blocks is not None:
        moe_idx = [i for i, (_, ffn) in enumerate(blocks) if ffn == "moe"] if experts else []
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
        dense_width = mlp_width(cfg, model_type, _int(cfg, "intermediate_size", lo=1) or 0)
    # granite's shared MLP is `shared_intermediate_size` (GraniteMoeHybrid/SharedConfig),
    # Nemotron-H's `moe_shared_expert_intermediate_size` (NemotronHConfig).
    shared_keys = (
        "shared_expert_intermediate_size",
        "shared_intermediate_size",
        "moe_shared_expert_intermediate_size",
    )
    shared_width = _int(cfg, *shared_keys, lo=0) or 0
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
    q_gate = gated_query(cfg, model_type)
    prefix = "model.layers"

    for i in range(num_layers):
        at = f"{prefix}.{i}.self_attn"
        mixers, ffn = blocks[i] if blocks is not None else (("attention",), "ffn")
        for mixer in mixers:
            if mixer == "attention":
                continue
            mixer_linears, mixer_other = mixer_parameters(mixer, cfg, model_type, hidden)
            linears += [
                Linear(f"{prefix}.{i}.{name}", "attention", n_in, n_out, bias=b, layer=i)
                for name, n_in, n_out, b in mixer_linears
            ]
            other += mixer_other
        if "attention" not in mixers:
            pass
        elif mla:
            linears.extend(_mla_linears(cfg, at, i, hidden, heads))
            q_rank = _int(cfg, "q_lora_rank", lo=1) or 0
            other += q_rank + _need(cfg, "kv_lora_rank")  # q_a / kv_a layer norms
        elif model_type in GEMMA4_TYPES:
            moe = experts if i in moe_set else 0
            g, o = gemma4_layer_rows(cfg, i, hidden, heads, kv_heads, head_dim, dense_width, moe)
            linears += [Linear(n, kind, a, b, layer=i) for n, kind, a, b in g]
            other += o
        else:
            linears += [
                Linear(
                    f"{at}.q_proj",
                    "attention",
                    hidden,
                    heads * head_dim * q_gate,
                    bias=qkv_bias,
                    layer=i,
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
        norms = norms_per_layer(model_type) if blocks else 4 if model_type in _FOUR_NORMS else 2
        other += norms * hidden * norm_vectors

        if ffn is None:
            pass
        elif i in moe_set:
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
        raise ModelConfigError(("model", "moe_intermediate_size"), "input.required_for_experts")
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
    gated = model_type not in _NON_GATED  # Nemotron-H's experts are up/down (relu2)
    # Nemotron-H moe_latent_size: routed experts work in a latent width, projected from and
    # back to hidden by fc1/fc2_latent_proj (transformers 5.24 NemotronHMoE).
    latent = (_int(cfg, "moe_latent_size", lo=1) if model_type == "nemotron_h" else None) or 0
    e_dim = latent or hidden
    out = [
        Linear(f"{ex}.{names[0]}", "expert", e_dim, width, experts, layer=i),
        Linear(f"{ex}.{names[1]}", "expert", e_dim, width, experts, layer=i),
        Linear(f"{ex}.{names[2]}", "expert", width, e_dim, experts, layer=i),
        Linear(f"{moe}.{router}", "router", hidden, experts, layer=i),
    ][0 if gated else 1 :]
    if latent:
        b = bool(cfg.get("mlp_bias"))
        out += [
            Linear(f"{moe}.fc1_latent_proj", "mlp", hidden, latent, bias=b, layer=i),
            Linear(f"{moe}.fc2_latent_proj", "mlp", latent, hidden, bias=b, layer=i),
        ]
    if shared_width:
        sh = (
            f"{moe}.shared_expert"
            if model_type in ("llama4", "llama4_text", *_SHARED_GATE)
            else (f"{moe}.shared_experts")
        )
        out += [
            Linear(f"{sh}.gate_proj", "shared_expert", hidden, shared_width, layer=i),
            Linear(f"{sh}.up_proj", "shared_expert", hidden, shared_width, layer=i),
            Linear(f"{sh}.down_proj", "shared_expert", shared_width, hidden, layer=i),
        ][0 if gated else 1 :]
        if model_type in _SHARED_GATE:
            out.append(Linear(f"{moe}.shared_expert_gate", "router", hidden, 1, layer=i))
    return out


__all__ = ["Decoder", "Linear", "LinearKind", "decoder", "vision_parameters"]
