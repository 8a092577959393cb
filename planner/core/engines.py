"""Per-engine rules: how vLLM, SGLang, TensorRT-LLM and transformers size the KV cache.

Each rule cites engine_rules.md. Where an engine has no such mechanism (transformers has no
paging), the rule says so rather than pretending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from planner.core.errors import FieldError
from planner.core.model import ModelShape, cdiv

MemoryBase = Literal["total", "free_before_load", "free_after_load", "none"]
SlidingPolicy = Literal[
    "vllm_admission", "full_length", "sglang_swa_pool", "cyclic", "keep_w_minus_1"
]

# SGLang applies SWA pools only to these architectures (engine_rules.md §2, `is_hybrid_swa_model`).
_SGLANG_SWA_TYPES = {"llama4", "llama4_text", "gpt_oss", "mimo_v2", "step3p5"}


@dataclass(frozen=True, slots=True)
class EngineRules:
    name: str
    label: str
    default_block_size: int
    null_blocks: int
    memory_base: MemoryBase
    default_memory_utilization: float
    default_reserve_bytes: int
    prefix_caching_default: bool
    prefix_granularity: Literal["block", "token", "none"]
    notes: tuple[str, ...]

    # -- head count per rank ---------------------------------------------------------------
    def kv_heads_per_rank(self, kv_heads: int, tp: int, *, mla: bool) -> int:
        if mla:
            return 1  # the latent is replicated on every rank, never sharded (§1.2, §2, §3)
        if self.name == "trtllm":
            return cdiv(kv_heads, tp)  # allocator: ceil(Hkv / tp) (§3)
        if self.name == "transformers":
            return kv_heads // tp  # tp_plan shards heads; divisibility checked in validate_tp
        return max(1, kv_heads // tp)  # vLLM / SGLang get_num_kv_heads (§1.2, §2)

    def validate_parallel(self, shape: ModelShape, tp: int, pp: int) -> None:
        hq, hkv = shape.num_attention_heads, shape.num_key_value_heads
        if pp > shape.num_hidden_layers:
            raise FieldError(
                "pipeline_parallel_size",
                f"{pp} stages for {shape.num_hidden_layers} layers; use at most "
                f"{shape.num_hidden_layers}",
            )
        if hq % tp:
            ok = [t for t in (1, 2, 4, 8, 16, 32, 64) if hq % t == 0]
            raise FieldError(
                "tensor_parallel_size",
                f"{self.label} requires num_attention_heads ({hq}) divisible by "
                f"tensor_parallel_size ({tp}); sizes that work: {ok}",
            )
        if shape.is_mla:
            return
        if self.name == "transformers":
            if hkv % tp:
                raise FieldError(
                    "tensor_parallel_size",
                    f"transformers' tp_plan shards KV heads: num_key_value_heads ({hkv}) must be "
                    f"divisible by tensor_parallel_size ({tp})",
                )
            return
        if self.name in ("vllm", "sglang"):
            ok = [
                t
                for t in (1, 2, 4, 8, 16, 32, 64)
                if hq % t == 0 and (hkv % t == 0 if hkv >= t else t % hkv == 0)
            ]
            if hkv >= tp and hkv % tp:
                raise FieldError(
                    "tensor_parallel_size",
                    f"{self.label} needs num_key_value_heads ({hkv}) divisible by "
                    f"tensor_parallel_size ({tp}) when heads >= ranks; sizes that work: {ok}",
                )
            if hkv < tp and tp % hkv:
                raise FieldError(
                    "tensor_parallel_size",
                    f"{self.label} replicates KV heads when tensor_parallel_size ({tp}) > "
                    f"num_key_value_heads ({hkv}); it must then be a multiple of {hkv}; "
                    f"sizes that work: {ok}",
                )

    def sliding_policy(self, shape: ModelShape, hybrid_manager: bool) -> SlidingPolicy:
        if self.name == "vllm":
            if hybrid_manager:
                return "vllm_admission"
            # --disable-hybrid-kv-cache-manager rewrites window specs as full-attention ones only
            # when full layers are present too; a model whose layers all slide (Mistral-7B)
            # is already uniform and keeps its window (unify_hybrid_kv_cache_specs, §1.3).
            kinds = {s.kind for s in shape.layers}
            mixed = bool(kinds & {"full", "mla"}) and bool(kinds & {"sliding", "chunked"})
            return "full_length" if mixed else "vllm_admission"
        if self.name == "sglang":
            return "sglang_swa_pool" if shape.model_type in _SGLANG_SWA_TYPES else "full_length"
        if self.name == "trtllm":
            return "cyclic"
        return "keep_w_minus_1"

    def default_max_num_batched_tokens(
        self, gpu_memory_bytes: int | None, gpu_names: tuple[str | None, ...] = ()
    ) -> int:
        """vLLM `vllm serve` defaults (§1.3): 8192 on >= 70 GiB GPUs other than A100, else 2048.

        vLLM tests the device *name* for "a100" (EngineArgs.get_batch_defaults), so the catalog
        id and the display name of a custom GPU are both checked. With no GPU given we use 8192
        (the worked examples' value)."""
        return 8192 if _vllm_big_gpu(gpu_memory_bytes, gpu_names) else 2048

    def default_max_num_seqs(
        self,
        gpu_memory_bytes: int | None,
        gpu_names: tuple[str | None, ...],
        pool_tokens: int,
        context_tokens: int,
    ) -> int | None:
        """The engine's default cap on concurrently running requests.

        vLLM `vllm serve` (EngineArgs.get_batch_defaults): max_num_seqs 1024 on >= 70 GiB
        GPUs other than A100, else 256 (no GPU given: 1024, like max_num_batched_tokens).
        SGLang: max_running_requests = min(clamp(pool tokens / context length × 512, 2048,
        4096), pool tokens // 2) [version]. TensorRT-LLM: max_batch_size 2048 (LLM API).
        transformers: none (the caller batches)."""
        if self.name == "vllm":
            return 1024 if _vllm_big_gpu(gpu_memory_bytes, gpu_names) else 256
        if self.name == "sglang":
            scaled = int(pool_tokens / max(1, context_tokens) * 512)
            return max(1, min(max(2048, min(scaled, 4096)), pool_tokens // 2))
        if self.name == "trtllm":
            return 2048
        return None


def _vllm_big_gpu(gpu_memory_bytes: int | None, gpu_names: tuple[str | None, ...]) -> bool:
    """vLLM's larger batch defaults apply on >= 70 GiB devices whose name lacks "a100"
    (EngineArgs.get_batch_defaults); with no GPU given, the worked examples' large defaults."""
    if gpu_memory_bytes is None:
        return True
    a100 = any("a100" in (n or "").lower() for n in gpu_names)
    return gpu_memory_bytes >= 70 * (1 << 30) and not a100


_GiB = 1 << 30

ENGINE_RULES: dict[str, EngineRules] = {
    "vllm": EngineRules(
        name="vllm",
        label="vLLM",
        default_block_size=16,
        null_blocks=1,
        memory_base="total",
        default_memory_utilization=0.92,
        default_reserve_bytes=_GiB,
        prefix_caching_default=True,
        prefix_granularity="block",
        notes=(
            "vLLM v1 rules (vllm/v1/kv_cache_interface.py, v1/core/kv_cache_utils.py at "
            "001cabc1): page = block_size × kv_heads × (head_size + head_size_v) × dtype bytes "
            "per layer; num_blocks = budget // page // group_size; block 0 is the null block.",
            "gpu_memory_utilization is a fraction of TOTAL device memory (default 0.92 in "
            "current vllm/config/cache.py; 0.9 in releases before it).",
        ),
    ),
    "sglang": EngineRules(
        name="sglang",
        label="SGLang",
        default_block_size=1,
        null_blocks=0,
        memory_base="free_before_load",
        default_memory_utilization=0.88,
        default_reserve_bytes=_GiB,
        prefix_caching_default=True,
        prefix_granularity="token",
        notes=(
            "SGLang rules (pool_configurator.py at 003fca80): cell = Σ layers kv_heads × "
            "(head_dim + v_head_dim) × dtype bytes; max_total_num_tokens = available // cell, "
            "rounded down to a multiple of page_size (default 1: no per-request rounding).",
            "mem_fraction_static is a fraction of the free memory measured BEFORE model load; "
            "SGLang auto-picks it by GPU size when not given (0.88 assumed here).",
        ),
    ),
    "trtllm": EngineRules(
        name="trtllm",
        label="TensorRT-LLM",
        default_block_size=32,
        null_blocks=0,
        memory_base="free_after_load",
        default_memory_utilization=0.9,
        default_reserve_bytes=_GiB,
        prefix_caching_default=True,
        prefix_granularity="block",
        notes=(
            "TensorRT-LLM rules (KvCacheConfig docs 1.3/1.4, resource_manager.py): "
            "tokens_per_block 32; KV heads per rank = ceil(Hkv / tp) (allocator); "
            "num_blocks = max_tokens // tokens_per_block (Python path; C++ rounds up).",
            "free_gpu_memory_fraction (0.9) applies to FREE memory after weights and "
            "activations, not to total memory.",
        ),
    ),
    "transformers": EngineRules(
        name="transformers",
        label="transformers",
        default_block_size=1,
        null_blocks=0,
        memory_base="none",
        default_memory_utilization=1.0,
        default_reserve_bytes=_GiB,
        prefix_caching_default=False,
        prefix_granularity="none",
        notes=(
            "transformers 5.x DynamicCache(config) rules (cache_utils.py): tensors "
            "[batch, kv_heads, seq, head_dim] with no paging; sliding layers keep the last "
            "sliding_window − 1 tokens; DeepSeek MLA caches the latent (kv_lora_rank + "
            "qk_rope_head_dim). transformers 4.x decompressed MLA (≈71× larger for DeepSeek-V3).",
        ),
    ),
}


def engine_rules(name: str) -> EngineRules:
    try:
        return ENGINE_RULES[name]
    except KeyError:
        raise FieldError(
            "engine", f"unknown engine {name!r}; use one of: {', '.join(ENGINE_RULES)}"
        ) from None
