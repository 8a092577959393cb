"""Peers' decode-step estimates for the side-by-side bench (run in the peers' own environment).

    pip install llm-analysis==0.2.2 aiconfigurator==0.12.0
    python bench/peer_estimates.py < points.json > peers.json

Reads `[{id, model, config, gpu, tp, pp, batch, input_len, output_len, weights_8bit,
kv_8bit, engine, cls}, ...]` (config: the model's config.json as kvplan's catalog holds it) and
writes `{id: {"llm_analysis_ms": x | null, "aiconfigurator_ms": y | null, "why": {...}}}`: each
peer's decode step where it can express the point, and why not where it cannot. Imports
nothing from kvplan, so it runs beside the peers' pinned dependencies.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

# kvplan GPU id -> each peer's name for it (only the GPUs each one ships data for).
LLM_ANALYSIS_GPUS = {"H100-SXM-80GB": "h100-sxm-80gb", "A100-SXM-80GB": "a100-sxm-80gb"}
AICONFIGURATOR_GPUS = {
    "H100-SXM-80GB": "h100_sxm",
    "H200-141GB": "h200_sxm",
    "B200-180GB": "b200_sxm",
    "A100-SXM-80GB": "a100_sxm",
    "L40S-48GB": "l40s",
    "GB200-186GB": "gb200_sxm",
}


def _text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    return cfg.get("text_config") or cfg


def llm_analysis_ms(p: dict[str, Any]) -> float:
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import (
        ModelConfig,
        ParallelismConfig,
        get_dtype_config_by_name,
        get_gpu_config_by_name,
    )

    gpu = LLM_ANALYSIS_GPUS.get(p["gpu"])
    if gpu is None:
        raise LookupError(f"no llm-analysis GPU config for {p['gpu']}")
    c = _text_config(p["config"])
    hidden = c["hidden_size"]
    experts = c.get("num_local_experts") or c.get("num_experts") or c.get("n_routed_experts") or 1
    ffn = (c.get("moe_intermediate_size") if experts > 1 else None) or c["intermediate_size"]
    model = ModelConfig(
        name=p["model"],
        num_layers=c["num_hidden_layers"],
        n_head=c["num_attention_heads"],
        hidden_dim=hidden,
        vocab_size=c["vocab_size"],
        num_key_value_heads=c.get("num_key_value_heads") or c["num_attention_heads"],
        ffn_embed_dim=ffn,
        expansion_ratio=ffn / hidden,  # given, so a width that is no multiple of hidden passes
        model_type=c.get("model_type"),
        moe_num_experts=experts,
        moe_top_k=c.get("num_experts_per_tok") or 1,
    )
    dtype = get_dtype_config_by_name("w8a8e16" if p["weights_8bit"] else "w16a16e16")
    analysis = LLMAnalysis(
        model,
        get_gpu_config_by_name(gpu),
        dtype,
        ParallelismConfig(tp_size=p["tp"], pp_size=p["pp"]),
    )
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        out = analysis.inference(
            batch_size_per_gpu=p["batch"],
            seq_len=max(1, p["input_len"]),
            num_tokens_to_generate=max(1, p["output_len"]),
            kv_cache_dtype_bytes=1 if p["kv_8bit"] else 2,
        )
    return float(out["decode_latency"]) * 1e3


def aiconfigurator_ms(p: dict[str, Any], workdir: Path) -> float:
    from aiconfigurator.cli.api import cli_estimate

    system = AICONFIGURATOR_GPUS.get(p["gpu"])
    if system is None:
        raise LookupError(f"no aiconfigurator system for {p['gpu']}")
    model_dir = workdir / p["model"].replace("/", "__")
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(p["config"]))
    backend = p["engine"] if p["engine"] in ("trtllm", "vllm", "sglang") else "vllm"
    kwargs: dict[str, Any] = {}
    if p["weights_8bit"] and not p["config"].get("quantization_config"):
        kwargs["gemm_quant_mode"] = "fp8"  # an fp8 checkpoint of a bf16 config
    if p["kv_8bit"]:
        kwargs["kvcache_quant_mode"] = "fp8"
    if p["cls"] == "moe":
        kwargs["moe_tp_size"] = p["tp"]
        kwargs["moe_ep_size"] = 1
    with contextlib.redirect_stdout(io.StringIO()):
        r = cli_estimate(
            str(model_dir),
            system,
            mode="agg",
            backend_name=backend,
            isl=max(1, p["input_len"]),
            osl=max(2, p["output_len"]),
            batch_size=p["batch"],
            tp_size=p["tp"],
            pp_size=p["pp"],
            **kwargs,
        )
    return float(r.tpot)


def main() -> None:
    points = json.load(sys.stdin)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for p in points:
            row: dict[str, Any] = {"llm_analysis_ms": None, "aiconfigurator_ms": None, "why": {}}
            for name, fn in (
                ("llm_analysis_ms", lambda q: llm_analysis_ms(q)),
                ("aiconfigurator_ms", lambda q: aiconfigurator_ms(q, Path(tmp))),
            ):
                try:
                    row[name] = fn(p)
                except Exception as exc:  # a peer that cannot express a point says why
                    row["why"][name] = f"{type(exc).__name__}: {exc}"[:300]
            out[p["id"]] = row
            print(p["id"], row["llm_analysis_ms"], row["aiconfigurator_ms"], file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
