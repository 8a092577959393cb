"""The SGLang oracle's hybrid grid (sglang_hybrid.json): models whose pools are not one token pool.

- Mamba2 / gated-delta-net / KDA hybrids (Qwen3-Next, Qwen3.5/3.6 with their float32
  `mamba_ssm_dtype`, Nemotron-H, Kimi-Linear, Falcon-H1, granite-4.0-h): a state pool sized from
  `--mamba-full-memory-ratio` (or `--max-mamba-cache-size`), its dtype from `--mamba-ssm-dtype`
  or the config, and the token pool from the rest;
- Gemma-4 (HybridSWAPoolConfigurator: a full pool and a sliding-window pool split by
  `--swa-full-tokens-ratio`; its full-attention layers have their own head width and KV heads)
  and Gemma-3 (served full-length by SGLang), both multimodal.

The published configs come from the catalog, else tests/fixtures/hybrid_models.json.
"""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path
from typing import Any

from planner.catalog import get_model
from planner.core.errors import UnknownIdError

HERE = Path(__file__).resolve().parent
HYBRID_SEED = 20261204
HYBRID_CONFIGS = 100
HYBRID_MODELS = (
    "Qwen/Qwen3-Next-80B-A3B-Instruct",
    "Qwen/Qwen3.6-27B",
    "Qwen/Qwen3.5-35B-A3B",
    "nvidia/NVIDIA-Nemotron-Nano-9B-v2",
    "moonshotai/Kimi-Linear-48B-A3B-Instruct",
    "tiiuae/Falcon-H1-7B-Instruct",
    "ibm-granite/granite-4.0-h-tiny",
    "google/gemma-4-31B-it",
    "google/gemma-4-26B-A4B",
    "google/gemma-3-27b-it",
)
HYBRID_GPUS = ("H100-SXM-80GB", "H200-141GB", "A100-SXM-40GB", "B200-180GB", "L4-24GB")
# Each set in about half the cases that can take it.
MAMBA_FLAGS: dict[str, tuple[Any, ...]] = {
    "mamba_full_memory_ratio": (0.2, 0.9, 3.0),
    "max_mamba_cache_size": (16, 200, 4096),
    "mamba_ssm_dtype": ("float32", "bfloat16"),
}
SWA_FLAGS: dict[str, tuple[Any, ...]] = {"swa_full_tokens_ratio": (0.05, 0.3, 0.8, 1.0)}
HYBRID_FLAGS = (*MAMBA_FLAGS, *SWA_FLAGS)


@cache
def _hybrid_json() -> dict[str, dict[str, Any]]:
    data = json.loads((HERE.parents[0] / "fixtures" / "hybrid_models.json").read_text())
    return {m["id"]: m["config"] for m in data["models"]}


def model_config(model_id: str) -> dict[str, Any]:
    """The published config.json: the catalog's, else the hybrid fixtures'."""
    try:
        return dict(get_model(model_id).config)
    except UnknownIdError:
        return dict(_hybrid_json()[model_id])


def generate_hybrid(gpu_bytes: Any, case_id: Any) -> list[dict[str, Any]]:
    rng = random.Random(HYBRID_SEED)
    out: list[dict[str, Any]] = []
    for i in range(HYBRID_CONFIGS):
        model = HYBRID_MODELS[i % len(HYBRID_MODELS)]
        gpu = rng.choice(HYBRID_GPUS)
        free = gpu_bytes(gpu) - rng.choice((512, 1536)) * (1 << 20)
        c: dict[str, Any] = {
            "model": model,
            "gpu": gpu,
            "tensor_parallel_size": rng.choice((1, 1, 2, 4, 8)),
            "pipeline_parallel_size": 1,
            "kv_cache_dtype": rng.choice(("auto", "auto", "fp8_e4m3")),
            "free_before_load_bytes": free,
            "weights_bytes_per_rank": int(free * rng.choice((0.05, 0.3, 0.6, 0.9))),
            "mem_fraction_static": rng.choice((None, None, 0.85)),
            "max_running_requests": rng.choice((None, None, 32, 1024)),
            "context_length": rng.choice((None, 8192, 65536)),
            "page_size": rng.choice((None, None, 16, 64)),
        }
        table = SWA_FLAGS if "gemma" in model else MAMBA_FLAGS
        flags = {k: rng.choice(v) for k, v in table.items() if rng.random() < 0.5}
        c.update(flags)
        tags = "".join(
            f"-{k.split('_')[0]}{k.split('_')[1][:4]}{v}" for k, v in sorted(flags.items())
        )
        c["id"] = "hybrid-" + case_id(c, i) + tags
        out.append(c)
    return out


__all__ = ["HYBRID_FLAGS", "HYBRID_MODELS", "generate_hybrid", "model_config"]
