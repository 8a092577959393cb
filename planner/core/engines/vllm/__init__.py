"""vLLM (V1 engine), releases 0.9 to 0.33: its rules keyed by the releases in which they held.
Sources are vLLM's own files at the tags named; docs/engine-rules.md lists them with links."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, ClassVar

from planner.core.budget.facts import model_facts
from planner.core.budget.terms import BudgetTerms, StartVerdict
from planner.core.capacity import Pool
from planner.core.engines.base import Engine
from planner.core.engines.reads import LaunchSettings, PlanInputs, Scheduling
from planner.core.engines.versions import Releases, since
from planner.core.engines.vllm.budget import vllm_budget
from planner.core.engines.vllm.drafts import async_takes_draft, refuse_draft, speculation_at
from planner.core.engines.vllm.groups import VllmPool, vllm_groups, vllm_pipeline_pool
from planner.core.engines.vllm.hybrid import VllmStateLayers
from planner.core.engines.vllm.launch import big_gpu, vllm_serve_command
from planner.core.engines.vllm.layer_rules import (
    VllmLayerBlocks,
    bind_chunked,
    bind_sparse_mla,
    check_shared_kv_parallel,
    sparse_mla_block,
)
from planner.core.engines.vllm.logs import (
    LOG_EXAMPLE,
    LOG_HINTS,
    LOG_RULES,
    LOG_VERSION_MARKERS,
    V0_KINDS,
    V1_KINDS,
    release_of_lines,
    version_from_log,
)
from planner.core.engines.vllm.need import estimate_max_len, startup_need
from planner.core.engines.vllm.quant_gpu import check_quantization_on_gpu
from planner.core.engines.vllm.refusals import refuse, refuse_pipeline
from planner.core.engines.vllm.releases import (
    ASYNC_DEFAULT_SINCE,
    ASYNC_SCHEDULING_SINCE,
    ASYNC_WITH_PP_SINCE,
    BIG_GPU_16K_SINCE,
    CHUNKED_HYBRID_DEFAULT_SINCE,
    FLASHMLA_BLOCK,
    GROUP_RATIO_15_SINCE,
    GROUP_RATIO_125_SINCE,
    HYBRID_ALLOCATOR_SINCE,
    IN_FLIGHT_ADMISSION_SINCE,
    KV_DTYPE_SINCE,
    LOG_AFTER_MIN_SINCE,
    MLA_BACKEND_PRIORITY_SINCE,
    MLA_BLOCK_HONOURED_SINCE,
    RELEASES,
    TOKENS_FROM_CONCURRENCY_SINCE,
    UTIL_092_SINCE,
    WHOLE_MODEL_GROUPS_SINCE,
)
from planner.core.engines.vllm.rules import derived_max_model_len
from planner.core.engines.vllm.runner import concurrent_batches
from planner.core.engines.vllm.start import (
    vllm_check_memory_bytes,
    vllm_estimate_max_model_len,
    vllm_start_check,
)
from planner.core.engines.vllm.terms import vllm_loaded_weights
from planner.core.errors import FieldError
from planner.core.hardware import Gpu
from planner.core.model import ModelShape
from planner.core.notes import Note, Param, note
from planner.core.parallel import Stages
from planner.core.specs import ChunkedLocalSpec, LayerSpec, Stack, WindowPolicy
from planner.core.speculative import Speculation
from planner.core.units import GiB, KVDtype


@dataclass(frozen=True)
class Vllm(VllmStateLayers, VllmLayerBlocks, Engine):
    name: ClassVar[str] = "vllm"
    label: ClassVar[str] = "vLLM"
    releases: ClassVar[Releases] = RELEASES
    default_block_size: ClassVar[int] = 16
    null_blocks: ClassVar[int] = 1
    memory_base = "total"
    memory_fraction_flag: ClassVar[str] = "--gpu-memory-utilization"
    running_cap_flag: ClassVar[str] = "--max-num-seqs"
    kv_sharing = speculative_drafts = True  # Gemma-3n sharing, draft layers (layer_rules)
    takes_async_scheduling: ClassVar[bool] = True
    long_context_override: ClassVar[str | None] = "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
    context_checked_early: ClassVar[bool] = True  # ModelConfig, before VllmConfig's checks
    # CacheDType (vllm/config/cache.py): the names each release has (KV_DTYPE_SINCE).
    kv_cache_dtypes: ClassVar[tuple[str, ...]] = (
        "auto", "fp16", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
        "int8_per_token_head", "fp8_per_token_head",
    )  # fmt: skip

    def kv_cache_dtype_names(self) -> tuple[str, ...]:
        first = KV_DTYPE_SINCE.get
        return tuple(n for n in self.kv_cache_dtypes if since(self.version, first(n, (0,))))

    def default_memory_utilization(self) -> float:
        return 0.92 if since(self.version, UTIL_092_SINCE) else 0.9

    @property
    def group_ratio(self) -> float:
        """Hybrid grouping: the largest bucket sets the group size when below ratio × smallest."""
        if since(self.version, GROUP_RATIO_15_SINCE):
            return 1.5
        return 1.25 if since(self.version, GROUP_RATIO_125_SINCE) else 1.0

    @property
    def tokens_from_concurrency(self) -> bool:
        """Whether "GPU KV cache size" is int(max_concurrency × max_model_len)."""
        return since(self.version, TOKENS_FROM_CONCURRENCY_SINCE)

    def rule_notes(self) -> list[Note]:
        return [
            note("engine.vllm.rules", version=self.version_text),
            note(
                "engine.vllm.memory_fraction",
                default=self.default_memory_utilization(),
                version=self.version_text,
            ),
        ]

    # -- refusals ----------------------------------------------------------------------------
    def validate(
        self,
        shape: ModelShape,
        tp: int,
        pp: int,
        kv_dtype: KVDtype,
        model_dtype: str,
        kv_explicit: bool = True,
    ) -> None:
        super().validate(shape, tp, pp, kv_dtype, model_dtype, kv_explicit)
        refuse(self.version, shape, tp, kv_dtype, model_dtype, kv_explicit)
        refuse_pipeline(self.version, pp)
        check_shared_kv_parallel(shape, pp)

    def check_gpu(self, shape: ModelShape, gpu: Gpu) -> None:
        check_quantization_on_gpu(self.version, shape, gpu)

    def bind_layers(self, shape: ModelShape, kv: KVDtype, model_dtype: str) -> ModelShape:
        return bind_chunked(self.version, bind_sparse_mla(self.version, shape))

    # -- settings ----------------------------------------------------------------------------
    def block_size(
        self, requested: int | None, shape: ModelShape, kv_dtype: KVDtype
    ) -> tuple[int, list[Note]]:
        if (sparse := sparse_mla_block(requested, shape)) is not None:
            return sparse
        if not shape.is_mla:
            block = requested or self.default_block_size
            windows = all(s.is_window for s in shape.layers)  # a layer's own block is the pool's
            return (self.layer_block_size(shape.layers[0], block) if windows else block), []
        # MLA on Hopper: the attention backend's kernel block size decides (cuda.py
        # check_and_update_config, the backends' kernel block sizes).
        if not since(self.version, MLA_BACKEND_PRIORITY_SINCE):
            block = FLASHMLA_BLOCK  # FlashMLA whatever was asked
        elif not since(self.version, MLA_BLOCK_HONOURED_SINCE):
            # Blocks forced to 64 unless a multiple of 64.
            block = requested if requested and requested % FLASHMLA_BLOCK == 0 else FLASHMLA_BLOCK
        elif requested is not None:
            block = requested  # a backend that supports it is chosen
        else:
            # FlashMLA (64) for fp8 caches, FlashAttention-MLA (16) for 16-bit ones.
            block = FLASHMLA_BLOCK if kv_dtype.bits == 8 else self.default_block_size
        return block, [note("block.vllm_mla_forced", block=block)]

    def window_policy(
        self, shape: ModelShape, *, hybrid_manager: bool, explicit_windows: bool
    ) -> WindowPolicy:
        if self.chunked_full_length(shape):
            # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaulted to 0: the hybrid
            # manager is off for chunked local attention, every layer sized full length.
            return "full_length"
        if hybrid_manager and since(self.version, HYBRID_ALLOCATOR_SINCE):  # 0.9.0 has none
            return "window"
        # --disable-hybrid-kv-cache-manager rewrites window specs as full-attention ones only
        # when full layers are present too; a model whose layers all slide (Mistral-7B) is
        # already uniform and keeps its window (unify_hybrid_kv_cache_specs); drafts included.
        windows = any(g.spec.is_window for g in shape.groups)
        full = any(not g.spec.is_window for g in shape.groups)
        return "full_length" if windows and full else "window"

    def chunked_full_length(self, shape: ModelShape) -> bool:
        return self.chunked_sized_full(shape.layers)

    def chunked_sized_full(self, layers: Iterable[LayerSpec]) -> bool:
        """Whether chunked local-attention layers are among `layers` and the release sizes
        them full length (the hybrid manager off for them by its env default)."""
        chunked = any(isinstance(s, ChunkedLocalSpec) for s in layers)
        return chunked and not since(self.version, CHUNKED_HYBRID_DEFAULT_SINCE)

    def window_notes(
        self, policy: WindowPolicy, sched: Scheduling, shape: ModelShape, hybrid_manager: bool
    ) -> list[Note]:
        if policy == "full_length":
            return [note("window.vllm_hybrid_disabled")]
        out = [
            note(
                "window.vllm_admission",
                in_flight=sched.in_flight_tokens,
                mnbt=sched.max_num_batched_tokens,
                batches=sched.in_flight_tokens // max(1, sched.max_num_batched_tokens),
            )
        ]
        if sched.async_scheduling:
            out.append(
                note(
                    "engine.vllm.async_scheduling",
                    version=self.version_text,
                    why=sched.why,
                    in_flight=sched.in_flight_tokens,
                    batches=sched.concurrent_batches,
                    mnbt=sched.max_num_batched_tokens,
                )
            )
        if any(isinstance(g.spec, ChunkedLocalSpec) for g in shape.groups):
            out.append(note("window.vllm_chunked_hybrid"))
        if not hybrid_manager:
            out.append(note("window.vllm_disable_hybrid_noop"))
        return out

    def async_default(self, pp: int) -> bool:
        if not since(self.version, ASYNC_DEFAULT_SINCE):
            return False
        # 0.14 disabled it with pipeline parallelism; from 0.15 PP keeps it (0.31+ only on the
        # V1 runner, and the V2 runner is the default from 0.29).
        return not (pp > 1 and self.version[:2] == ASYNC_DEFAULT_SINCE)

    def concurrent_batches(
        self, async_on: bool, pp: int, shape: ModelShape | None = None, spec: str | None = None
    ) -> int:
        return concurrent_batches(self.version, async_on, pp, shape, spec)

    def scheduling(
        self, requested_mnbt: int | None, requested_async: bool | None, gpu: Gpu | None, pp: int,
        shape: ModelShape | None = None, spec: str | None = None,
    ) -> Scheduling:  # fmt: skip
        mnbt = requested_mnbt or self.default_max_num_batched_tokens(gpu)
        refuse_draft(self.version, spec, pp, requested_async)
        if requested_async is None:
            on = self.async_default(pp) and async_takes_draft(self.version, spec)
            why = f"the default of vLLM {self.version_text}"
        else:
            on = requested_async
            why = "async_scheduling=true"
            if on and not since(self.version, ASYNC_SCHEDULING_SINCE):  # no such argument
                raise FieldError("async_scheduling", "vllm.async_scheduling_unknown")
            if on and pp > 1 and not since(self.version, ASYNC_WITH_PP_SINCE):
                raise FieldError(
                    "async_scheduling",
                    "vllm.async_scheduling_with_pp",
                    version=self.version_text,
                )
        batches = self.concurrent_batches(on, pp, shape, spec)
        in_flight = batches * mnbt if since(self.version, IN_FLIGHT_ADMISSION_SINCE) else mnbt
        return Scheduling(mnbt, on, in_flight, batches, why)

    def default_max_num_batched_tokens(self, gpu: Gpu | None) -> int:
        """`vllm serve` defaults: 8192 on >= 70 GiB GPUs other than A100, else 2048 (vLLM tests
        the device *name* for "a100"); from 0.28, 16384 on GPUs of 160 GiB or more."""
        if not big_gpu(gpu):
            return 2048
        if (
            gpu is not None
            and since(self.version, BIG_GPU_16K_SINCE)
            and (gpu.memory_bytes >= 160 * GiB)
        ):
            return 16384
        return 8192

    def default_max_num_seqs(self, gpu: Gpu | None, pool_tokens: int, ctx: int) -> int | None:
        """max_num_seqs 1024 on >= 70 GiB GPUs other than A100, else 256."""
        return 1024 if big_gpu(gpu) else 256

    def reports_max_num_batched_tokens(self) -> bool:
        return True

    def max_model_len(self, shape: ModelShape) -> int | None:
        return derived_max_model_len(shape)

    def speculation(self, sp: Speculation) -> Speculation:
        return speculation_at(self.version, sp)

    # -- the memory budget -------------------------------------------------------------------
    def loaded_weights(self, inp: PlanInputs, num_parameters: int) -> tuple[int, Note] | None:
        return vllm_loaded_weights(inp, num_parameters)

    def derive_budget(self, inp: PlanInputs, weights_per_rank: int) -> BudgetTerms:
        assert inp.gpu is not None
        req = inp.request
        return vllm_budget(
            engine_version=self.version_text,
            total_memory_bytes=inp.gpu.memory_bytes,
            weights_bytes_per_rank=weights_per_rank,
            model=model_facts(inp.model_dtype, inp.model.config, inp.shape),
            max_num_seqs=req.max_num_seqs or self.default_max_num_seqs(inp.gpu, 0, 0) or 256,
            max_num_batched_tokens=inp.sched.max_num_batched_tokens,
            gpu_memory_utilization=req.gpu_memory_utilization,
            tensor_parallel_size=inp.tp,
            pipeline_parallel_size=inp.pp,
            enforce_eager=bool(req.enforce_eager),
            activation_peak_bytes=req.activation_peak_bytes,
            non_torch_bytes=req.non_torch_bytes,
            cuda_graph_bytes=req.cuda_graph_bytes,
            reserve_bytes=req.reserve_bytes,
        )

    def startup_need(
        self, pool: VllmPool, stage_stacks: Sequence[Stack], whole_model: Callable[[], Stack]
    ) -> Callable[[int], int]:
        """What the start check counts for one request of a length (plan() and log reader)."""
        return startup_need(self, pool, stage_stacks, whole_model)

    def estimate_max_len(
        self, pool: VllmPool, need: Callable[[int], int], check: int, stacks: Sequence[Stack]
    ) -> int:
        """vLLM's estimate of the longest max_model_len over its check's memory (`check`)."""
        return estimate_max_len(pool, need, check, stacks)

    def _need(self, inp: PlanInputs, pool: VllmPool) -> tuple[Callable[[int], int], Stages]:
        stages = Stages.of(inp.shape, self, inp.tp, inp.pp)

        def whole_model() -> Stack:
            return Stages.of(inp.shape, self, inp.tp, 1).stacks[0]

        return self.startup_need(pool, stages.stacks, whole_model), stages

    def start_check(
        self, inp: PlanInputs, kv_budget_bytes: int, terms: BudgetTerms | None, pool: Pool
    ) -> StartVerdict:
        """vLLM's own checks: memory for the cache blocks, then one request of max_model_len,
        with the null block held back from 0.29."""
        assert isinstance(pool, VllmPool)
        need, _ = self._need(inp, pool)
        max_len = inp.context_tokens
        return vllm_start_check(
            engine_version=self.version_text,
            kv_budget_bytes=terms.kv_budget_bytes if terms is not None else kv_budget_bytes,
            bytes_needed_for_one_max_len_request=need(max_len),
            max_model_len=max_len,
            estimate_max_model_len=lambda check: vllm_estimate_max_model_len(check, max_len, need),
            pool_bytes_per_block=pool.block_bytes,
        )

    def max_model_len_estimate(
        self, inp: PlanInputs, kv_budget_bytes: int, pool: Pool
    ) -> int | None:
        """vLLM's own estimate of the longest max_model_len (`estimate_max_model_len`): before
        0.29 over the whole budget, from 0.29 with the null block held back."""
        assert isinstance(pool, VllmPool)
        check = vllm_check_memory_bytes(self.version_text, kv_budget_bytes, pool.block_bytes)
        if check <= 0:
            return 0
        need, stages = self._need(inp, pool)
        return self.estimate_max_len(pool, need, check, stages.stacks)

    # -- its logs ----------------------------------------------------------------------------
    log_generations: ClassVar[bool] = True
    log_rules = LOG_RULES
    log_hints = LOG_HINTS
    log_version_markers = LOG_VERSION_MARKERS
    log_example = LOG_EXAMPLE

    def generation_from_log(self, kinds: AbstractSet[str]) -> str | None:
        """v1 when any v1-only line is there, else v0 when a v0 line is, else v1."""
        if kinds & V1_KINDS:
            return "v1"
        return "v0" if kinds & V0_KINDS else "v1"

    def version_from_log(self, facts: Sequence[Any]) -> tuple[str, str, dict[str, Param]] | None:
        return version_from_log(facts)

    def release_of_lines(self, facts: Sequence[Any]) -> tuple[str, str] | None:
        return release_of_lines(facts)

    # -- launch flags ------------------------------------------------------------------------
    launch_kv_dtypes: ClassVar[dict[str, str]] = {
        "fp8": "fp8", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2", "bf16": "bfloat16",
    }  # fmt: skip

    def launch(self, model: str, s: LaunchSettings, instances: int) -> tuple[str, dict[str, str]]:
        return vllm_serve_command(model, s, instances)

    # -- the pool ----------------------------------------------------------------------------
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
        return vllm_pipeline_pool(
            stages.stacks[0] if len(stages) == 1 else stages.ordered(),
            dtype,
            block_size,
            policy,
            budget_bytes,
            sched.in_flight_tokens,
            null_blocks=self.null_blocks,
            tokens_from_concurrency=self.tokens_from_concurrency,
            group_ratio=self.group_ratio,
            log_first_worker=not since(self.version, LOG_AFTER_MIN_SINCE),
            stage_groups=not since(self.version, WHOLE_MODEL_GROUPS_SINCE),
            concurrency_from_tokens=not since(self.version, HYBRID_ALLOCATOR_SINCE),
            reserved_tokens=sched.reserved_tokens,
            length_cap=ctx,
        )


__all__ = ["RELEASES", "Vllm", "VllmPool", "vllm_groups", "vllm_pipeline_pool"]
