"""Engine settings as ready-to-paste launch commands, with each engine's real flag names.

vLLM (`vllm serve`): --tensor-parallel-size, --max-model-len, --max-num-seqs,
--gpu-memory-utilization, --kv-cache-dtype, --block-size, --max-num-batched-tokens,
--data-parallel-size. SGLang (`python -m sglang.launch_server`): --model-path, --tp,
--mem-fraction-static, --max-running-requests, --context-length, --kv-cache-dtype, --page-size,
--dp. TensorRT-LLM (`trtllm-serve MODEL`): --tp_size, --max_batch_size, --max_seq_len,
--kv_cache_free_gpu_memory_fraction; KV dtype and tokens_per_block go in the LLM API options file
(`--extra_llm_api_options FILE` with `kv_cache_config: {dtype, tokens_per_block}`).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from planner.core.errors import FieldError
from planner.core.recommend_schema import EngineSettings

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-/]{0,199}")
EXTRA_OPTIONS_FILE = "kv_cache_config.yaml"

# KV dtypes each engine's flag accepts, from kvplan's names.
_VLLM_DTYPES = {"fp8": "fp8", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2", "bf16": "bfloat16"}
_SGLANG_DTYPES = {
    "fp8": "fp8_e4m3",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
    "bf16": "bfloat16",
}
_TRTLLM_DTYPES = {"fp8": "fp8", "fp8_e4m3": "fp8"}


def model_name(model: str | dict[str, Any]) -> str:
    """The name to launch: the catalog id, else the config's `_name_or_path` when it looks like
    a repo id or path, else a placeholder to replace."""
    if isinstance(model, str):
        return model
    name = model.get("_name_or_path")
    if isinstance(name, str) and _SAFE_NAME.fullmatch(name):
        return name
    return "MODEL"


def engine_dtype(engine: str, dtype: str, model_dtype: str) -> str:
    """kvplan's KV dtype name → the engine's flag value ('auto' when it is the model's own)."""
    key = dtype.strip().lower()
    if key in ("auto", model_dtype):
        return "auto"
    table = {"vllm": _VLLM_DTYPES, "sglang": _SGLANG_DTYPES, "trtllm": _TRTLLM_DTYPES}[engine]
    if key not in table:
        raise FieldError(
            "kv_cache_dtype",
            f"{engine} has no KV cache dtype {dtype!r} to recommend; use auto or one of: "
            f"{', '.join(sorted(table))}",
        )
    return table[key]


def render(
    engine: str, model: str, s: EngineSettings, instances: int, default_block: int
) -> tuple[str, dict[str, str]]:
    """(command line, extra files by name) for one launch of `instances` replicas."""
    m = shlex.quote(model)
    if engine == "vllm":
        parts = [
            f"vllm serve {m}",
            f"--tensor-parallel-size {s.tensor_parallel_size}",
            f"--max-model-len {s.max_model_len}",
            f"--max-num-seqs {s.max_num_seqs}",
            f"--gpu-memory-utilization {s.gpu_memory_utilization:g}",
            f"--kv-cache-dtype {s.kv_cache_dtype}",
            f"--block-size {s.block_size}",
        ]
        if s.max_num_batched_tokens is not None:
            parts.append(f"--max-num-batched-tokens {s.max_num_batched_tokens}")
        if instances > 1:
            parts.append(f"--data-parallel-size {instances}")
        return " ".join(parts), {}
    if engine == "sglang":
        parts = [
            f"python -m sglang.launch_server --model-path {m}",
            f"--tp {s.tensor_parallel_size}",
            f"--mem-fraction-static {s.gpu_memory_utilization:g}",
            f"--max-running-requests {s.max_num_seqs}",
            f"--context-length {s.max_model_len}",
            f"--kv-cache-dtype {s.kv_cache_dtype}",
            f"--page-size {s.block_size}",
        ]
        if instances > 1:
            parts.append(f"--dp {instances}")
        return " ".join(parts), {}
    parts = [
        f"trtllm-serve {m}",
        f"--tp_size {s.tensor_parallel_size}",
        f"--max_batch_size {s.max_num_seqs}",
        f"--max_seq_len {s.max_model_len}",
        f"--kv_cache_free_gpu_memory_fraction {s.gpu_memory_utilization:g}",
    ]
    files: dict[str, str] = {}
    if s.kv_cache_dtype != "auto" or s.block_size != default_block:
        files[EXTRA_OPTIONS_FILE] = (
            f"kv_cache_config:\n  dtype: {s.kv_cache_dtype}\n  tokens_per_block: {s.block_size}\n"
        )
        parts.append(f"--extra_llm_api_options {EXTRA_OPTIONS_FILE}")
    return " ".join(parts), files


__all__ = ["EXTRA_OPTIONS_FILE", "engine_dtype", "model_name", "render"]
