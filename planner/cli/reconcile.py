"""`kvplan reconcile LOGFILE`: an engine's start-up log beside kvplan's recomputation of it.

Same core as `POST /api/v1/reconcile`; `--json` prints exactly what the API answers. The log is
read bounded (2 MiB), must be UTF-8 text, and is never echoed except as matched figures.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from planner.cli.output import emit_problem, error_style, fail, read_json_source
from planner.core.engines import DEFAULT_ENGINE, engine_class, log_engines
from planner.core.errors import FieldError, PlanError
from planner.core.logs import MAX_LOG_BYTES
from planner.core.reconcile_schema import ReconcileRequest, ReconcileResult
from planner.quantities import QuantityError, read_tokens
from planner.service import reconcile

FLAGS: dict[str, str] = {
    "log": "LOGFILE",
    "model": "--model",
    "engine": "--engine",
    "settings": "--settings",
    "settings.tensor_parallel_size": "--tp",
    "settings.pipeline_parallel_size": "--pp",
    "settings.block_size": "--block-size",
    "settings.kv_cache_dtype": "--dtype",
    "settings.max_model_len": "--max-model-len",
    "settings.gpu": "--gpu",
    "settings.gpu_memory_utilization": "--util",
    "settings.mem_fraction_static": "--util",
    "settings.free_gpu_memory_fraction": "--util",
}
_MARK = {"equal": "=", "consistent": "≈", "different": "≠", "not_recomputable": "?"}


def read_log(source: str) -> str:
    """The log text from a file or '-' (stdin): bounded, UTF-8, or a clear error."""
    try:
        if source == "-":
            data = sys.stdin.buffer.read(MAX_LOG_BYTES + 1)
        else:
            path = Path(source)
            if not path.is_file():
                raise FieldError("log", "cli.no_such_file", source=source)
            with path.open("rb") as fh:
                data = fh.read(MAX_LOG_BYTES + 1)
    except OSError as exc:
        raise FieldError("log", "cli.file_unreadable", source=source, reason=exc.strerror) from None
    if len(data) > MAX_LOG_BYTES:
        raise FieldError("log", "cli.log_too_large", mib=MAX_LOG_BYTES >> 20)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FieldError("log", "cli.log_not_utf8") from None


def _tokens(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return read_tokens(text)
    except QuantityError as exc:
        raise FieldError(
            ("settings", "max_model_len"), "cli.max_model_len_unreadable", reason=exc.message
        ) from None


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit in ("GiB", "x") or not float(value).is_integer():
        return f"{value:,.2f}{'x' if unit == 'x' else ''}"
    return f"{int(value):,}"


def human(r: ReconcileResult) -> str:
    lines = [
        f"engine     {r.engine_label} ({r.log_format}"
        + (f", version {r.engine_version}" if r.engine_version else "")
        + f"); {r.lines_recognised} of {r.lines_read} lines recognised",
        f"model      {r.model or '(none)'}",
        "settings   " + ", ".join(f"{s.name} {s.value} ({s.source})" for s in r.settings),
        "",
        f"{'figure':40} {'logged':>14} {'kvplan':>14}  status",
    ]
    for c in r.checks:
        lines.append(
            f"{c.label[:40]:40} {_fmt(c.logged, c.unit):>14} {_fmt(c.predicted, c.unit):>14}  "
            f"{_MARK[c.status]} {c.status.replace('_', ' ')} (line {c.line})"
        )
        if c.blocks_range:
            lines.append(
                f"{'':42}±half-digit rounding admits {c.blocks_range[0]:,}..{c.blocks_range[1]:,}"
            )
        if c.status == "different" and c.difference is not None:
            pct = f" ({c.difference_pct:+.2f}%)" if c.difference_pct is not None else ""
            lines.append(f"{'':42}different by {c.difference:+,g}{pct}")
        if c.reason:
            lines.append(f"{'':42}why: {c.reason}")
        if c.arithmetic:
            lines.append(f"{'':42}{c.arithmetic}")
    s = r.summary
    lines.append(
        f"\nsummary    {s.equal} equal, {s.consistent} consistent within rounding, "
        f"{s.different} different ({s.explained} explained), {s.not_recomputable} not "
        "recomputable"
    )
    if r.reserves is not None:
        res = r.reserves
        parts = [
            f"{k} {v:,}"
            for k, v in (
                ("weights_bytes", res.weights_bytes),
                ("reserve_bytes", res.reserve_bytes),
                ("kv_budget_bytes", res.kv_budget_bytes),
            )
            if v is not None
        ]
        lines.append("learned    " + ", ".join(parts))
        lines.extend(f"{'':11}{d}" for d in res.derivation)
    if r.plan_request is not None:
        lines.append("plan it    kvplan plan --request FILE  (FILE = the plan_request of --json)")
    lines.extend(f"note       {n}" for n in r.notes)
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    @app.command("reconcile")
    def reconcile_cmd(
        logfile: Annotated[str, typer.Argument(help="engine start-up log, or - for stdin")],
        model: Annotated[str | None, typer.Option(help="catalog id or a config.json path")] = None,
        engine: Annotated[str | None, typer.Option(help="vllm, sglang or trtllm")] = None,
        tp: Annotated[int | None, typer.Option(help="tensor_parallel_size")] = None,
        pp: Annotated[int | None, typer.Option(help="pipeline_parallel_size")] = None,
        block_size: Annotated[
            int | None, typer.Option(help="block_size / page_size / tokens_per_block")
        ] = None,
        dtype: Annotated[str | None, typer.Option(help="kv_cache_dtype")] = None,
        max_model_len: Annotated[
            str | None, typer.Option(help="max_model_len in tokens, e.g. 32k (k = 1024)")
        ] = None,
        gpu: Annotated[str | None, typer.Option(help="GPU catalog id (for reserves)")] = None,
        util: Annotated[
            float | None, typer.Option(help="gpu_memory_utilization / memory fraction")
        ] = None,
        settings: Annotated[
            str | None, typer.Option(help="JSON file with more settings (see the API)")
        ] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="print the result JSON (and errors as problem+json)")
        ] = False,
    ) -> None:
        """Reconcile an engine's start-up log (vLLM, SGLang, TensorRT-LLM) with kvplan."""
        error_style("kvplan reconcile", FLAGS, as_json=as_json)
        try:
            text = read_log(logfile)
            st: dict[str, Any] = {}
            if settings is not None:
                loaded = read_json_source(settings)
                if not isinstance(loaded, dict):
                    raise FieldError("settings", "cli.settings_not_object")
                st.update(loaded)
            fraction_key = engine_class(
                engine if engine in log_engines() else DEFAULT_ENGINE
            ).fraction_setting
            for key, value in (
                ("tensor_parallel_size", tp),
                ("pipeline_parallel_size", pp),
                ("block_size", block_size),
                ("kv_cache_dtype", dtype),
                ("max_model_len", _tokens(max_model_len)),
                ("gpu", gpu),
                (fraction_key, util),
            ):
                if value is not None:
                    st[key] = value
            body: dict[str, Any] = {"log": text, "settings": st}
            if engine is not None:
                body["engine"] = engine
            if model is not None:
                is_file = model.endswith(".json") or Path(model).is_file()
                body["model"] = read_json_source(model, config=True) if is_file else model
            request = ReconcileRequest.model_validate(body)
            result = reconcile(request)
        except PlanError as exc:
            fail(exc)
        except ValidationError as exc:
            emit_problem(exc)
        typer.echo(result.model_dump_json(indent=2) if as_json else human(result))
