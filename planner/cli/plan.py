"""`kvplan plan`, `kvplan models`, `kvplan gpus`: thin shells over `core.plan.plan()`.

`--request FILE|-` takes the REST contract's JSON (one object or a list) and prints exactly what
`POST /api/v1/plan` answers. Convenience flags print a readable summary (or JSON with --json).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import TypeAdapter, ValidationError

from planner.cli.output import (
    emit_problem,
    fail,
    parse_body,
    parse_body_list,
    read_json_source,
    read_source_bytes,
)
from planner.core.errors import FieldProblem, PlanError
from planner.core.plan import CalibrationLike, plan
from planner.core.schema import Plan, PlanRequest
from planner.core.units import GiB, fmt_gib, fmt_tbps, parse_bytes, parse_rate

_LIST = TypeAdapter(list[PlanRequest])


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
            plans.append(plan(req, calibration=_calibration_for(req)))
        except PlanError as exc:
            first = first or exc
            prefix: tuple[str | int, ...] = (i,) if many else ()
            problems.extend(FieldProblem(prefix + p.loc, p.msg) for p in exc.problems)
    if first is not None:
        if many:
            first = PlanError("; ".join(p.field + ": " + p.msg for p in problems[:5]), problems)
            first.title = "Request cannot be planned"
        fail(first)
    return plans


def _from_request_source(source: str) -> NoReturn:
    raw = read_source_bytes(source)
    if raw.lstrip()[:1] == b"[":
        reqs = parse_body_list(raw, _LIST)
        if not reqs:
            fail(
                PlanError(
                    "the request list is empty",
                    [FieldProblem((), "give at least one request object")],
                )
            )
        plans = _plan_all(reqs)
        sys.stdout.write("[" + ",".join(p.model_dump_json() for p in plans) + "]\n")
    else:
        req = parse_body(raw, PlanRequest)
        sys.stdout.write(_plan_all([req])[0].model_dump_json() + "\n")
    raise typer.Exit(0)


def _human(p: Plan) -> str:
    lines = [
        f"model            {p.model.id or p.model.model_type or 'config'} "
        f"({p.model.num_hidden_layers} layers, {p.model.num_key_value_heads} KV heads, "
        f"head_dim {p.model.head_dim})",
        f"engine           {p.engine}, kv_cache_dtype {p.kv_cache_dtype} "
        f"({p.bytes_per_element:g} B/element), block_size {p.block_size}, "
        f"TP {p.tensor_parallel_size} × PP {p.pipeline_parallel_size}",
        f"KV per token     {p.kv_bytes_per_token_formula}",
        f"per rank         {p.per_rank.kv_heads} KV heads × {p.per_rank.layers} layers = "
        f"{p.per_rank.kv_bytes_per_token:,} B/token (replication {p.per_rank.replication}×)",
    ]
    for r in p.requests:
        lines.append(
            f"request          {r.count} × {r.context_tokens:,} tokens: "
            f"{fmt_gib(r.kv_bytes)} each, {r.blocks:,} blocks = {fmt_gib(r.paged_kv_bytes)} paged"
        )
    c = p.capacity
    if c is not None:
        lines.append(f"budget           {c.budget.derivation}")
        lines.append(
            f"capacity         {c.num_blocks:,} blocks; {c.blocks_per_request:,} per request of "
            f"{c.context_tokens:,} tokens → {c.max_requests} requests fit"
            + (
                f" (engine log: {c.engine_reported_concurrency:.2f}x)"
                if c.engine_reported_concurrency is not None
                else ""
            )
        )
        lines.append(f"longest context  {c.longest_context_tokens:,} tokens (one request)")
    b = p.bounds
    if b is not None:
        lines.append(
            f"decode floor     {b.decode_step_seconds * 1e3:.3f} ms/step for {b.batch_requests} "
            f"requests at {fmt_tbps(b.bandwidth_bytes_per_s)} (KV {b.kv_read_seconds * 1e3:.3f} "
            f"ms + weights {b.weights_read_seconds * 1e3:.3f} ms) → "
            f"{b.decode_tokens_per_s:,.0f} tokens/s"
        )
        if b.calibrated is not None:
            lines.append(
                f"calibrated       {b.calibrated.decode_step_seconds * 1e3:.3f} ms/step "
                f"({b.calibrated.device_name}, {b.calibrated.measured_at})"
            )
    lines.extend(f"note             {n}" for n in p.notes)
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan_cmd(
        request: Annotated[
            str | None,
            typer.Option(
                "--request", "-r", help="JSON request file (one object or a list), or - for stdin"
            ),
        ] = None,
        model: Annotated[str | None, typer.Option(help="catalog id or a config.json path")] = None,
        context: Annotated[int | None, typer.Option(help="context tokens per request")] = None,
        budget: Annotated[str | None, typer.Option(help="KV budget per GPU, e.g. 48GiB")] = None,
        gpu: Annotated[str | None, typer.Option(help="GPU catalog id, e.g. H100-SXM-80GB")] = None,
        util: Annotated[float | None, typer.Option(help="gpu_memory_utilization")] = None,
        tp: Annotated[int, typer.Option(help="tensor_parallel_size")] = 1,
        pp: Annotated[int, typer.Option(help="pipeline_parallel_size")] = 1,
        dtype: Annotated[str, typer.Option(help="kv_cache_dtype")] = "auto",
        engine: Annotated[str, typer.Option(help="vllm, sglang, trtllm, transformers")] = "vllm",
        block_size: Annotated[int | None, typer.Option(help="tokens per block")] = None,
        bandwidth: Annotated[str | None, typer.Option(help="e.g. 1.5TB/s")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print the Plan JSON")] = False,
    ) -> None:
        """Plan KV-cache memory, capacity and decode bounds for one deployment."""
        if request is not None:
            _from_request_source(request)
        if model is None:
            fail(
                PlanError(
                    "give --request FILE or --model",
                    [
                        FieldProblem(
                            ("model",),
                            "required: a catalog id (kvplan models) or a config.json path",
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
            body["model"] = read_json_source(model)
        for key, value in (
            ("context_tokens", context),
            ("gpu", gpu),
            ("block_size", block_size),
            ("gpu_memory_utilization", util),
        ):
            if value is not None:
                body[key] = value
        try:
            if budget is not None:
                body["kv_budget_bytes"] = parse_bytes(budget, field="kv_budget_bytes")
            if bandwidth is not None:
                body["bandwidth_bytes_per_s"] = parse_rate(bandwidth, field="bandwidth_bytes_per_s")
            req = PlanRequest.model_validate(body)
        except PlanError as exc:
            fail(exc)
        except ValidationError as exc:
            emit_problem(exc)
        result = _plan_all([req])[0]
        typer.echo(result.model_dump_json(indent=2) if as_json else _human(result))

    @app.command("models")
    def models_cmd(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
        """List catalog models (ids for --model / "model")."""
        from planner.catalog import list_models

        items = list_models()
        if as_json:
            typer.echo(json.dumps([m.model_dump() for m in items], indent=1))
            return
        for m in items:
            typer.echo(f"{m.id:40} {m.num_parameters / 1e9:7.1f} B params")

    @app.command("gpus")
    def gpus_cmd(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
        """List catalog GPUs (ids for --gpu / "gpu")."""
        from planner.catalog import list_gpus

        items = list_gpus()
        if as_json:
            typer.echo(json.dumps([g.model_dump() for g in items], indent=1))
            return
        for g in items:
            typer.echo(
                f"{g.id:20} {g.usable_memory_bytes / GiB:7.1f} GiB  "
                f"{fmt_tbps(g.bandwidth_bytes_per_s):>10}  {g.name}"
            )
