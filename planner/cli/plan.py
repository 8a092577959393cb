"""`kvplan plan`, `kvplan models`, `kvplan gpus`: thin shells over `planner.service.plan()`.

`--request FILE|-` takes the REST contract's JSON (one object or a list) and prints exactly what
`POST /api/v1/plan` answers. Convenience flags print a readable summary (or JSON with --json).
"""

from __future__ import annotations

import json
import re
import sys
from functools import cache
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import TypeAdapter, ValidationError

from planner.cli import engine_flags as ef
from planner.cli.output import (
    EXIT_WONT_START,
    emit_problem,
    error_style,
    fail,
    parse_body,
    parse_body_list,
    read_json_source,
    read_source_bytes,
)
from planner.core.errors import FieldError, FieldProblem, PlanError
from planner.core.inputs import CalibrationLike, Catalog
from planner.core.schema import MAX_REQUEST_ENTRIES, Plan, PlanRequest
from planner.core.units import GiB, fmt_gib, fmt_tbps
from planner.quantities import QuantityError, read_rate, read_size, read_tokens
from planner.service import default_catalog, plan


@cache
def _list_adapter() -> TypeAdapter[list[PlanRequest]]:
    """Built when a `--request` list is read, not at every start-up."""
    return TypeAdapter(list[PlanRequest])


# A bare number is bytes (the API's unit); below this it is surely a forgotten unit ("48").
_BARE_BUDGET_MIN_BYTES = 1 << 20
# Request fields → the flags that set them, for error messages.
FLAGS: dict[str, str] = {
    "model": "--model",
    "engine": "--engine",
    "engine_version": "--engine-version",
    "kv_cache_dtype": "--dtype",
    "context_tokens": "--context",
    "kv_budget_bytes": "--budget",
    "gpu": "--gpu",
    "gpu_memory_utilization": "--util",
    "tensor_parallel_size": "--tp",
    "pipeline_parallel_size": "--pp",
    "block_size": "--block-size",
    "bandwidth_bytes_per_s": "--bandwidth",
    "weights_bytes": "--weights",
    "reserve_bytes": "--reserve",
    "max_num_seqs": "--max-num-seqs",
    "requests": "--mix",
    "shared_prefix_tokens": "--prefix",
    "allow_long_max_model_len": "--allow-long-max-model-len",
    "mamba_full_memory_ratio": "--mamba-full-memory-ratio",
    "max_mamba_cache_size": "--max-mamba-cache-size",
    "mamba_ssm_dtype": "--mamba-ssm-dtype",
    **ef.FLAGS,
}


def parse_tokens(text: str, field: str = "context_tokens") -> int:
    """ "8192", "8,192", "8k" → 8192; "1M" → 1048576 (k = 1024 tokens, as in "8k context")."""
    try:
        return read_tokens(text)
    except QuantityError as exc:
        raise FieldError(field, "cli.tokens_unreadable", reason=exc.message) from None


def parse_size(text: str, field: str, *, bare_min_bytes: int = _BARE_BUDGET_MIN_BYTES) -> int:
    """A size with a unit ("48GiB", "48 GiB", "80GB", "48G" = GiB); a bare number is bytes (the
    API's unit), but a small one is a forgotten unit and refused."""
    stripped = text.strip()
    if stripped.isdigit() and 0 < int(stripped) < bare_min_bytes:
        raise FieldError(field, "cli.size_without_unit", stripped=stripped, n_bytes=int(stripped))
    try:
        return read_size(text, default_unit="B")
    except QuantityError as exc:
        raise FieldError(field, "cli.size_unreadable", reason=exc.message) from None


def parse_budget(text: str) -> int:
    return parse_size(text, "kv_budget_bytes")


def parse_mix(text: str, prefix_tokens: int = 0) -> list[dict[str, int]]:
    """ "8192x10,2k x 30" → requests: tokens × count, comma-separated (count 1 if omitted)."""
    items = [item for item in text.split(",") if item.strip()]
    if not items or len(items) > MAX_REQUEST_ENTRIES:
        raise FieldError("requests", "cli.mix_entries", most=MAX_REQUEST_ENTRIES)
    out: list[dict[str, int]] = []
    for item in items:
        parts = re.split(r"\s*[x×*]\s*", item.strip(), flags=re.IGNORECASE)
        if len(parts) > 2 or not all(parts):
            raise FieldError("requests", "cli.mix_unreadable", item=item.strip())
        tokens = parse_tokens(parts[0], "requests")
        count = parse_tokens(parts[1], "requests") if len(parts) == 2 else 1
        entry = {"context_tokens": tokens, "count": count}
        if prefix_tokens:
            entry["prefix_tokens"] = prefix_tokens
        out.append(entry)
    return out


