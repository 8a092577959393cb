"""SGLang: a token pool (page_size 1 by default), hybrid SWA pools for the architectures that
have them, and a state pool beside the token pool for Mamba-ish hybrids (pools.py, state.py;
python/sglang/srt/mem_cache/memory_pool.py, mem_cache/kv_cache_configurator.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any, ClassVar, Self

from planner.core.budget.terms import BudgetTerms, StartVerdict
from planner.core.capacity import Pool, full_stack, groups_of
from planner.core.engines.base import Engine
from planner.core.engines.reads import LaunchSettings, PlanInputs, Scheduling
from planner.core.engines.sglang import multimodal as mm
from planner.core.engines.sglang import releases as rel
from planner.core.engines.sglang import state as st
from planner.core.engines.sglang.budget import (
    sglang_budget,
    sglang_default_fraction,
    sglang_start_check,
)
from planner.core.engines.sglang.logs import (
    LOG_EXAMPLE,
    LOG_HINTS,
    LOG_RULES,
    LOG_VERSION_MARKERS,
    LOGGED_FLAGS,
)
from planner.core.engines.sglang.pools import (
    StateTokenPool,
    SwaTokenPool,
    TokenPool,
    state_floor,
    swa_floor,
)
from planner.core.engines.versions import Releases, since
from planner.core.errors import FieldError
from planner.core.gemma4 import GEMMA4_TYPES
from planner.core.hardware import Gpu
from planner.core.model import ModelShape, with_layers
from planner.core.notes import Note, note
from planner.core.parallel import Stages
from planner.core.specs import LayerSpec, WindowPolicy
from planner.core.specs_state import StateSpec
from planner.core.units import KVDtype

# SGLang applies SWA pools only to these architectures (`is_hybrid_swa_model`); Gemma-4's
# from releases.GEMMA4_SWA_SINCE.
_SWA_TYPES = {"llama4", "llama4_text", "gpt_oss", "mimo_v2", "step3p5"}
# Models whose file gives SGLang the window less one (get_attention_sliding_window_size).
_EXCLUSIVE_WINDOW = {"gpt_oss", *GEMMA4_TYPES}
# swa_full_tokens_ratio default: the SWA pool holds 0.8 × the full pool's tokens.
SWA_FULL_TOKENS_RATIO = 0.8


@dataclass(frozen=True)
class Sglang(Engine):
    name: ClassVar[str] = "sglang"
    label: ClassVar[str] = "SGLang"
    takes_sglang_flags: ClassVar[bool] = True
    logged_flags = LOGGED_FLAGS
    # Any 0.5.x: the rules read in 0.5.23, and where an older release differs its own
    # (releases.py `*_SINCE`).
    releases: ClassVar[Releases] = Releases((0, 5, 0), last=rel.VERIFIED, default=rel.VERIFIED)
    default_block_size: ClassVar[int] = 1
    memory_base = "free_before_load"
    memory_fraction_flag: ClassVar[str] = "--mem-fraction-static"
    running_cap_flag: ClassVar[str] = "--max-running-requests"
    prefix_granularity = "token"
    limited_by_memory: ClassVar[str] = "kv_tokens"
    long_context_override: ClassVar[str | None] = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
    # The request's --swa-full-tokens-ratio and --max-total-tokens (for_request).
    swa_full_tokens_ratio: float = SWA_FULL_TOKENS_RATIO
    max_total_tokens: int | None = None
    # --enable-dp-attention --dp-size D: attention runs at TP / D, D workers.
    attn_dp: int = 1
    # The state pool's flags (--mamba-full-memory-ratio, --max-mamba-cache-size,
    # --mamba-ssm-dtype), the radix cache (enable_prefix_caching) and --max-running-requests.
    mamba_full_memory_ratio: float | None = None
    max_mamba_cache_size: int | None = None
    mamba_ssm_dtype: str | None = None
    radix_cache: bool = True
    asked_running: int | None = None
    pp_extra_layers = "last"
    # SGLang's --kv-cache-dtype choices that kvplan models (releases.KV_CACHE_DTYPE_CHOICES).
    kv_cache_dtypes: ClassVar[tuple[str, ...]] = rel.KV_CACHE_DTYPES

    def default_memory_utilization(self) -> float:
        return 0.88

    log_block_keys: ClassVar[tuple[str, ...]] = ("page_size",)
    fraction_setting: ClassVar[str] = "mem_fraction_static"
    log_fraction_keys: ClassVar[tuple[str, ...]] = ("mem_fraction_static",)
    fraction_default_known: ClassVar[bool] = False

    log_rules = LOG_RULES
    log_hints = LOG_HINTS
    log_version_markers = LOG_VERSION_MARKERS
    log_example = LOG_EXAMPLE

    def model_dtype(self, shape: ModelShape, requested: str | None) -> tuple[str, list[Note]]:
        # srt/configs/model_config.py `_get_and_verify_dtype` (0.5.21, 0.5.23): auto runs a
        # float32 config in float16, a Gemma one (model_type gemma*) in bfloat16.
        if requested in (None, "auto") and shape.dtype == "fp32":
            dtype = "bf16" if (shape.model_type or "").startswith("gemma") else "fp16"
            return dtype, [note("dtype.fp32_served_16bit", engine=self.label, dtype=dtype)]
        return super().model_dtype(shape, requested)

    def rule_notes(self) -> list[Note]:
        return [
            note("engine.sglang.rules"),
            note("engine.sglang.memory_fraction"),
        ]

    def mem_fraction_static(self, inp: PlanInputs) -> float:
        """--mem-fraction-static, or SGLang's automatic one from the GPU's tiers."""
        req = inp.request
        if req.gpu_memory_utilization is not None:
            return req.gpu_memory_utilization
        assert inp.gpu is not None
        frac, _how = sglang_default_fraction(
            gpu_memory_bytes=inp.gpu.memory_bytes,
            tensor_parallel_size=inp.tp,
            pipeline_parallel_size=inp.pp,
            chunked_prefill_size=req.chunked_prefill_size,
            cuda_graph_max_bs=req.cuda_graph_max_bs,
            max_running_requests=req.max_num_seqs,
            attn_dp_size=self.attn_dp,
            version=self.version,
            is_mla=inp.shape.is_mla,
            max_total_tokens=self.max_total_tokens,
            prefill_graphs_allowed=mm.prefill_graphs_kept(inp.shape.architectures, self.version),
        )
        if mm.is_multimodal(inp.shape.architectures):
            frac = mm.vlm_fraction(frac, inp.model.config)
        return frac

    def derive_budget(self, inp: PlanInputs, weights_per_rank: int) -> BudgetTerms:
        """mem_fraction_static of the memory free before load, less the weights
        (KVCacheConfigurator._profile_available_bytes)."""
        assert inp.gpu is not None
        req = inp.request
        free_before = (
            inp.gpu.memory_bytes - req.non_torch_bytes if req.non_torch_bytes is not None else None
        )
        return sglang_budget(
            total_memory_bytes=inp.gpu.memory_bytes,
            weights_bytes_per_rank=weights_per_rank,
            mem_fraction_static=self.mem_fraction_static(inp),
            tensor_parallel_size=inp.tp,
            pipeline_parallel_size=inp.pp,
            free_memory_before_load_bytes=free_before,
            engine_version=self.version_text,
            reserve_bytes=req.reserve_bytes,
            multimodal_reservation_bytes=(
                mm.VLM_CACHE_BYTES if mm.is_multimodal(inp.shape.architectures) else 0
            ),
        )

    def start_check(
        self, inp: PlanInputs, kv_budget_bytes: int, terms: BudgetTerms | None, pool: Pool
    ) -> StartVerdict:
        if terms is not None:
            free_before = (
                terms.total_memory_bytes - inp.request.non_torch_bytes
                if inp.request.non_torch_bytes is not None
                else None
            )
            verdict = sglang_start_check(budget=terms, free_memory_before_load_bytes=free_before)
            if not verdict.starts:
                return verdict
        if isinstance(pool, SwaTokenPool):
            floor = swa_floor(pool, exclusive=inp.shape.model_type in _EXCLUSIVE_WINDOW)
            if floor is not None:
                return floor
        if isinstance(pool, StateTokenPool):
            refused = state_floor(pool, terms)
            if refused is not None:
                return refused
        if terms is not None:
            return StartVerdict(True, "starts", None, terms.kv_budget_bytes)
        return super().start_check(inp, kv_budget_bytes, terms, pool)

    def bind_state(
        self,
        shape: ModelShape,
        *,
        block_size: int,
        kv: KVDtype,
        model_dtype: str,
        tp: int,
        pp: int,
        prefix_caching: bool,
        max_model_len: int,
        num_spec: int = 0,
        async_scheduling: bool | None = None,
    ) -> tuple[ModelShape, int, list[Note]]:
        """Mamba2/GDN/KDA layers: each running request holds `slots_per_request` state slots."""
        specs = [g.spec for g in shape.groups if isinstance(g.spec, StateSpec)]
        if num_spec or not all(isinstance(x, st.MODELLED) for x in specs):
            return super().bind_state(
                shape, block_size=block_size, kv=kv, model_dtype=model_dtype, tp=tp, pp=pp,
                prefix_caching=prefix_caching, max_model_len=max_model_len, num_spec=num_spec,
            )  # fmt: skip
        arch = shape.architectures[0] if shape.architectures else None
        if pp > 1 and len(shape.layers) != shape.num_hidden_layers:  # Nemotron-H's MLP layers
            raise FieldError(
                "pipeline_parallel_size", "sglang.hybrid_pipeline_unmodelled", arch=arch
            )
        held = st.slots_per_request(arch, self.radix_cache)
        bound = {
            x: x.bind(model_dtype="bf16", held_blocks=held) for x in specs
        }  # conv in SGLANG_MAMBA_CONV_DTYPE (bf16)
        layers = tuple(bound.get(x, x) for x in shape.layers)  # type: ignore[call-overload]
        return with_layers(shape, layers), block_size, [note("state.sglang_pool", held=held)]

    def pool_running_cap(self, pool: Pool, cap: int | None) -> int | None:
        """resolve_max_num_reqs: at most state slots // slots a request holds."""
        if isinstance(pool, StateTokenPool) and cap is not None:
            return min(cap, pool.state.running_cap)
        return cap

    def pool_facts(self, pool: Pool) -> dict[str, int | None]:
        if isinstance(pool, SwaTokenPool):
            return {"swa_pool_tokens": pool.swa_pool_tokens}
        if isinstance(pool, StateTokenPool):
            return {
                "state_pool_slots": max(0, pool.state.slots),
                "state_bytes_per_slot": pool.state.slot_bytes,
            }
        return {}

    def window_policy(
        self, shape: ModelShape, *, hybrid_manager: bool, explicit_windows: bool
    ) -> WindowPolicy:
        swa = shape.model_type in _SWA_TYPES or (
            shape.model_type in GEMMA4_TYPES and since(self.version, rel.GEMMA4_SWA_SINCE)
        )
        return "sglang_swa_pool" if swa else "full_length"

    def window_notes(
        self, policy: WindowPolicy, sched: Scheduling, shape: ModelShape, hybrid_manager: bool
    ) -> list[Note]:
        if policy == "sglang_swa_pool":
            return [note("window.sglang_swa_pool", ratio=self.swa_full_tokens_ratio)]
        return [note("window.full_length_arch", engine=self.label)]

    def kv_heads_per_rank(self, kv_heads: int, tp: int) -> int:
        """get_num_kv_heads(attn_tp_size): with DP attention the heads shard over TP / D."""
        return max(1, kv_heads // max(1, tp // self.attn_dp))

    def validate_parallel(self, shape: ModelShape, tp: int, pp: int) -> None:
        """The model files' head checks run at the attention TP (TP / D with DP attention)."""
        if tp % self.attn_dp:
            raise FieldError(
                "data_parallel_size", "sglang.dp_attention_divides_tp", attn_dp=self.attn_dp, tp=tp
            )
        super().validate_parallel(shape, tp // self.attn_dp, pp)

    def default_max_num_seqs(self, gpu: Gpu | None, pool_tokens: int, ctx: int) -> int | None:
        """max_running_requests = min(clamp(pool tokens / context length × 512, 2048, 4096),
        pool tokens // 2)."""
        return max(1, rel.running_requests(None, pool_tokens, ctx, version=self.version))

    def running_cap(self, asked: int | None, gpu: Gpu | None, tokens: int, ctx: int) -> int | None:
        """An explicit --max-running-requests is clamped to pool tokens // 2 as well."""
        if asked is None:
            return self.default_max_num_seqs(gpu, tokens, ctx)
        return rel.running_requests(asked, tokens, ctx, self.attn_dp, self.version)

    def for_request(self, req: Any) -> Self:
        ratio = getattr(req, "swa_full_tokens_ratio", None)
        return replace(
            self,
            swa_full_tokens_ratio=SWA_FULL_TOKENS_RATIO if ratio is None else ratio,
            max_total_tokens=getattr(req, "max_total_tokens", None),
            attn_dp=(getattr(req, "data_parallel_size", None) or 1)
            if getattr(req, "enable_dp_attention", None)
            else 1,
            mamba_full_memory_ratio=getattr(req, "mamba_full_memory_ratio", None),
            max_mamba_cache_size=getattr(req, "max_mamba_cache_size", None),
            mamba_ssm_dtype=getattr(req, "mamba_ssm_dtype", None),
            radix_cache=getattr(req, "enable_prefix_caching", None) is not False,
            asked_running=getattr(req, "max_num_seqs", None),
        )

    def longest_request(self, pool: Pool, max_len: int | None) -> int | None:
        """max_req_len = min(context_len − 1, pool tokens − 1) (tp_worker.get_worker_info)."""
        return rel.max_req_len(max_len, pool.max_tokens())

    launch_kv_dtypes: ClassVar[dict[str, str]] = {
        "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2", "bf16": "bfloat16",
    }  # fmt: skip

    def context_length(self, shape: ModelShape, requested: int, allow_long: bool) -> int:
        """--context-length: at most the model's own length unless
        SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 (configs/model_config.py)."""
        derived = shape.max_position_embeddings
        if derived is not None and requested > derived and not allow_long:
            raise FieldError(
                "context_length",
                "sglang.context_length_above_derived",
                requested=requested,
                derived=derived,
                long_context_override=self.long_context_override,
            )
        return requested

    def page_on_gpu(
        self, block: int, asked: int | None, shape: ModelShape, gpu: Gpu | None
    ) -> tuple[int, list[Note]]:
        """On SM100 (B200/GB200) SGLang's default backend for MHA models is trtllm_mha, whose
        pages are 16, 32, 64 or 128: any other page, the default 1 included, becomes 64."""
        arch = shape.architectures[0] if shape.architectures else None
        if rel.is_sm100(gpu) and shape.has_state and arch in st.SM100_TRITON_ARCHS:
            return 1, [note("engine.sglang.triton_hybrid_page", asked=block)] if block != 1 else []
        if rel.is_sm100(gpu) and shape.has_state and arch in st.SM100_FLASHINFER_ARCHS:
            return block, []
        if rel.is_sm100(gpu) and not shape.is_mla and block not in rel.TRTLLM_MHA_PAGES:
            return rel.TRTLLM_MHA_DEFAULT_PAGE, [
                note("engine.sglang.trtllm_mha_page", page=rel.TRTLLM_MHA_DEFAULT_PAGE, asked=block)
            ]
        return block, []

    def launch(self, model: str, s: LaunchSettings, instances: int) -> tuple[str, dict[str, str]]:
        parts = [
            f"python -m sglang.launch_server --model-path {model}",
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

    def build_pool(
        self,
        stages: Stages,
        dtype: KVDtype,
        block_size: int,
        policy: WindowPolicy,
        budget_bytes: int,
        sched: Scheduling,
        ctx: int,
    ) -> Pool:
        """Pipeline stages take the smallest token capacity (an all-reduce MIN over the ranks,
        kv_cache_configurator._apply_token_constraints), whatever each admits at `ctx`; from
        0.5.7 to 0.5.20 a stage's SWA pools also hold the next stage's first layer."""
        if policy == "sglang_swa_pool" and rel.swa_stage_takes_next_layer(self.version):
            ordered = stages.ordered()
            with_next = [st + nxt[:1] for st, nxt in pairwise(ordered)]
            stages = Stages.from_ordered([*with_next, ordered[-1]])
        state = self._state_pool(stages, budget_bytes)
        kv_bytes = state.kv_bytes if state is not None else budget_bytes
        pools = [
            self.stage_pool(stack, dtype, block_size, policy, kv_bytes) for stack in stages.stacks
        ]
        pool = min(pools, key=lambda p: p.max_tokens())
        if state is None:
            return pool
        return StateTokenPool(
            pool.groups, pool.num_blocks, 0, pool.unit_tokens, pool.stack, dtype, pool.policy,
            budget_bytes, state=state,
        )  # fmt: skip

    def _state_pool(self, stages: Stages, budget_bytes: int) -> st.StatePool | None:
        """_handle_max_mamba_cache on the profiled rest: every rank charges the largest stage's
        share of the state layers."""
        held = [
            s.held_blocks for stack in stages.stacks for s, _ in stack if isinstance(s, StateSpec)
        ]
        if not held:
            return None
        per_slot = max(st.slot_bytes(stack, self.mamba_ssm_dtype) for stack in stages.stacks)
        return st.state_pool(
            budget_bytes, per_slot, ratio=self.mamba_full_memory_ratio,
            max_slots=self.max_mamba_cache_size, running=self.asked_running,
            radix_cache=self.radix_cache, per_request=held[0], attn_dp=self.attn_dp,
        )  # fmt: skip

    def _capped(self, tokens: int, page: int) -> int:
        """Whole pages, at most --max-total-tokens (kv_cache_configurator.config_from_budget)."""
        if self.max_total_tokens is not None:
            tokens = min(tokens, self.max_total_tokens)
        return tokens // page * page

    def stage_pool(
        self,
        stack: tuple[tuple[LayerSpec, int], ...],
        dtype: KVDtype,
        page: int,
        policy: WindowPolicy,
        budget_bytes: int,
    ) -> Pool:
        per_token = sum(n * s.bytes_per_token(dtype) for s, n in stack)
        if policy == "sglang_swa_pool":
            # SWA layers are the sliding ones and, for Llama-4, the chunked-attention ones
            # (get_hybrid_layer_ids); both pools are aligned down to whole pages.
            swa = sum(n * s.bytes_per_token(dtype) for s, n in stack if s.is_window)
            ratio = self.swa_full_tokens_ratio
            cell = per_token - swa + ratio * swa
            tokens = self._capped(int(budget_bytes // cell) if cell else 0, page)
            swa_tokens = int(tokens * ratio) // page * page
            return SwaTokenPool(
                groups_of(stack, page), tokens // page, 0, page, stack, dtype, policy,
                budget_bytes, swa_pool_tokens=swa_tokens,
            )  # fmt: skip
        tokens = self._capped(budget_bytes // per_token if per_token else 0, page)
        full = full_stack(stack)
        return TokenPool(
            groups_of(full, page), tokens // page, 0, page, full, dtype, "full_length",
            budget_bytes,
        )  # fmt: skip


__all__ = ["Sglang", "SwaTokenPool", "TokenPool"]
