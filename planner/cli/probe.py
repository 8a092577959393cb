"""`kvplan probe`: measure this host's copy ceiling and decode bandwidth, print, optionally report.

`--report URL --token T` posts the calibration to a running kvplan service
(`POST URL/api/v1/calibrations`, `Authorization: Bearer T`), so GPU nodes can calibrate a central
planner. The token may come from KVPLAN_ADMIN_TOKEN instead of the command line (which other
users of the host can see in the process list).

`--validate` then times a real Llama-shaped model's decode steps (transformers, random weights)
and plans the same points through `POST /api/v1/plan` with the stored calibration: on the
service given by `--report`, else on an in-process app with a temporary store. It prints the
predicted-vs-measured table; the calibration it stores (and prints with `--json`) carries the
fitted step terms and the table.

Exit codes: 0 ok; 1 the probe ran but the report failed; 2 bad input or a backend that cannot
run here (problem+json on stderr).
"""

from __future__ import annotations

import secrets
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn
from urllib.parse import urlsplit

import httpx
import typer
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.cli.output import emit_problem, fail
from planner.core.errors import FieldError
from planner.core.units import GB, TB, MiB, fmt_bytes, parse_bytes
from planner.probe import AttentionShape, CalibrationIn, ProbeFailed, ProbeUnavailable

if TYPE_CHECKING:
    from planner.probe.validate import PlannerLink, ValidationResult

REPORT_TIMEOUT_SECONDS = 30.0
CALIBRATIONS_PATH = "/api/v1/calibrations"