def _workload(
    batch: int | None, mix: str | None, prefix: str | None, context: int | None
) -> dict[str, Any]:
    """`requests` from --batch (N × --context) or --mix; --prefix is one prefix that every
    request shares, across the mix's entries too (`shared_prefix_tokens`)."""
    shared = parse_tokens(prefix, "requests") if prefix is not None else 0
    if batch is not None and mix is not None:
        raise FieldError("requests", "cli.batch_and_mix")
    if mix is not None:
        return {"requests": parse_mix(mix), **({"shared_prefix_tokens": shared} if shared else {})}
    if batch is not None:
        if context is None:
            raise FieldError("requests", "cli.batch_needs_context")
        if batch < 1:
            raise FieldError("requests", "cli.batch_below_1")
        entry = {"context_tokens": context, "count": batch}
        return {"requests": [{**entry, "prefix_tokens": shared} if shared else entry]}
    if prefix is not None:
        raise FieldError("requests", "cli.prefix_needs_requests")
    return {}


def _calibration_for(req: PlanRequest) -> CalibrationLike | None:
    """Look a calibration up in the local store (KVPLAN_DATA_DIR) when the request names one."""
    if req.calibration_id is None:
        return None
    try:
        from planner.store import open_store_from_env
    except ImportError:  # store not installed in this build
        return None
    with open_store_from_env() as store:
        found: CalibrationLike | None = store.get(req.calibration_id)
        return found


def _plan_all(requests: list[PlanRequest]) -> list[Plan]:
    plans: list[Plan] = []
    problems: list[FieldProblem] = []
    first: PlanError | None = None
    many = len(requests) > 1
    for i, req in enumerate(requests):
        try:
            plans.append(plan(req, calibration=_calibration_for(req), catalog=_catalog()))
        except PlanError as exc:
            first = first or exc
            prefix: tuple[str | int, ...] = (i,) if many else ()
            problems.extend(p.at(prefix + p.loc) for p in exc.problems)
    if first is not None:
        if many:
            joined = "; ".join(p.field + ": " + p.msg for p in problems[:5])
            first = PlanError("cli.requests_problems", problems, problems=joined)
            first.title = "Request cannot be planned"
        fail(first)
    return plans


def _from_request_source(source: str) -> NoReturn:
    raw = read_source_bytes(source)
    if raw.lstrip()[:1] == b"[":
        reqs = parse_body_list(raw, _list_adapter())
        if not reqs:
            fail(
                PlanError(
                    "cli.request_list_empty",
                    [FieldProblem.of((), "cli.request_object_required")],
                )
            )
        plans = _plan_all(reqs)
        sys.stdout.write("[" + ",".join(p.model_dump_json() for p in plans) + "]\n")
    else:
        req = parse_body(raw, PlanRequest)
        plans = _plan_all([req])
        sys.stdout.write(plans[0].model_dump_json() + "\n")
    raise typer.Exit(exit_status(plans))


def exit_status(plans: list[Plan]) -> int:
    """0, or EXIT_WONT_START when any plan's engine would refuse to start (documented in
    `kvplan plan --help` and the README), so tooling need not parse the JSON."""
    refused = any(p.capacity is not None and p.capacity.engine_starts is False for p in plans)
    return EXIT_WONT_START if refused else 0


