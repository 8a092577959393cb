"""Measure what a real transformers DynamicCache holds, for tiny random models on CPU.

Used by test_transformers_cache.py to pin the planner's `engine: "transformers"` numbers to a real
library's output. Run it on its own to print the measured table:

    python tests/crosscheck/cache_measure.py

Every model is built from a config dict shaped like a published config.json (no network), with
random weights; only the cache's tensors matter, never the logits.

Two byte counts are reported per cache:
* `total_bytes`: Σ numel·element_size over each layer's keys/values tensors — what the cache
  *logically* holds (the planner's number).
* `storage_bytes`: Σ nbytes of the distinct storages behind those tensors. A sliding layer keeps
  its last W−1 tokens as a *view* into the tensor it just concatenated, so right after a step the
  storage still holds the whole step's tokens (prefill: all n; decode: W). This is the memory
  actually pinned between steps.
"""

from __future__ import annotations

import inspect
import os
import sys
from functools import cache
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

# Tiny configs shaped like published config.json files (hidden ≤ 64, layers ≤ 6, vocab ≤ 128).
# "torch_dtype": "float32" is set explicitly: transformers 5 builds from_config models in the
# config's dtype, and the cross-check asks the planner for fp32 KV.
_COMMON: dict[str, Any] = {
    "vocab_size": 128,
    "max_position_embeddings": 256,
    "torch_dtype": "float32",
    "tie_word_embeddings": False,
}

W = 8  # sliding window used by every windowed config below