class ProbeOptions(BaseModel):
    """The command's options, validated like an API body (bounded, unknown values named)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: Literal["auto", "cuda", "cpu"] = "auto"
    max_seconds: float = Field(30.0, gt=0, le=3600, allow_inf_nan=False)
    attention_shape: AttentionShape = Field(default_factory=AttentionShape)
    dtype: Literal["bf16", "fp16", "fp8"] = "bf16"
    max_memory_bytes: int | None = Field(None, ge=64 * MiB, le=1 << 40)
    threads: int | None = Field(None, ge=1, le=4096)


def _rate(bytes_per_s: float | None) -> str:
    """Decimal units, labelled: TB/s for accelerators, GB/s for hosts."""
    if bytes_per_s is None:
        return "n/a"
    if bytes_per_s >= 0.1 * TB:
        return f"{bytes_per_s / TB:.3f} TB/s"
    return f"{bytes_per_s / GB:.2f} GB/s"


def _ratio(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def format_calibration(c: CalibrationIn) -> list[str]:
    shape = c.attention_shape
    label = "CPU figures" if c.device_kind == "cpu" else "GPU figures"
    lines = [
        f"kvplan probe: {label}, backend {c.backend}, {c.dtype or '?'} on {c.device_name}",
        f"  copy ceiling (read-only reduction, median): {_rate(c.copy_bandwidth_bytes_per_s)}"
        f"  (best {_rate(c.copy_bandwidth_best_bytes_per_s)})",
        f"  decode attention BW_eff:                   {_rate(c.decode_bandwidth_bytes_per_s)}"
        f"  ({_ratio(c.decode_to_copy_ratio)} x copy ceiling)",
        f"  fixed overhead t0 per attention call:      {c.fixed_overhead_seconds * 1e6:.1f} us",
    ]
    if c.half_performance_bytes is not None:
        n_half = fmt_bytes(int(c.half_performance_bytes))
        lines.append(f"  half-performance size n_half = t0 x BW:    {n_half}")
    if shape is not None:
        lines.append(
            f"  shape: {shape.num_q_heads} q heads / {shape.num_kv_heads} KV heads, "
            f"head_dim {shape.head_dim} (GQA group {shape.group_size}), q_len 1"
        )
    if c.datasheet_bandwidth_bytes_per_s is not None:
        lines.append(
            f"  datasheet: {_rate(c.datasheet_bandwidth_bytes_per_s)} ({c.datasheet_source}); "
            f"copy/datasheet {_ratio(c.copy_to_datasheet_ratio)}, "
            f"decode/datasheet {_ratio(c.decode_to_datasheet_ratio)}"
        )
    else:
        lines.append("  datasheet: no row for this device")
    if c.fit is not None:
        lines.append(
            f"  fit: {c.fit.points_used} sizes >= {fmt_bytes(c.fit.min_bytes)}, "
            f"R^2 {c.fit.r_squared:.3f}, |residual| median {c.fit.median_abs_relative_residual:.1%}"
            f", max {c.fit.max_abs_relative_residual:.1%}"
        )
    lines.append(f"  flags: {', '.join(c.flags) or 'none'}")
    lines += [f"  note: {n}" for n in c.notes]
    lines.append("  units: decimal (1 GB/s = 10^9 B/s, 1 TB/s = 10^12 B/s); sizes binary (MiB)")
    return lines


def format_result(c: CalibrationIn) -> list[str]:
    from planner.probe.validate import validation_lines

    return [*format_calibration(c), *validation_lines(c)]


def _report_failed(detail: str, status: int = 502) -> NoReturn:
    from planner.contract.problems import make_problem

    problem = make_problem(status, detail, title="Report failed", slug="report-failed")
    sys.stderr.write(problem.model_dump_json(exclude_none=True) + "\n")
    raise typer.Exit(1)


def _check_report_target(url: str, token: str | None) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise FieldError("report", "cli.report_url_invalid", url=url)
    if not token:
        raise FieldError("token", "cli.report_needs_token")
    return url.rstrip("/") + CALIBRATIONS_PATH


def report(
    endpoint: str, token: str, calibration: CalibrationIn, client: httpx.Client | None = None
) -> dict[str, Any]:
    """POST the calibration; the stored record (with its id) on 201, else exit 1."""
    content = calibration.model_dump_json(exclude_none=True)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    try:
        if client is not None:  # the caller's client carries its own timeouts
            resp = client.post(endpoint, content=content, headers=headers)
        else:
            resp = httpx.post(
                endpoint, content=content, headers=headers, timeout=REPORT_TIMEOUT_SECONDS
            )
    except httpx.HTTPError as exc:
        _report_failed(f"could not reach {endpoint}: {type(exc).__name__}: {exc}")
    if resp.status_code != 201:
        if resp.headers.get("content-type", "").startswith("application/problem+json"):
            sys.stderr.write(resp.text.strip()[:4000] + "\n")
            raise typer.Exit(1)
        _report_failed(f"{endpoint} answered {resp.status_code}: {resp.text[:300]}")
    try:
        stored: dict[str, Any] = resp.json()
    except ValueError:
        _report_failed(f"{endpoint} answered 201 without JSON")
    return stored


@contextmanager
def in_process_link() -> Iterator[PlannerLink]:
    """The app in this process, with a throw-away store: the HTTP path without a server.

    Where the web stack is not installed (a bare GPU image with torch but no FastAPI), core
    `plan()` with the calibration read back from a throw-away store, and the report says so.
    """
    from planner.probe.validate import core_link, http_link

    with tempfile.TemporaryDirectory(prefix="kvplan-validate-") as tmp:
        try:
            from starlette.testclient import TestClient

            from planner.app import create_app
            from planner.settings import load_settings
        except ImportError:
            from planner.store import Store

            store = Store(Path(tmp))
            try:
                yield core_link(
                    store, "plan() with the stored calibration_id (no web stack installed)"
                )
            finally:
                store.close()
            return
        token = secrets.token_urlsafe(24)
        settings = load_settings(data_dir=Path(tmp), admin_token=token, database_url=None)
        with TestClient(create_app(settings)) as client:
            yield http_link(
                client,
                token,
                label="POST /api/v1/plan with calibration_id (in-process app, temporary store)",
            )


def probe(
    device: Annotated[
        str, typer.Option(metavar="auto|cuda|cpu", help="Backend; auto picks CUDA if present.")
    ] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print the calibration as JSON.")] = False,
    max_seconds: Annotated[
        str, typer.Option(metavar="N", help="Time budget for the measurements, seconds.")
    ] = "30",
    num_q_heads: Annotated[str, typer.Option(metavar="N", help="Query heads.")] = "32",
    num_kv_heads: Annotated[str, typer.Option(metavar="N", help="KV heads (GQA).")] = "8",
    head_dim: Annotated[str, typer.Option(metavar="N", help="Head dimension.")] = "128",
    dtype: Annotated[str, typer.Option(metavar="bf16|fp16|fp8", help="KV dtype (CUDA).")] = "bf16",
    max_memory: Annotated[
        str | None, typer.Option(metavar="SIZE", help="Cap on probe buffers, e.g. 4GiB.")
    ] = None,
    report_url: Annotated[
        str | None,
        typer.Option("--report", metavar="URL", help="Post the result to a kvplan service."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(metavar="T", envvar="KVPLAN_ADMIN_TOKEN", help="Admin token for --report."),
    ] = None,
    validate_model: Annotated[
        bool,
        typer.Option(
            "--validate",
            help="Then time a real model's decode steps and compare with the planner's estimate "
            "(CPU: a small Llama shape; CUDA: the Llama-3.1-8B shape in bf16).",
        ),
    ] = False,
    threads: Annotated[
        str | None,
        typer.Option(metavar="N", help="CPU threads for the probe and model (--validate: 1)."),
    ] = None,
) -> None:
    """Measure copy ceiling, decode-attention BW_eff and t0 on this host (Llama-3.1-8B shape)."""
    try:
        memory = parse_bytes(max_memory, field="max_memory") if max_memory else None
        endpoint = _check_report_target(report_url, token) if report_url else None
    except FieldError as exc:
        fail(exc)
    shape_flags = (num_q_heads, num_kv_heads, head_dim, dtype)
    if validate_model and shape_flags != ("32", "8", "128", "bf16"):
        fail(
            FieldError(
                "attention_shape",
                "cli.validate_shape_flags",
            )
        )
    try:
        options = ProbeOptions.model_validate(
            {
                "device": device,
                "max_seconds": max_seconds,
                "attention_shape": {
                    "num_q_heads": num_q_heads,
                    "num_kv_heads": num_kv_heads,
                    "head_dim": head_dim,
                },
                "dtype": dtype,
                "max_memory_bytes": memory,
                "threads": threads,
            }
        )
    except ValidationError as exc:
        emit_problem(exc)
    from planner.probe.run import run_probe  # NumPy and the backends load only when probing

    if validate_model:
        validated(options, as_json=as_json, report_url=report_url, token=token)
        return
    try:
        calibration = run_probe(
            options.device,
            options.max_seconds,
            shape=options.attention_shape,
            dtype=options.dtype,
            max_memory_bytes=options.max_memory_bytes,
            cpu_config=_cpu_config(options.threads),
        )
    except ProbeUnavailable as exc:
        fail(FieldError("device", "probe.unavailable", reason=str(exc)))
    except ProbeFailed as exc:
        fail(FieldError("max_seconds", "probe.failed", reason=str(exc)))
    if as_json:
        typer.echo(calibration.model_dump_json(indent=2, exclude_none=True))
    else:
        typer.echo("\n".join(format_calibration(calibration)))
    if endpoint is not None and token:
        stored = report(endpoint, token, calibration)
        typer.echo(f"reported to {endpoint}: id {stored.get('id')}", err=True)


def _cpu_config(threads: int | None) -> Any:
    if threads is None:
        return None
    from planner.probe.cpu import CpuConfig

    return CpuConfig(threads=threads)


def validated(
    options: ProbeOptions, *, as_json: bool, report_url: str | None, token: str | None
) -> None:
    """`--validate`: probe with the validation model's shape, then time and plan its steps."""
    from planner.probe.validate import PlannerError, http_link, probe_and_validate

    def run(link: PlannerLink) -> ValidationResult:
        return probe_and_validate(
            options.device,
            link,
            max_seconds=options.max_seconds,
            max_memory_bytes=options.max_memory_bytes,
            threads=options.threads,
        )

    try:
        if report_url is not None and token:
            base = report_url.rstrip("/")
            with httpx.Client(timeout=REPORT_TIMEOUT_SECONDS) as client:
                label = f"POST {base}/api/v1/plan with calibration_id"
                result = run(http_link(client, token, base, label=label))
        else:
            with in_process_link() as link:
                result = run(link)
    except ProbeUnavailable as exc:
        fail(FieldError("device", "probe.unavailable", reason=str(exc)))
    except ProbeFailed as exc:
        fail(FieldError("max_seconds", "probe.failed", reason=str(exc)))
    except (PlannerError, httpx.HTTPError) as exc:
        _report_failed(f"validation could not use the planner: {exc}")
    stored = result.calibration
    if as_json:
        typer.echo(stored.model_dump_json(indent=2, exclude_none=True))
    else:
        typer.echo("\n".join(format_result(stored)))
    where = report_url or "a temporary in-process store"
    typer.echo(
        f"stored in {where}: probe {result.probe.id}, validated calibration {stored.id}", err=True
    )


def register(app: typer.Typer) -> None:
    app.command("probe")(probe)