def _n(count: int, noun: str) -> str:
    """`1 request`, `2 requests`: counts in sentences agree with their noun."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _per_gpu(p: Plan) -> str:
    """ "8 KV heads × 33 layers (32 + 1 draft)": the layers the bytes per token sum over."""
    r = p.per_rank
    kv = r.kv_layers if r.kv_layers is not None else r.layers
    draft = r.draft_kv_layers or 0
    text = f"{_n(r.kv_heads, 'KV head')} × {kv} layers"
    if draft:
        text += f" ({kv - draft} + {draft} draft)"
    if kv - draft != r.layers:
        text += f" (the {kv - draft} of the {r.layers} model layers that hold KV per token)"
    return text


def _human(p: Plan, *, context_defaulted: bool = False) -> str:
    windowed = any(g.window_tokens for g in p.model.groups)
    lines = [
        f"model            {p.model.id or p.model.model_type or 'config'} "
        f"({p.model.num_hidden_layers} layers, {_n(p.model.num_key_value_heads, 'KV head')}, "
        f"head_dim {p.model.head_dim})",
        f"engine           {p.engine} {p.engine_version}"
        + (", async scheduling" if p.async_scheduling else "")
        + f", kv_cache_dtype {p.kv_cache_dtype} "
        f"({p.bytes_per_element:g} B/element), block_size {_n(p.block_size, 'token')}, "
        f"TP {p.tensor_parallel_size} × PP {p.pipeline_parallel_size}",
        f"KV per token     {p.kv_bytes_per_token_formula}",
        f"per GPU          {_per_gpu(p)} = {p.per_rank.kv_bytes_per_token:,} B/token "
        f"(replication {p.per_rank.replication}×)",
    ]
    for r in p.requests:
        lines.append(
            f"request          {r.count:,} × {r.context_tokens:,} tokens"
            + (" (the model's maximum; set --context)" if context_defaulted else "")
            + f": {fmt_gib(r.kv_bytes)} of KV each"
            + (" (sliding-window layers keep fewer tokens)" if windowed else "")
            + f", {r.blocks:,} blocks = {fmt_gib(r.paged_kv_bytes)} paged"
        )
    if p.tensor_parallel_size * p.pipeline_parallel_size > 1:
        t = p.totals
        lines.append(
            f"on the GPUs      {fmt_gib(t.per_rank_kv_bytes)} on the busiest GPU, "
            f"{fmt_gib(t.physical_kv_bytes)} on all GPUs together "
            f"(for {_n(t.requests, 'request')})"
        )
    c = p.capacity
    if c is None:
        lines.append(
            "capacity         give --budget (e.g. 48GiB) or --gpu to see how many requests fit"
        )
    else:
        lines.append(f"budget           {c.budget.derivation}")
        for term in c.budget.terms:
            if term.source != "not_applicable":
                lines.append(
                    f"  {term.name:<24} {fmt_gib(term.bytes):>12}  {term.derivation} "
                    f"[{term.source}]"
                )
        if c.engine_starts is False:
            lines.append(f"will it start    NO: {c.start_error or 'no memory for the KV cache'}")
            if c.estimated_max_model_len:
                lines.append(
                    f"                 the longest max_model_len that starts: "
                    f"{c.estimated_max_model_len:,} tokens"
                )
        elif c.engine_starts:
            lines.append("will it start    yes: the engine's start-up checks pass")
        lines.append(
            f"capacity         {c.num_blocks:,} blocks; {c.blocks_per_request:,} blocks per "
            f"request of {c.context_tokens:,} tokens → {_n(c.max_requests, 'request')} "
            + ("fits" if c.max_requests == 1 else "fit")
            + (" in memory" if c.max_running_requests < c.max_requests else "")
            + (
                f" (engine log: {c.engine_reported_concurrency:.2f}x)"
                if c.engine_reported_concurrency is not None
                else ""
            )
        )
        if c.max_running_requests < c.max_requests:
            lines.append(
                f"running          {_n(c.max_running_requests, 'request')} at once: the "
                f"engine's cap (max_num_seqs {c.max_num_seqs:,}) binds before memory"
            )
        if c.workload_fits is not None:
            t = p.totals
            saved = (
                f", {fmt_gib(t.prefix_shared_bytes_saved)} saved by the shared prefix"
                if t.prefix_shared_bytes_saved
                else ""
            )
            lines.append(
                f"workload         {_n(t.requests, 'request')}, {fmt_gib(t.paged_kv_bytes)} "
                f"paged{saved} → " + ("fits" if c.workload_fits else "does NOT fit")
            )
        lines.append(f"longest context  {c.longest_context_tokens:,} tokens (one request)")
    b = p.bounds
    if b is not None:
        spec = b.speculative
        plain = (
            f"KV {b.kv_read_seconds * 1e3:.3f} ms + weights {b.weights_read_seconds * 1e3:.3f} ms"
        )
        batch = (
            f"for a batch of {_n(b.batch_requests, 'request')} at "
            f"{fmt_tbps(b.bandwidth_bytes_per_s)}"
        )
        if spec is None:
            floor = b.decode_step_seconds
            lines.append(
                f"decode floor     {floor * 1e3:.3f} ms/step {batch} ({plain}) → "
                f"{b.decode_tokens_per_s:,.0f} tokens/s"
            )
        else:
            # The JSON's speculative step: k draft steps, then one target step verifying them.
            floor = spec.step_seconds
            k = spec.num_speculative_tokens
            lines.append(
                f"decode floor     {floor * 1e3:.3f} ms/step {batch} with {_n(k, 'draft token')}: "
                f"target {(floor - spec.draft_read_seconds) * 1e3:.3f} ms + {_n(k, 'draft step')} "
                f"{spec.draft_read_seconds * 1e3:.3f} ms (without drafting "
                f"{b.decode_step_seconds * 1e3:.3f} ms: {plain})"
                + (
                    f" → {spec.tokens_per_step:.2f} tokens per request per step, "
                    f"{spec.tokens_per_s:,.0f} tokens/s"
                    if spec.tokens_per_step is not None and spec.tokens_per_s is not None
                    else "; tokens per step need acceptance_rate"
                )
            )
        if b.calibrated is not None:
            lines.append(
                f"calibrated       {b.calibrated.decode_step_seconds * 1e3:.3f} ms/step "
                f"({b.calibrated.device_name}, {b.calibrated.measured_at})"
            )
        e = b.expected
        if e is not None:
            from planner.web.step import step_summary

            source = (
                "fitted constants"
                if e.constants_source == "catalog"
                else (f"calibration {e.constants_source}: {', '.join(e.measured_terms)} measured")
            )
            lines.append(
                f"expected         {step_summary(floor, e)} (ms/step; TPOT "
                f"{e.tpot_seconds * 1e3:.3f} ms, {e.decode_tokens_per_s:,.0f} tokens/s, "
                f"{e.dominant}-bound; {source})"
            )
    elif c is not None:
        lines.append("decode floor     give --gpu or --bandwidth (e.g. 3.35TB/s) to see it")
    lines.extend(f"note             {n}" for n in p.notes)
    return "\n".join(lines)


def _catalog() -> Catalog:
    # On the command line a model may also be a local directory (config.json + safetensors).
    return default_catalog(allow_local_dirs=True)


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan_cmd(
        request: Annotated[
            str | None,
            typer.Option(
                "--request", "-r", help="JSON request file (one object or a list), or - for stdin"
            ),
        ] = None,
        model: Annotated[
            str | None,
            typer.Option(help="catalog id (see `kvplan models`) or a path to a config.json"),
        ] = None,
        context: Annotated[
            str | None,
            typer.Option(
                help="tokens per request (prompt + output), e.g. 8192 or 8k (k = 1024); "
                "default: the model's maximum"
            ),
        ] = None,
        budget: Annotated[
            str | None,
            typer.Option(
                help="KV-cache budget per GPU, e.g. 48GiB or 80GB (a bare number is bytes); "
                "or give --gpu"
            ),
        ] = None,
        gpu: Annotated[
            str | None,
            typer.Option(
                help="GPU catalog id (see `kvplan gpus`), e.g. H100-SXM-80GB: memory less "
                "weights and reserve, and the bandwidth"
            ),
        ] = None,
        util: Annotated[
            float | None,
            typer.Option(
                help="fraction of GPU memory for the engine (vLLM gpu_memory_utilization, "
                "SGLang mem_fraction_static, TRT-LLM free_gpu_memory_fraction); "
                "default: the engine's"
            ),
        ] = None,
        tp: Annotated[int, typer.Option(help="tensor_parallel_size (GPUs per layer)")] = 1,
        pp: Annotated[int, typer.Option(help="pipeline_parallel_size (pipeline stages)")] = 1,
        dtype: Annotated[
            str, typer.Option(help="kv_cache_dtype: auto (the model's dtype), bf16, fp8, int8, …")
        ] = "auto",
        engine: Annotated[str, typer.Option(help="vllm, sglang, trtllm or transformers")] = "vllm",
        engine_version: Annotated[
            str | None,
            typer.Option(
                help="the engine release whose rules apply, e.g. 0.19 (docs/engine-versions.md); "
                "default: the newest kvplan follows"
            ),
        ] = None,
        block_size: Annotated[
            int | None, typer.Option(help="tokens per KV block; default: the engine's")
        ] = None,
        bandwidth: Annotated[
            str | None,
            typer.Option(help="memory bandwidth, e.g. 3.35TB/s (decimal); default: the GPU's"),
        ] = None,
        weights: Annotated[
            str | None,
            typer.Option(
                help="weights of the whole model, e.g. 57GiB (0 = KV cache only); default: the "
                "catalog's, or estimated from the config as a dense model"
            ),
        ] = None,
        reserve: Annotated[
            str | None,
            typer.Option(
                help="non-KV memory per GPU besides weights (activations, CUDA graphs, NCCL), "
                "e.g. 2GiB; default: the engine's estimate"
            ),
        ] = None,
        batch: Annotated[
            int | None,
            typer.Option(help="a batch of N requests of --context tokens: does it fit?"),
        ] = None,
        mix: Annotated[
            str | None,
            typer.Option(
                help="a request mix, tokens x count, e.g. 8192x10,2048x30 (k = 1024 tokens)"
            ),
        ] = None,
        prefix: Annotated[
            str | None,
            typer.Option(
                help="leading tokens every request of --batch/--mix shares (a system prompt), "
                "e.g. 2k; engines with prefix caching store them once"
            ),
        ] = None,
        allow_long: Annotated[
            bool,
            typer.Option(
                "--allow-long-max-model-len",
                help="plan a context beyond the model's maximum, as vLLM serves it with "
                "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (SGLang: "
                "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1)",
            ),
        ] = False,
        max_num_seqs: Annotated[
            int | None,
            typer.Option(
                help="cap on running requests (vLLM --max-num-seqs, SGLang "
                "--max-running-requests, TRT-LLM max_batch_size); default: the engine's"
            ),
        ] = None,
        speculative_config: Annotated[
            str | None,
            typer.Option(
                help="vLLM's --speculative-config as JSON, inline or a file path, e.g. "
                '\'{"method": "eagle", "model": "./eagle/config.json", '
                '"num_speculative_tokens": 3}\''
            ),
        ] = None,
        mamba_full_memory_ratio: Annotated[
            float | None,
            typer.Option(
                help="SGLang --mamba-full-memory-ratio: the state pool's bytes per KV-pool byte "
                "(Mamba / linear-attention hybrids); default 0.9"
            ),
        ] = None,
        max_mamba_cache_size: Annotated[
            int | None,
            typer.Option(
                help="SGLang --max-mamba-cache-size: the state pool's slots, in place of the ratio"
            ),
        ] = None,
        mamba_ssm_dtype: Annotated[
            str | None,
            typer.Option(
                help="SGLang --mamba-ssm-dtype: float32, bfloat16 or float16; default: the "
                "config's mamba_ssm_dtype, else float32"
            ),
        ] = None,
        context_length: ef.ContextLength = None,
        chunked_prefill_size: ef.ChunkedPrefillSize = None,
        cuda_graph_max_bs: ef.CudaGraphMaxBs = None,
        max_total_tokens: ef.MaxTotalTokens = None,
        swa_full_tokens_ratio: ef.SwaFullTokensRatio = None,
        data_parallel_size: ef.DpSize = None,
        enable_dp_attention: ef.EnableDpAttention = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="print the Plan JSON (and errors as problem+json)")
        ] = False,
    ) -> None:
        """Plan KV-cache memory, capacity and decode bounds for one deployment.

        Examples:
        kvplan plan --model meta-llama/Llama-3.1-8B --context 8k --budget 48GiB
        kvplan plan --model ./config.json --gpu H100-SXM-80GB --tp 4 --dtype fp8
        kvplan plan --model meta-llama/Llama-3.1-8B --gpu L40S-48GB --mix 8kx10,2kx30
        Units: GiB = 2^30 bytes (48G = 48GiB), GB = 10^9, TB/s = 10^12 bytes per second.
        Exit status: 0 planned (and it starts, or nothing to judge); 2 bad input;
        3 planned, but the engine will not start (capacity.engine_starts false).
        """
        if request is not None:
            _from_request_source(request)
        error_style("kvplan plan", FLAGS, as_json=as_json)
        if model is None:
            fail(
                PlanError(
                    "cli.request_or_model",
                    [
                        FieldProblem.of(
                            ("model",),
                            "cli.model_required",
                        )
                    ],
                )
            )
        body: dict[str, Any] = {
            "model": model,
            "engine": engine,
            "kv_cache_dtype": dtype,
            "tensor_parallel_size": tp,
            "pipeline_parallel_size": pp,
        }
        if model.endswith(".json") or Path(model).is_file():
            body["model"] = read_json_source(model, field="model", config=True)
        for key, value in (
            ("gpu", gpu),
            ("block_size", block_size),
            ("gpu_memory_utilization", util),
            ("max_num_seqs", max_num_seqs),
            ("engine_version", engine_version),
            ("mamba_full_memory_ratio", mamba_full_memory_ratio),
            ("max_mamba_cache_size", max_mamba_cache_size),
            ("mamba_ssm_dtype", mamba_ssm_dtype),
        ):
            if value is not None:
                body[key] = value
        if allow_long:
            body["allow_long_max_model_len"] = True
        if speculative_config is not None:
            body["speculative_config"] = _speculative(speculative_config)
        try:
            if context is not None:
                body["context_tokens"] = parse_tokens(context)
            if budget is not None:
                body["kv_budget_bytes"] = parse_budget(budget)
            if bandwidth is not None:
                try:
                    body["bandwidth_bytes_per_s"] = read_rate(bandwidth)
                except QuantityError as exc:
                    raise FieldError(
                        "bandwidth_bytes_per_s", "cli.bandwidth_unreadable", reason=exc.message
                    ) from None
            if weights is not None:
                body["weights_bytes"] = parse_size(weights, "weights_bytes")
            if reserve is not None:
                body["reserve_bytes"] = parse_size(reserve, "reserve_bytes")
            body.update(_workload(batch, mix, prefix, body.get("context_tokens")))
            body.update(
                ef.engine_body(
                    {
                        "context_length": context_length,
                        "chunked_prefill_size": chunked_prefill_size,
                        "cuda_graph_max_bs": cuda_graph_max_bs,
                        "max_total_tokens": max_total_tokens,
                        "swa_full_tokens_ratio": swa_full_tokens_ratio,
                        "data_parallel_size": data_parallel_size,
                        "enable_dp_attention": enable_dp_attention,
                    },
                    parse_tokens,
                )
            )
            req = PlanRequest.model_validate(body)
        except PlanError as exc:
            fail(exc)
        except ValidationError as exc:
            emit_problem(exc)
        result = _plan_all([req])[0]
        typer.echo(
            result.model_dump_json(indent=2)
            if as_json
            else _human(result, context_defaulted=context is None and "requests" not in body)
        )
        raise typer.Exit(exit_status([result]))

    def _speculative(text: str) -> Any:
        """The --speculative-config value: inline JSON or a file; a draft `model` that names a
        config.json file is read like --model."""
        if text.lstrip().startswith("{"):
            try:
                spec = json.loads(text)
            except ValueError as exc:
                fail(
                    PlanError(
                        "cli.speculative_config_not_json",
                        [
                            FieldProblem.of(
                                ("speculative_config",),
                                "cli.speculative_config_invalid_json",
                                reason=str(exc),
                            )
                        ],
                    )
                )
        else:
            spec = read_json_source(text, field="speculative_config")
        draft = spec.get("model") if isinstance(spec, dict) else None
        if isinstance(draft, str) and (draft.endswith(".json") or Path(draft).is_file()):
            spec["model"] = read_json_source(draft, field="speculative_config.model", config=True)
        return spec

    @app.command("models")
    def models_cmd(
        as_json: Annotated[bool, typer.Option("--json", help="print the catalog as JSON")] = False,
    ) -> None:
        """List catalog models (ids for --model / "model")."""
        from planner.catalog import list_models

        items = list_models()
        if as_json:
            typer.echo(json.dumps([m.model_dump() for m in items], indent=1))
            return
        from planner.core.model import text_config

        width = max(40, *(len(m.id) for m in items))
        typer.echo(f"{'model id':{width}} {'params (10^9)':>13} {'layers':>6} {'max context':>12}")
        for m in items:
            # Multimodal repos (Llama-4, Gemma-3) keep the decoder's shape in text_config.
            text = text_config(m.config)
            ctx = text.get("max_position_embeddings")
            typer.echo(
                f"{m.id:{width}} {m.num_parameters / 1e9:13.1f} "
                f"{text.get('num_hidden_layers', '?'):>6} "
                f"{f'{ctx:,}' if isinstance(ctx, int) else '?':>12}"
            )

    @app.command("gpus")
    def gpus_cmd(
        as_json: Annotated[bool, typer.Option("--json", help="print the catalog as JSON")] = False,
    ) -> None:
        """List catalog GPUs (ids for --gpu / "gpu")."""
        from planner.catalog import list_gpus

        items = list_gpus()
        if as_json:
            typer.echo(json.dumps([g.model_dump() for g in items], indent=1))
            return
        # Memory as torch sees it, with where the figure comes from (README "GPU memory").
        typer.echo(f"{'gpu id':20} {'memory':>12}  {'basis':11} {'bandwidth':>10}  name")
        for g in items:
            typer.echo(
                f"{g.id:20} {g.usable_memory_bytes / GiB:8.2f} GiB  {g.memory_basis:11} "
                f"{fmt_tbps(g.bandwidth_bytes_per_s):>10}  {g.name}"
            )
