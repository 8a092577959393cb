"""Nemotron-H's newer configs (transformers 5.24 NemotronHConfig / NemotronHForCausalLM):
`layers_block_type` words in place of hybrid_override_pattern, num_hidden_layers derived from
their length, and `moe_latent_size` (routed experts in a latent width, with fc1_latent_proj
hidden -> latent and fc2_latent_proj latent -> hidden per MoE layer). Counts below are derived
by hand from those module shapes; the catalog's Ultra entry is held to transformers' own build
in tests/catalog/test_deployed_models.py."""

from __future__ import annotations

from planner.core.model import shape_from_config
from planner.core.params import parameter_counts

BASE = {
    "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h",
    "hidden_size": 64,
    "vocab_size": 100,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "mamba_num_heads": 4,
    "mamba_head_dim": 16,
    "n_groups": 2,
    "ssm_state_size": 8,
    "intermediate_size": 96,
    "moe_intermediate_size": 32,
    "moe_shared_expert_intermediate_size": 48,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "tie_word_embeddings": False,
}
WORDS = ["mamba", "moe", "attention", "mlp"]


def test_words_read_as_the_pattern() -> None:
    words = {**BASE, "layers_block_type": WORDS}
    pattern = {**BASE, "hybrid_override_pattern": "ME*-", "num_hidden_layers": 4}
    assert parameter_counts(words).total == parameter_counts(pattern).total
    a, b = shape_from_config(words), shape_from_config(pattern)
    assert a.num_hidden_layers == b.num_hidden_layers == 4
    assert a.layers == b.layers  # cached layers only: one Mamba-2, one attention


def test_latent_experts() -> None:
    plain = parameter_counts({**BASE, "layers_block_type": WORDS}).total
    latent = parameter_counts({**BASE, "layers_block_type": WORDS, "moe_latent_size": 16}).total
    # 4 experts' up (h->w) and down (w->h) shrink from hidden 64 to latent 16; two projections
    # 64x16 and 16x64 are added (no bias).
    shrink = 4 * 2 * 32 * (64 - 16)
    assert plain - latent == shrink - 2 * 64 * 16
