"""Reconcile settings: request > log > engine default, each noted with its source."""

from __future__ import annotations

from planner.core.engines import Engine
from planner.core.errors import FieldError
from planner.core.hardware import Gpu
from planner.core.inputs import Catalog
from planner.core.logs import ParsedLog, to_float, to_int
from planner.core.model import ModelShape
from planner.core.reconcile_common import Resolved
from planner.core.reconcile_schema import ReconcileSettings
from planner.core.units import GiB, KVDtype, kv_dtype


def arg_int(log: ParsedLog, *keys: str) -> tuple[int, str] | None:
    for k in keys:
        value = log.args.get(k)
        if value is not None and value.isdigit():
            return int(value), k
    return None


def arg_float(log: ParsedLog, *keys: str) -> float | None:
    for k in keys:
        value = log.args.get(k)
        if value is None:
            continue
        try:
            x = float(value)
        except ValueError:
            continue
        if 0 < x <= 1:
            return x
    return None


def resolve_settings(
    engine: Engine,
    st: ReconcileSettings,
    log: ParsedLog,
    shape: ModelShape | None,
    catalog: Catalog,
) -> Resolved:
    r = Resolved()

    def pick_int(name: str, given: int | None, keys: tuple[str, ...], default: int) -> int:
        if given is not None:
            r.note(name, given, "request")
            return given
        found = arg_int(log, *keys)
        if found is not None:
            r.note(name, found[0], "log")
            return found[0]
        r.note(name, default, "default")
        return default

    r.tp = pick_int(
        "tensor_parallel_size", st.tensor_parallel_size, ("tensor_parallel_size", "tp_size"), 1
    )
    r.pp = pick_int(
        "pipeline_parallel_size",
        st.pipeline_parallel_size,
        ("pipeline_parallel_size", "pp_size"),
        1,
    )
    if st.pipeline_layer_partition is not None:
        r.partition = list(st.pipeline_layer_partition)
        r.note("pipeline_layer_partition", ",".join(map(str, r.partition)), "request")
    tpb = next((f for f in log.facts if f.kind == "tokens_per_block"), None)
    if st.block_size is None and tpb is not None:
        r.block = to_int(tpb.values["tokens"])
        r.note("block_size", r.block, "log")
    else:
        r.block = pick_int(
            "block_size", st.block_size, engine.log_block_keys, engine.default_block_size
        )

    # KV dtype: request > log args > SGLang's allocation line > auto.
    alloc = next((f for f in log.facts if f.kind == "kv_allocated" and "dtype" in f.values), None)
    if st.kv_cache_dtype is not None:
        r.dtype_name, src = st.kv_cache_dtype, "request"
    elif "kv_cache_dtype" in log.args:
        r.dtype_name, src = log.args["kv_cache_dtype"], "log"
    elif alloc is not None:
        r.dtype_name, src = alloc.values["dtype"].removeprefix("torch."), "log"
    else:
        r.dtype_name, src = "auto", "default"
    r.note("kv_cache_dtype", r.dtype_name, src)

    length = None
    if st.max_model_len is not None:
        length, src = st.max_model_len, "request"
    elif found := arg_int(log, "max_model_len", "max_seq_len", "context_length", "context_len"):
        length, src = found[0], "log"
    else:
        for f in log.facts:
            if f.kind in ("max_concurrency", "v1_error", "v0_error", "max_total_tokens"):
                key = (
                    "context_tokens"
                    if f.kind == "max_concurrency"
                    else ("context_len" if f.kind == "max_total_tokens" else "max_model_len")
                )
                if key in f.values:
                    length, src = to_int(f.values[key]), "log"
                    break
        if length is None and shape is not None and shape.max_position_embeddings:
            length, src = shape.max_position_embeddings, "model"
    if length is not None:
        r.max_model_len = length
        r.note("max_model_len", length, src)

    # The GPU first: the scheduler defaults depend on it, as plan()'s do.
    gpu: Gpu | None = None
    if st.gpu is not None:
        try:
            gpu = catalog.gpu(st.gpu)
        except FieldError as exc:
            raise FieldError.at(("settings", "gpu"), exc.problems[0]) from None
        r.gpu_id, r.gpu_memory_bytes = gpu.id, gpu.memory_bytes
        r.note("gpu", gpu.id, "request")
    if st.gpu_memory_bytes is not None:
        r.gpu_memory_bytes = st.gpu_memory_bytes
        r.note("gpu_memory_bytes", st.gpu_memory_bytes, "request")
    elif r.gpu_memory_bytes is None:
        for f in log.facts:
            raw = f.values.get("total_gpu_memory") or f.values.get("total_gib")
            if raw and f.kind in ("v0_profile", "v0_instance_memory"):
                r.gpu_memory_bytes = round(to_float(raw) * GiB)
                r.note("gpu_memory_bytes", r.gpu_memory_bytes, "log")
                break
    if gpu is None and r.gpu_memory_bytes is not None:
        gpu = Gpu(None, "GPU", r.gpu_memory_bytes, 1.0)
    default_mnbt = engine.default_max_num_batched_tokens(gpu)
    r.max_num_batched_tokens = pick_int(
        "max_num_batched_tokens",
        st.max_num_batched_tokens,
        ("max_num_batched_tokens",),
        default_mnbt,
    )
    logged_async = log.args.get("async_scheduling")
    sched = engine.scheduling(
        r.max_num_batched_tokens,
        {"True": True, "False": False}.get(logged_async) if logged_async else None,
        gpu,
        r.pp,
        shape,
    )
    r.mnbt = sched.in_flight_tokens
    if sched.async_scheduling is not None:
        r.note("async_scheduling", sched.async_scheduling, "log" if logged_async else "default")

    given = getattr(st, engine.fraction_setting)
    name = engine.fraction_setting
    keys = engine.log_fraction_keys
    logged_fraction = arg_float(log, *keys)
    for f in log.facts:
        if logged_fraction is None and f.kind in ("v0_profile", "v0_instance_memory", "profile"):
            raw = (
                f.values.get("gpu_memory_utilization")
                or f.values.get("utilization")
                or (f.values.get("fraction"))
            )
            if raw:
                logged_fraction = to_float(raw)
    if given is not None:
        r.memory_fraction = given
        r.note(name, given, "request")
    elif logged_fraction is not None:
        r.memory_fraction = logged_fraction
        r.note(name, logged_fraction, "log")
    elif engine.fraction_default_known:
        r.memory_fraction = engine.default_memory_utilization()
        r.note(name, r.memory_fraction, "default")

    if st.hybrid_kv_cache_manager is not None:
        r.hybrid = st.hybrid_kv_cache_manager
        r.note("hybrid_kv_cache_manager", r.hybrid, "request")
    elif log.args.get("disable_hybrid_kv_cache_manager") == "True":
        r.hybrid = False
        r.note("hybrid_kv_cache_manager", False, "log")
    if st.draft_layers is not None:
        r.draft = st.draft_layers
        r.note("draft_layers", r.draft, "request")
    if st.swap_space_bytes is not None:
        r.swap_bytes = st.swap_space_bytes
    elif (found := arg_int(log, "swap_space")) is not None:
        r.swap_bytes = found[0] * GiB

    if st.vllm_engine is not None:
        r.vllm_gen = st.vllm_engine
    else:
        r.vllm_gen = engine.generation_from_log({f.kind for f in log.facts}) or r.vllm_gen
    if engine.log_generations:
        r.note("vllm_engine", r.vllm_gen, "request" if st.vllm_engine else "log")
    return r


def settings_dtype(name: str, shape: ModelShape | None) -> KVDtype | None:
    if shape is None:
        return None
    key = name.strip().lower()
    if key == "auto":
        return kv_dtype("bf16" if shape.dtype == "fp32" else shape.dtype)
    return kv_dtype(key.removeprefix("torch."), field="settings.kv_cache_dtype")


__all__ = ["arg_float", "arg_int", "resolve_settings", "settings_dtype"]
