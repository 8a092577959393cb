"""`vllm serve`: its flags for recommended settings, and the GPUs its batch defaults treat as
large."""

from __future__ import annotations

from planner.core.engines.reads import LaunchSettings
from planner.core.hardware import Gpu
from planner.core.units import GiB


def vllm_serve_command(model: str, s: LaunchSettings, instances: int) -> tuple[str, dict[str, str]]:
    """`vllm serve` with the settings (the model name already shell-quoted)."""
    parts = [
        f"vllm serve {model}",
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


def big_gpu(gpu: Gpu | None) -> bool:
    """vLLM's larger batch defaults apply on >= 70 GiB devices whose name lacks "a100"
    (EngineArgs.get_batch_defaults); with no GPU given, the worked examples' large defaults."""
    if gpu is None:
        return True
    a100 = any("a100" in n.lower() for n in gpu.names)
    return gpu.memory_bytes >= 70 * GiB and not a100
