"""What an engine is to the planner: one object per engine and version, owning its rules.

An engine knows its defaults for a version and GPU, KV heads per rank, what it refuses (with its
own reason), how it treats window layers, how it builds its pool from the layers of each
pipeline stage, the figures its log prints, and its flag names. Nothing outside this package
asks an engine for its name to decide what to do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from planner.core.budget.terms import BudgetTerms, StartVerdict, Term, TermSource
from planner.core.capacity import Pool
from planner.core.engines.flags import EngineFlags
from planner.core.engines.reads import LaunchSettings, PlanInputs, Scheduling
from planner.core.engines.versions import Releases, Version, version_text
from planner.core.errors import FieldError
from planner.core.hardware import Gpu
from planner.core.model import ModelShape
from planner.core.notes import Note, Param, note
from planner.core.parallel import ExtraLayers, Stages
from planner.core.specs import LayerSpec, WindowPolicy, cdiv
from planner.core.speculative import Speculation
from planner.core.units import GiB, KVDtype, fmt_gib

if TYPE_CHECKING:
    from planner.core.logs.lines import Rule

MemoryBase = Literal["total", "free_before_load", "free_after_load", "none"]
PrefixGranularity = Literal["block", "token", "none"]
TP_SIZES = (1, 2, 4, 8, 16, 32, 64)
EXTRA_OPTIONS_FILE = "kv_cache_config.yaml"


@dataclass(frozen=True, slots=True)
class Engine(EngineFlags):
    """One engine at one version. Subclasses set the class attributes and override rules."""

    version: Version

    name: ClassVar[str]
    label: ClassVar[str]
    releases: ClassVar[Releases]
    default_block_size: ClassVar[int]
    null_blocks: ClassVar[int] = 0
    memory_base: ClassVar[MemoryBase]
    memory_fraction_flag: ClassVar[str]
    running_cap_flag: ClassVar[str]
    default_reserve_bytes: ClassVar[int] = GiB
    prefix_caching_default: ClassVar[bool] = True
    prefix_granularity: ClassVar[PrefixGranularity] = "block"
    limited_by_memory: ClassVar[str] = "kv_blocks"
    pp_extra_layers: ClassVar[ExtraLayers] = "before_last"
    paged: ClassVar[bool] = True
    serves: ClassVar[bool] = True  # has a server launch command (recommend)
    reads_logs: ClassVar[bool] = True  # its start-up logs can be reconciled
    takes_max_attention_window: ClassVar[bool] = False
    takes_async_scheduling: ClassVar[bool] = False
    # The setting that lets the engine serve past the model's maximum length, when it refuses
    # to otherwise (None: the engine does not refuse).
    long_context_override: ClassVar[str | None] = None
    # Whether that refusal comes before the engine's other ones (all but the model dtype's).
    context_checked_early: ClassVar[bool] = False
    serves_fp32: ClassVar[bool] = False  # whether fp32 checkpoints run in fp32
    # Whether kvplan models the engine's KV sharing across layers (Gemma-3n) and its
    # speculative-decoding draft layers; engines without either refuse such a request.
    kv_sharing: ClassVar[bool] = False
    speculative_drafts: ClassVar[bool] = False
    kv_cache_dtypes: ClassVar[tuple[str, ...]] = (
        "auto", "fp16", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2",
    )  # fmt: skip

    # -- identity ----------------------------------------------------------------------------
    @property
    def version_text(self) -> str:
        return version_text(self.version)

    def default_memory_utilization(self) -> float:
        raise NotImplementedError

    def rule_notes(self) -> list[Note]:
        return []

    # -- validation (what the engine refuses) ------------------------------------------------
    def check_gpu(self, shape: ModelShape, gpu: Gpu) -> None:
        """Raise FieldError("gpu") where the engine cannot run this checkpoint on `gpu`."""

    def validate(
        self,
        shape: ModelShape,
        tp: int,
        pp: int,
        kv_dtype: KVDtype,
        model_dtype: str,
        kv_explicit: bool = True,
    ) -> None:
        """Raise FieldError, with the engine's own reason, for a setup it refuses (an explicit
        kv_cache_dtype must be one the release names; auto is the model's own)."""
        names = self.kv_cache_dtype_names()
        if kv_explicit and kv_dtype.name not in names:
            raise FieldError(
                "kv_cache_dtype",
                "engine.kv_dtype_unsupported",
                label=self.label,
                version=self.version_text,
                dtype=kv_dtype.name,
                names=", ".join(names),
            )
        shared = [i for i, s in enumerate(shape.layers) if not s.owns_kv]
        if shared and not self.kv_sharing:
            raise FieldError(
                ("model", "num_kv_shared_layers"),
                "engine.kv_sharing_unmodelled",
                label=self.label,
                n_shared=len(shared),
                layers=shape.num_hidden_layers,
            )
        self.validate_parallel(shape, tp, pp)

    def speculation(self, sp: Speculation) -> Speculation:
        """The speculative draft as this release sizes it (FieldError for a method it lacks)."""
        return sp

    def validate_parallel(self, shape: ModelShape, tp: int, pp: int) -> None:
        """The parallel sizes the engine accepts for this model."""
        if pp > shape.num_hidden_layers:
            raise FieldError(
                "pipeline_parallel_size",
                "engine.too_many_stages",
                pp=pp,
                layers=shape.num_hidden_layers,
            )
        hq = shape.num_attention_heads
        if hq % tp:
            ok = [t for t in TP_SIZES if hq % t == 0]
            raise FieldError(
                "tensor_parallel_size",
                "engine.tp_divides_heads",
                label=self.label,
                hq=hq,
                tp=tp,
                ok=ok,
            )
        if not shape.is_mla and shape.attention_spec is not None:
            self.validate_kv_heads(shape.num_key_value_heads, hq, tp)
        for g in shape.groups:
            for what, value in g.spec.tp_divisors():
                if value % tp:
                    ok = [t for t in TP_SIZES if value % t == 0 and hq % t == 0]
                    raise FieldError(
                        "tensor_parallel_size",
                        "engine.tp_divides_state",
                        label=self.label,
                        what=what,
                        value=value,
                        tp=tp,
                        ok=ok,
                    )

    def validate_kv_heads(self, hkv: int, hq: int, tp: int) -> None:
        """vLLM and SGLang: divisible when heads ≥ ranks, else ranks a multiple of heads."""
        ok = [t for t in TP_SIZES if hq % t == 0 and (hkv % t == 0 if hkv >= t else t % hkv == 0)]
        facts = {"label": self.label, "hkv": hkv, "tp": tp, "ok": ok}
        if hkv >= tp and hkv % tp:
            raise FieldError("tensor_parallel_size", "engine.tp_divides_kv_heads", **facts)
        if hkv < tp and tp % hkv:
            raise FieldError("tensor_parallel_size", "engine.tp_multiple_of_kv_heads", **facts)

    def kv_cache_dtype_names(self) -> tuple[str, ...]:
        """The KV-cache dtypes this release accepts (kvplan's names)."""
        return self.kv_cache_dtypes

    def bind_layers(self, shape: ModelShape, kv: KVDtype, model_dtype: str) -> ModelShape:
        """The shape with its layers stored as this engine stores them (as parsed by default)."""
        return shape

    # -- state layers (Mamba, linear attention) -----------------------------------------------
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
        """The shape with its state layers sized by this engine, its block size, and notes."""
        arch = shape.model_type or "this model"
        raise FieldError("engine", "engine.state_layers_unmodelled", label=self.label, arch=arch)

    def state_prefix_caching(self, requested: bool | None) -> bool:
        """Whether prefix caching is on for a model with state layers (None: not asked)."""
        return self.prefix_caching_default if requested is None else requested

    # -- per-rank shapes ---------------------------------------------------------------------
    def kv_heads_per_rank(self, kv_heads: int, tp: int) -> int:
        return max(1, kv_heads // tp)  # vLLM / SGLang get_num_kv_heads

    def rank_spec(self, spec: LayerSpec, tp: int) -> LayerSpec:
        return spec.on_rank(tp, self.kv_heads_per_rank(spec.kv_heads, tp))

    def parallel_notes(self, shape: ModelShape, tp: int, dtype: KVDtype) -> list[Note]:
        """Quirks of this engine's sharding worth telling (none by default)."""
        return []

    # -- settings ----------------------------------------------------------------------------
    def block_size(
        self, requested: int | None, shape: ModelShape, kv_dtype: KVDtype
    ) -> tuple[int, list[Note]]:
        """The block size used, and notes when the engine would force or ignore it."""
        return requested or self.default_block_size, []

    def layer_block_size(self, spec: LayerSpec, block: int) -> int:
        """The block one layer's own page is counted in, before any grouping (the block)."""
        return block

    def window_policy(
        self, shape: ModelShape, *, hybrid_manager: bool, explicit_windows: bool
    ) -> WindowPolicy:
        return "window"

    def window_notes(
        self, policy: WindowPolicy, sched: Scheduling, shape: ModelShape, hybrid_manager: bool
    ) -> list[Note]:
        return []

    def model_dtype(self, shape: ModelShape, requested: str | None) -> tuple[str, list[Note]]:
        """The dtype the model runs in, weights included (vLLM's --dtype; auto = the config's,
        except that engines without fp32 serving run float32 checkpoints in 16 bits)."""
        if requested not in (None, "auto"):
            names = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16"}
            return names.get(requested or "", requested or ""), []
        if shape.dtype == "fp32" and not self.serves_fp32:
            # vLLM 0.9–0.33 `_resolve_auto_dtype`: CUDA's first supported dtype, bf16 from cc 8.0
            return "bf16", [note("dtype.fp32_served_16bit", engine=self.label, dtype="bf16")]
        return shape.dtype, []

    def scheduling(
        self, requested_mnbt: int | None, requested_async: bool | None, gpu: Gpu | None, pp: int,
        shape: ModelShape | None = None, spec: str | None = None,
    ) -> Scheduling:  # fmt: skip
        """The scheduler settings; `shape` and `spec` (the speculative method) are for engines
        whose runner depends on the model."""
        mnbt = requested_mnbt or self.default_max_num_batched_tokens(gpu)
        return Scheduling(mnbt, None, mnbt, 1)

    def default_max_num_batched_tokens(self, gpu: Gpu | None) -> int:
        return 8192

    def default_max_num_seqs(self, gpu: Gpu | None, pool_tokens: int, ctx: int) -> int | None:
        return None

    def running_cap(self, asked: int | None, gpu: Gpu | None, tokens: int, ctx: int) -> int | None:
        """The running-request limit: as asked, else the engine's default."""
        return asked or self.default_max_num_seqs(gpu, tokens, ctx)

    def max_model_len(self, shape: ModelShape) -> int | None:
        return shape.max_position_embeddings

    def reports_max_num_batched_tokens(self) -> bool:
        return False

    # -- the memory budget -------------------------------------------------------------------
    def loaded_weights(self, inp: PlanInputs, num_parameters: int) -> tuple[int, Note] | None:
        """Weights one rank holds where the engine loads a checkpoint larger than its files
        (vLLM pads MXFP4 experts), with the note that says so; None: the checkpoint's size."""
        return None

    def derive_budget(self, inp: PlanInputs, weights_per_rank: int) -> BudgetTerms:
        """The KV budget per GPU the engine computes from the GPU (engines without a modelled
        start-up profile: the fraction of memory less weights and a flat reserve)."""
        assert inp.gpu is not None
        req = inp.request
        util = req.gpu_memory_utilization or self.default_memory_utilization()
        reserve = req.reserve_bytes if req.reserve_bytes is not None else self.default_reserve_bytes
        mem = inp.gpu.memory_bytes
        label = self.memory_fraction_flag.lstrip("-").replace("-", "_")
        if self.memory_base == "free_after_load":
            budget = math.floor((mem - weights_per_rank - reserve) * util)
            requested = mem
            how = (
                f"({fmt_gib(mem)} − weights {fmt_gib(weights_per_rank)} − reserve "
                f"{fmt_gib(reserve)}) × {label} {util:g}"
            )
        else:
            requested = math.ceil(mem * util)
            budget = requested - weights_per_rank - reserve
            how = (
                f"{fmt_gib(mem)} × {label} {util:g} − weights {fmt_gib(weights_per_rank)} − "
                f"reserve {fmt_gib(reserve)}"
            )
        source: TermSource = "override" if req.reserve_bytes is not None else "engine_rule"
        none = Term(0, "not modelled for this engine (inside the reserve)", "not_applicable")
        return BudgetTerms(
            engine=self.name,
            engine_version=self.version_text,
            rule="fraction − weights − reserve",
            total_memory_bytes=mem,
            memory_fraction=util,
            requested_bytes=requested,
            weights_bytes_per_rank=Term(weights_per_rank, "weights per rank", "input"),
            activation_peak_bytes=none,
            non_torch_bytes=none,
            cuda_graph_bytes=none,
            cuda_graph_subtracted=False,
            reserve_bytes=Term(reserve, f"reserve {fmt_gib(reserve)}", source),
            kv_budget_bytes=budget,
            derivation=f"{how} = {fmt_gib(max(0, budget))} per GPU",
        )

    def start_check(
        self, inp: PlanInputs, kv_budget_bytes: int, terms: BudgetTerms | None, pool: Pool
    ) -> StartVerdict:
        """Whether the engine's own start-up checks pass (by default: some KV memory left)."""
        if kv_budget_bytes > 0 and pool.max_requests(1) > 0:
            return StartVerdict(True, "starts", None)
        return StartVerdict(False, "no_kv_memory", None)

    def max_model_len_estimate(
        self, inp: PlanInputs, kv_budget_bytes: int, pool: Pool
    ) -> int | None:
        """The engine's own estimate of the longest max_model_len, where it prints one."""
        return None

    # -- its logs ----------------------------------------------------------------------------
    log_block_keys: ClassVar[tuple[str, ...]] = ("block_size",)  # argument-dump names
    fraction_setting: ClassVar[str] = "gpu_memory_utilization"  # reconcile settings field
    log_fraction_keys: ClassVar[tuple[str, ...]] = ("gpu_memory_utilization",)
    fraction_default_known: ClassVar[bool] = True  # False: the engine picks it at start-up
    log_generations: ClassVar[bool] = False  # logs come from engine generations (vLLM v0/v1)
    # The lines it prints, as parse rules (tried in registry order; the first match wins), words
    # that name it in lines no rule knows, and the lower-case markers of its version line.
    log_rules: ClassVar[tuple[Rule, ...]] = ()
    log_hints: ClassVar[tuple[str, ...]] = ()
    log_version_markers: ClassVar[tuple[str, ...]] = ()
    log_example: ClassVar[str] = ""  # its typical KV-cache line(s), quoted, for error messages

    def generation_from_log(self, kinds: AbstractSet[str]) -> str | None:
        """The engine generation ("v0", "v1") whose lines the log holds, where it has several."""
        return None

    def version_from_log(self, facts: Sequence[Any]) -> tuple[str, str, dict[str, Param]] | None:
        """(release, the code of a note saying how it was inferred, that note's own params;
        reconcile adds `engine` and `version`) from a log's own lines, where they tell."""
        return None

    def release_of_lines(self, facts: Sequence[Any]) -> tuple[str, str] | None:
        """(release, the lines that say so) where every source line the log prints is one
        release's alone (to hold against the release its version line names)."""
        return None

    # -- launch flags ------------------------------------------------------------------------
    # kvplan KV dtype name → the engine's flag value, for dtypes other than the model's own.
    launch_kv_dtypes: ClassVar[dict[str, str]] = {}

    def launch(self, model: str, s: LaunchSettings, instances: int) -> tuple[str, dict[str, str]]:
        """(command line, extra files by name) for `instances` replicas; `model` is quoted."""
        raise FieldError("engine", "engine.no_launch_command", label=self.label)

    def replicas_note(self, instances: int, tp: int) -> Note | None:
        """How to run several replicas, where the engine has no data-parallel flag."""
        return None

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
        """The pool of the stage that limits capacity: engines size each stage's own layers
        (`stage_pool`) and take the minimum over workers (vLLM, whose groups span the whole
        model, overrides this)."""
        pools = [
            self.stage_pool(st, dtype, block_size, policy, budget_bytes) for st in stages.stacks
        ]
        return per_stage_min(pools, ctx)

    def stage_pool(
        self,
        stack: tuple[tuple[LayerSpec, int], ...],
        dtype: KVDtype,
        block_size: int,
        policy: WindowPolicy,
        budget_bytes: int,
    ) -> Pool:
        """One pipeline stage's pool (one TP rank of it)."""
        raise NotImplementedError


def per_stage_min(pools: Sequence[Pool], ctx: int) -> Pool:
    """The stage pool that admits the fewest requests of `ctx` tokens."""
    return min(pools, key=lambda p: p.max_requests(ctx))


__all__ = [
    "EXTRA_OPTIONS_FILE",
    "TP_SIZES",
    "Engine",
    "ExtraLayers",
    "MemoryBase",
    "PrefixGranularity",
    "Scheduling",
    "cdiv",
    "per_stage_min",
]
