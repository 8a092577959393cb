"""Cross-check: planner.core.params against the real transformers modelling code.

Source of truth: each catalog config instantiated by transformers 5.x on the `meta` device (no
memory, no weights), counting its parameters plus persistent buffers (DeepSeek's and MiniMax's
router correction biases are buffers there but tensors in the checkpoint). The planner's count
must be exact: every attention, MLP, expert, shared expert, router, norm and embedding, the
Llama-4, Gemma-3 (SigLIP) and Qwen3.5/3.6 vision towers included. The vision towers of Gemma-4
and Mistral-Small (Pixtral) are only estimated (a generic ViT count), so those are held to 1 %;
Kimi-K2.5's MoonViT is not counted (under a thousandth of the total).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from planner.catalog import list_models  # noqa: E402
from planner.core.params import parameter_counts  # noqa: E402

pytestmark = pytest.mark.crosscheck

# Catalog model_types transformers does not register, mapped to the class that loads them.
ALIASED_TYPES = {"kimi_k2": "deepseek_v3"}
UNREGISTERED = {"mimo"}  # XiaomiMiMo ships its own modelling code (trust_remote_code)
ESTIMATED_VISION = {
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
    "google/gemma-4-31B-it",
    "google/gemma-4-26B-A4B",
    "nvidia/Gemma-4-31B-IT-NVFP4",
    "nvidia/Gemma-4-26B-A4B-NVFP4",
}
# Kimi-K2.5's MoonViT tower (vision_config) is not counted (the entries' notes say so): the text
# decoder is, and the tower is under a thousandth of the total.
UNCOUNTED_VISION = {
    "moonshotai/Kimi-K2.5",
    "nvidia/Kimi-K2.5-NVFP4",
    "nvidia/Kimi-K2.6-NVFP4",
    "nvidia/Kimi-K2.7-Code-NVFP4",
}

MODELS = [
    m for m in list_models() if not m.refused and m.config.get("model_type") not in UNREGISTERED
]


def _transformers_count(config: dict[str, Any]) -> int:
    # A deep copy: transformers' config classes rewrite nested dicts in place (rope_scaling),
    # and the catalog's entries are shared by every later test in the process.
    cfg = {k: copy.deepcopy(v) for k, v in config.items() if k != "quantization_config"}
    model_type = ALIASED_TYPES.get(cfg["model_type"], cfg["model_type"])
    cfg["model_type"] = model_type
    rope = cfg.get("rope_scaling")
    if (
        isinstance(rope, dict)
        and rope.get("type") == "su"
        and "original_max_position_embeddings" in cfg
    ):
        # Phi-3 128k configs of mid-2024 name "su" scaling with the original length at the top
        # level, where transformers 4.x read it; 5.x wants it inside the rope parameters.
        rope["original_max_position_embeddings"] = cfg["original_max_position_embeddings"]
    conf = transformers.CONFIG_MAPPING[model_type].from_dict(cfg)
    auto = (
        transformers.AutoModelForImageTextToText
        if "text_config" in cfg
        else transformers.AutoModelForCausalLM
    )
    with torch.device("meta"):
        model = auto.from_config(conf)
    params = sum(p.numel() for p in model.parameters())
    persistent = set(model.state_dict())
    buffers = sum(b.numel() for name, b in model.named_buffers() if name in persistent)
    return int(params + buffers)


@pytest.mark.parametrize("entry", MODELS, ids=[m.id for m in MODELS])
def test_parameter_count_matches_transformers(entry: Any) -> None:
    ours = parameter_counts(entry.config).total
    theirs = _transformers_count(entry.config)
    if entry.id in ESTIMATED_VISION:
        assert abs(ours - theirs) <= 0.01 * theirs
    elif entry.id in UNCOUNTED_VISION:
        assert 0 < theirs - ours <= 0.001 * theirs
    else:
        assert ours == theirs


@pytest.mark.parametrize("model_id", ["google/gemma-4-31B-it", "google/gemma-4-26B-A4B"])
def test_gemma4_text_model_is_exact(model_id: str) -> None:
    # Global layers' 512-wide heads, keys-as-values (no v_proj), the MoE block beside the
    # dense MLP and its router scales: the decoder alone equals transformers' language model.
    entry = next(m for m in MODELS if m.id == model_id)
    cfg = {k: copy.deepcopy(v) for k, v in entry.config.items()}
    conf = transformers.CONFIG_MAPPING[cfg["model_type"]].from_dict(cfg)
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(conf)
    persistent = set(model.state_dict())
    text = sum(p.numel() for n, p in model.named_parameters() if "language_model" in n)
    text += sum(
        b.numel() for n, b in model.named_buffers() if n in persistent and "language_model" in n
    )
    counts = parameter_counts(entry.config)
    assert counts.total - counts.vision == text
