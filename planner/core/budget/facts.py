"""The few numbers of a model's shape that its non-KV memory depends on, read from an HF config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.core.errors import FieldError
from planner.core.model import ModelShape, text_config

_DTYPE_BYTES = {
    "float32": 4,
    "fp32": 4,
    "float": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
}


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """Shape facts for the activation model. MoE fields are 0 for dense models.

    `expert_intermediate_size` is one expert's FFN width (Qwen/DeepSeek `moe_intermediate_size`;
    Mixtral, gpt-oss and Llama-4 put it in `intermediate_size`). `dtype_bytes` is the compute
    dtype (the logits and activations), not the weights' storage.
    """

    hidden_size: int
    intermediate_size: int
    vocab_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    dtype_bytes: int = 2
    num_experts: int = 0
    num_experts_per_tok: int = 0
    expert_intermediate_size: int = 0
    tie_word_embeddings: bool = False

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and self.num_experts_per_tok > 0

    @classmethod
    def from_hf_config(
        cls, config: Mapping[str, object], *, dtype_bytes: int | None = None
    ) -> ModelFacts:
        """Read an HF `config.json` mapping (multimodal configs: their `text_config`)."""
        # As transformers reads it: class defaults fill what it omits (Gemma-3 4B's heads).
        cfg: Mapping[str, object] = text_config(config)

        def num(*keys: str, default: int | None = None) -> int:
            for key in keys:
                value = cfg.get(key)
                if value is None:
                    value = config.get(key)
                if isinstance(value, bool):
                    continue
                if isinstance(value, int) and value >= 0:
                    return value
            if default is None:
                raise FieldError("config", "input.config_missing_keys", keys=" / ".join(keys))
            return default

        hidden = num("hidden_size", "d_model", "n_embd")
        heads = num("num_attention_heads", "n_head")
        layers = num("num_hidden_layers", "n_layer", "num_layers")
        kv_heads = num("num_key_value_heads", default=heads)
        head_dim = num("head_dim", default=hidden // heads if heads else 0)
        experts = num("num_local_experts", "num_experts", "n_routed_experts", default=0)
        top_k = num("num_experts_per_tok", "experts_per_token", "moe_topk", default=0)
        moe_ffn = num("moe_intermediate_size", default=0)
        # Llama-4 keeps the dense FFN in intermediate_size_mlp and the expert in intermediate_size.
        dense_ffn = num("intermediate_size_mlp", "intermediate_size", "ffn_dim", default=4 * hidden)
        expert_ffn = moe_ffn or (num("intermediate_size", default=dense_ffn) if experts else 0)
        if dtype_bytes is None:
            raw = cfg.get("torch_dtype") or cfg.get("dtype") or config.get("torch_dtype")
            dtype_bytes = _DTYPE_BYTES.get(str(raw).lower(), 2) if raw else 2
        tied = cfg.get("tie_word_embeddings", config.get("tie_word_embeddings", False))
        return cls(
            hidden_size=hidden,
            intermediate_size=dense_ffn,
            vocab_size=num("vocab_size", "padded_vocab_size"),
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=head_dim,
            dtype_bytes=dtype_bytes,
            num_experts=experts if top_k else 0,
            num_experts_per_tok=top_k if experts else 0,
            expert_intermediate_size=expert_ffn if (experts and top_k) else 0,
            tie_word_embeddings=bool(tied),
        )

    def embedding_parameters(self) -> int:
        """Input embedding plus LM head (once if tied): kept in the compute dtype when quantized."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)


def weights_bytes_per_rank_estimate(
    facts: ModelFacts,
    *,
    num_parameters: int,
    linear_bytes_per_parameter: float,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
) -> int:
    """Weights one rank loads, from a parameter count, when no exact per-rank figure is known.

    vLLM shards every linear layer and the vocab embedding over TP; quantized checkpoints keep
    the embedding and LM head in the compute dtype. PP splits layers evenly (the first stage
    holds the embedding, the last the LM head; for an untied model these are equal, so an even
    split is the mean stage). Exact weights per rank, with quantization as stored, come from the
    checkpoint and should be preferred.
    """
    if num_parameters <= 0 or tensor_parallel_size < 1 or pipeline_parallel_size < 1:
        raise FieldError("num_parameters", "input.parameters_not_positive")
    embed = min(facts.embedding_parameters(), num_parameters)
    total = embed * facts.dtype_bytes + (num_parameters - embed) * linear_bytes_per_parameter
    return -(-int(total) // (tensor_parallel_size * pipeline_parallel_size))


def model_facts(
    model_dtype: str, config: Mapping[str, Any] | None, shape: ModelShape
) -> ModelFacts:
    """The shape facts of a resolved plan: from its config.json where known, else its shape."""
    dtype_bytes = 4 if model_dtype == "fp32" else 2
    if config is not None:
        try:
            return ModelFacts.from_hf_config(config, dtype_bytes=dtype_bytes)
        except FieldError:
            pass
    return ModelFacts(
        hidden_size=shape.hidden_size or shape.num_attention_heads * shape.head_dim,
        intermediate_size=shape.intermediate_size or 0,
        vocab_size=shape.vocab_size or 0,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_key_value_heads,
        head_dim=shape.head_dim,
        dtype_bytes=dtype_bytes,
        num_experts=shape.num_experts or 0,
        expert_intermediate_size=shape.expert_intermediate_size or 0,
    )