CONFIGS: dict[str, dict[str, Any]] = {
    # GQA: 4 query heads, 2 KV heads, d = 64/4 = 16.
    "llama_gqa": {
        **_COMMON,
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    },
    # MQA: 1 KV head.
    "llama_mqa": {
        **_COMMON,
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
    },
    # Explicit head_dim 24 ≠ hidden/heads = 16 (the Qwen3-32B situation).
    "qwen3_head_dim": {
        **_COMMON,
        "model_type": "qwen3",
        "architectures": ["Qwen3ForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 24,
    },
    # Every layer sliding (Mistral-7B-v0.1 style).
    "mistral_swa": {
        **_COMMON,
        "model_type": "mistral",
        "architectures": ["MistralForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "sliding_window": W,
    },
    # Qwen2/2.5 publish sliding_window but use_sliding_window false: all layers full.
    "qwen2_no_swa": {
        **_COMMON,
        "model_type": "qwen2",
        "architectures": ["Qwen2ForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "sliding_window": W,
        "use_sliding_window": False,
        "max_window_layers": 2,
    },
    # Qwen2 with the window on: only layers ≥ max_window_layers slide (layer 0 full, 1 sliding).
    "qwen2_swa_partial": {
        **_COMMON,
        "model_type": "qwen2",
        "architectures": ["Qwen2ForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "sliding_window": W,
        "use_sliding_window": True,
        "max_window_layers": 1,
    },
    # Gemma-2: alternating sliding (even indices) / full, head_dim 32 ≠ 64/4.
    "gemma2_alt": {
        **_COMMON,
        "model_type": "gemma2",
        "architectures": ["Gemma2ForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "sliding_window": W,
        "query_pre_attn_scalar": 32,
        "tie_word_embeddings": True,
    },
    # Gemma-3 text, legacy sliding_window_pattern 3 over 6 layers: layers 2 and 5 full.
    "gemma3_pattern": {
        **_COMMON,
        "model_type": "gemma3_text",
        "architectures": ["Gemma3ForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 6,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 16,
        "sliding_window": W,
        "sliding_window_pattern": 3,
        "query_pre_attn_scalar": 16,
        "tie_word_embeddings": True,
    },
    # Gemma-3 text with explicit layer_types (newer configs carry them), pattern not 1-in-N.
    "gemma3_layer_types": {
        **_COMMON,
        "model_type": "gemma3_text",
        "architectures": ["Gemma3ForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "sliding_window": W,
        "layer_types": [
            "full_attention",
            "sliding_attention",
            "sliding_attention",
            "full_attention",
        ],
        "query_pre_attn_scalar": 16,
        "tie_word_embeddings": True,
    },
    # gpt-oss: MoE, alternating sliding/full by default, head_dim 16 ≠ 64/8 = 8.
    "gpt_oss": {
        **_COMMON,
        "model_type": "gpt_oss",
        "architectures": ["GptOssForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "sliding_window": W,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        # The published value: its default YaRN rope (factor 32 over 4096) implies 131072.
        "max_position_embeddings": 131072,
    },
    # DeepSeek-V3 MLA: latent kv_lora_rank 32 + rope 8; first layer dense, second MoE.
    "deepseek_v3_mla": {
        **_COMMON,
        "model_type": "deepseek_v3",
        "architectures": ["DeepseekV3ForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 128,
        "moe_intermediate_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "q_lora_rank": 48,
        "kv_lora_rank": 32,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
        "n_routed_experts": 4,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "n_group": 2,
        "topk_group": 1,
        "first_k_dense_replace": 1,
    },
    # Gemma-3n text: the last 2 of 6 layers share KV (num_kv_shared_layers): layer 4 (sliding)
    # reads layer 2's cache and layer 5 (full) layer 3's; they keep none of their own.
    "gemma3n_shared": {
        **_COMMON,
        "model_type": "gemma3n_text",
        "architectures": ["Gemma3nForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": [128] * 6,
        "num_hidden_layers": 6,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "sliding_window": W,
        "layer_types": ["sliding_attention", "full_attention"] * 3,
        "num_kv_shared_layers": 2,
        "hidden_size_per_layer_input": 8,
        "vocab_size_per_layer_input": 128,
        "laurel_rank": 8,
        "altup_num_inputs": 4,
        "activation_sparsity_pattern": [0.0] * 6,
        "tie_word_embeddings": True,
    },
    # Gemma-4 (31B-style): full layers use global_head_dim 32 and, with attention_k_eq_v, 1
    # global KV head (the keys are the values); sliding layers 2 heads of 16.
    "gemma4_global": {
        **_COMMON,
        "model_type": "gemma4_text",
        "architectures": ["Gemma4ForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "global_head_dim": 32,
        "num_global_key_value_heads": 1,
        "attention_k_eq_v": True,
        "sliding_window": W,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
        "hidden_size_per_layer_input": 0,
        "num_kv_shared_layers": 0,
        "enable_moe_block": False,
        "tie_word_embeddings": True,
    },
}

SEQ_LENS: tuple[int, ...] = (5, 7, 8, 9, 20)

# State (Mamba2 / gated delta net) models, shaped like the published Mamba2 and Qwen3-Next
# configs; conv kernel 4 (lengths below, at and beyond it are measured).
STATE_CONFIGS: dict[str, dict[str, Any]] = {
    "mamba2": {
        **_COMMON,
        "model_type": "mamba2",
        "architectures": ["Mamba2ForCausalLM"],
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_heads": 8,
        "head_dim": 16,
        "n_groups": 2,
        "state_size": 16,
        "conv_kernel": 4,
        "expand": 2,
        "chunk_size": 16,
    },
    # Qwen3-Next: gated delta net layers, every 2nd layer full attention.
    "qwen3_next_gdn": {
        **_COMMON,
        "model_type": "qwen3_next",
        "architectures": ["Qwen3NextForCausalLM"],
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "intermediate_size": 128,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 32,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 8,
        "linear_conv_kernel_dim": 4,
        "full_attention_interval": 2,
    },
}
STATE_SEQ_LENS: tuple[int, ...] = (2, 4, 5, 9, 20)


@cache
def _build(config_key: str) -> torch.nn.Module:
    import json

    config = json.loads(config_key)
    model_type = config.pop("model_type")
    hf_config = AutoConfig.for_model(model_type, **config)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(hf_config)
    model.eval()
    return model


def build_model(config: dict[str, Any]) -> torch.nn.Module:
    """A random-weight model for a published-style config dict (cached per distinct config)."""
    import json

    return _build(json.dumps(config, sort_keys=True))


def _cache_kwarg(model: torch.nn.Module) -> str:
    # transformers 5.x renamed the forward kwarg past_key_values → cache (old name deprecated).
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _returned_cache(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def _layer_type(layer: Any) -> str:
    window = getattr(layer, "sliding_window", None)
    return f"{type(layer).__name__}(W={window})" if window is not None else type(layer).__name__


def describe_cache(cache: Any) -> dict[str, Any]:
    """Bytes and shapes of every keys/values tensor a Cache holds."""
    layers: list[dict[str, Any]] = []
    storages: dict[int, int] = {}
    dtypes: set[str] = set()
    for layer in cache.layers:
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        row: dict[str, Any] = {"type": _layer_type(layer)}
        for name, tensor in (("k", keys), ("v", values)):
            if isinstance(tensor, torch.Tensor):
                row[f"{name}_bytes"] = tensor.numel() * tensor.element_size()
                row[f"{name}_shape"] = tuple(tensor.shape)
                storage = tensor.untyped_storage()
                storages[storage.data_ptr()] = storage.nbytes()
                dtypes.add(str(tensor.dtype).removeprefix("torch."))
            else:
                row[f"{name}_bytes"] = 0
                row[f"{name}_shape"] = None
        row["tokens"] = row["k_shape"][-2] if row["k_shape"] else 0
        # Linear-attention / Mamba layers (LinearAttentionLayer): conv and recurrent states.
        row["state_bytes"] = 0
        row["state_shapes"] = []
        for name in ("conv_states", "recurrent_states"):
            for tensor in (getattr(layer, name, None) or {}).values():
                if isinstance(tensor, torch.Tensor):
                    row["state_bytes"] += tensor.numel() * tensor.element_size()
                    row["state_shapes"].append((name, tuple(tensor.shape)))
                    dtypes.add(str(tensor.dtype).removeprefix("torch."))
        layers.append(row)
    return {
        "total_bytes": sum(r["k_bytes"] + r["v_bytes"] + r["state_bytes"] for r in layers),
        "storage_bytes": sum(storages.values()),
        "dtypes": sorted(dtypes),
        "layers": layers,
    }


@torch.no_grad()
def measure_cache_bytes(
    config: dict[str, Any], seq_len: int, decode_steps: int = 0, seed: int = 0
) -> dict[str, Any]:
    """Run a tiny random model over `seq_len` tokens and measure the returned cache.

    With `decode_steps` = k > 0, the first seq_len − k tokens are one prefill forward and the
    last k are fed one at a time (steady-state decode); the cache then covers seq_len tokens.
    """
    if not 0 <= decode_steps < seq_len:
        raise ValueError(f"decode_steps must be in [0, seq_len), got {decode_steps} for {seq_len}")
    model = build_model(config)
    kwarg = _cache_kwarg(model)
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, config["vocab_size"], (1, seq_len), generator=generator)
    prefill = seq_len - decode_steps
    out = model(input_ids=ids[:, :prefill], use_cache=True)
    cache = _returned_cache(out)
    for pos in range(prefill, seq_len):
        out = model(input_ids=ids[:, pos : pos + 1], use_cache=True, **{kwarg: cache})
        cache = _returned_cache(out)
    result = describe_cache(cache)
    result["cache_class"] = type(cache).__name__
    result["seq_len"] = seq_len
    result["decode_steps"] = decode_steps
    result["transformers_version"] = transformers.__version__
    return result


def _table() -> None:
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, window W = {W}")
    header = f"{'config':<20} {'n':>3} {'dec':>3} {'tokens/layer':<22}"
    print(f"{header} {'total_B':>8} {'storage_B':>9}")
    for name, config in CONFIGS.items():
        for n in SEQ_LENS:
            for steps in (0, 3):
                m = measure_cache_bytes(config, n, decode_steps=steps)
                tokens = ",".join(str(r["tokens"]) for r in m["layers"])
                print(
                    f"{name:<20} {n:>3} {steps:>3} {tokens:<22} "
                    f"{m['total_bytes']:>8} {m['storage_bytes']:>9}"
                )
        m = measure_cache_bytes(config, 9)
        print(f"  layers @ n=9: dtype {m['dtypes']}, {m['cache_class']}")
        for i, row in enumerate(m["layers"]):
            print(f"    {i}: {row['type']:<36} k{row['k_shape']} v{row['v_shape']}")


if __name__ == "__main__":
    _table()
    sys.exit(0)
