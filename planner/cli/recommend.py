"""`kvplan recommend`: engine settings and launch flags for a workload, or what binds.

`--request FILE|-` takes the `POST /api/v1/recommend` JSON; the flags build the same request.
`--mix 70%:2k,20%:8k,10%:32k` is a length mix (share:length; k = 1024 tokens).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from planner.cli.output import emit_problem, error_style, fail, read_json_source
from planner.core.errors import FieldError, PlanError
from planner.core.recommend_schema import MAX_MIX_CLASSES, Recommendation, RecommendRequest
from planner.quantities import QuantityError, read_duration, read_tokens
from planner.service import recommend

_ITEM = re.compile(
    r"\s{0,4}([0-9]{1,3}(?:\.[0-9]{1,6})?)(%?)\s{0,4}[:@]\s{0,4}([0-9]{1,9})([kKmM]?)\s{0,4}"
)


def parse_mix(text: str) -> list[dict[str, Any]]:
    """ "70%:2k,20%:8k,10%:32k" or "0.7:2048,0.3:8192" → context_mix entries."""
    items = text.split(",")
    if len(items) > MAX_MIX_CLASSES:
        raise FieldError("context_mix", "cli.context_mix_classes", most=MAX_MIX_CLASSES)
    out: list[dict[str, Any]] = []
    for item in items:
        m = _ITEM.fullmatch(item)
        if not m:
            raise FieldError("context_mix", "cli.context_mix_unreadable", item=item.strip())
        share = float(m.group(1)) / (100 if m.group(2) else 1)
        scale = {"": 1, "k": 1024, "m": 1 << 20}[m.group(4).lower()]
        out.append({"context_tokens": int(m.group(3)) * scale, "share": share})
    return out


def parse_seconds(text: str) -> float:
    """ "50ms" → 0.05, "0.05s" → 0.05; a bare "50" is refused (50 seconds or 50 ms?)."""
    try:
        return read_duration(text)
    except QuantityError as exc:
        raise FieldError("tpot_seconds", "cli.duration_unreadable", reason=exc.message) from None


def parse_tokens(text: str, field: str) -> int:
    """ "32768", "32k" → tokens (k = 1024)."""
    try:
        return read_tokens(text)
    except QuantityError as exc:
        raise FieldError(field, "cli.tokens_unreadable_32k", reason=exc.message) from None


FLAGS: dict[str, str] = {
    "model": "--model",
    "gpu": "--gpu",
    "gpu_count": "--gpus",
    "engine": "--engine",
    "context_mix": "--mix",
    "max_model_len": "--max-model-len",
    "concurrency": "--concurrency",
    "tpot_seconds": "--tpot",
    "throughput_tokens_per_s": "--throughput",
    "kv_cache_dtype": "--dtype",
    "allow_fp8_kv": "--no-fp8",
    "gpu_memory_utilization": "--util",
    "tail_quantile": "--tail",
}


def human(r: Recommendation) -> str:
    lines: list[str] = []
    if r.feasible and r.settings is not None:
        s = r.settings
        lines += [
            f"fits       {r.model} on {r.gpus_used} × {r.gpu} ({r.engine}): TP "
            f"{s.tensor_parallel_size} × {r.instances} instance(s)",
            f"settings   max_model_len {s.max_model_len:,}, max_num_seqs {s.max_num_seqs}, "
            f"gpu_memory_utilization {s.gpu_memory_utilization:g}, kv_cache_dtype "
            f"{s.kv_cache_dtype}, block_size {s.block_size}",
            "",
            r.command or "",
        ]
        for name, content in r.extra_files.items():
            lines += ["", f"# {name}", content.rstrip()]
        lines.append("")
    else:
        lines += [
            f"no fit     {r.model} on {r.gpu_count} × {r.gpu} ({r.engine})",
            f"binding    {r.binding_constraint}: {r.binding_detail}",
        ]
        lines += [f"nearest    {x.change}: {x.detail}" for x in r.nearest]
    c = r.capacity
    if c is not None:
        mix = ", ".join(
            f"{k.share:.0%} × {k.context_tokens:,} tokens = {k.blocks_per_request:,} blocks"
            for k in c.classes
        )
        lines += [
            f"mix        {mix}",
            f"capacity   {c.usable_blocks:,} usable blocks of {c.block_tokens:,} "
            f"token{'' if c.block_tokens == 1 else 's'} per "
            f"instance: expected {c.expected_concurrency:.1f} requests, "
            f"{c.tail_concurrency} fit {c.tail_quantile:.0%} of the time ({c.method})",
        ]
    if r.decode_step_seconds is not None:
        lines.append(
            f"decode     {r.decode_step_seconds * 1e3:.2f} ms per step (bandwidth floor)"
            + (f", target {r.tpot_seconds * 1e3:.2f} ms" if r.tpot_seconds else "")
        )
    if r.expected_decode_step_seconds is not None:
        lines.append(
            f"expected   {r.expected_decode_step_seconds * 1e3:.2f} ms per step (fitted "
            "constants; TPOT and throughput targets are checked against it)"
            + (f", {r.throughput_tokens_per_s:,.0f} tokens/s" if r.throughput_tokens_per_s else "")
        )
    lines += [f"note       {n}" for n in r.notes]
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    @app.command("recommend")
    def recommend_cmd(
        request: Annotated[
            str | None, typer.Option("--request", "-r", help="JSON request file, or -")
        ] = None,
        model: Annotated[str | None, typer.Option(help="catalog id or config.json path")] = None,
        gpu: Annotated[str | None, typer.Option(help="GPU catalog id")] = None,
        gpus: Annotated[int, typer.Option(help="GPUs available")] = 1,
        engine: Annotated[str, typer.Option(help="vllm, sglang or trtllm")] = "vllm",
        mix: Annotated[
            str | None,
            typer.Option(help="length mix share:tokens, e.g. 70%:2k,20%:8k,10%:32k (k = 1024)"),
        ] = None,
        max_model_len: Annotated[
            str | None,
            typer.Option(help="longest request in tokens, e.g. 32k; default: the mix's longest"),
        ] = None,
        concurrency: Annotated[
            int | None, typer.Option(help="concurrent requests to hold (required)")
        ] = None,
        tpot: Annotated[
            str | None, typer.Option(help="TPOT target with its unit, e.g. 50ms or 0.05s")
        ] = None,
        throughput: Annotated[
            float | None,
            typer.Option(help="output tokens/s to sustain over all instances, e.g. 5000"),
        ] = None,
        dtype: Annotated[str | None, typer.Option(help="fix kv_cache_dtype")] = None,
        no_fp8: Annotated[bool, typer.Option("--no-fp8", help="never suggest fp8 KV")] = False,
        util: Annotated[float | None, typer.Option(help="memory fraction")] = None,
        tail: Annotated[float, typer.Option(help="tail quantile")] = 0.95,
        as_json: Annotated[
            bool, typer.Option("--json", help="print the result JSON (and errors as problem+json)")
        ] = False,
    ) -> None:
        """Recommend engine settings and flags that hold a workload."""
        error_style("kvplan recommend", FLAGS if request is None else {}, as_json=as_json)
        try:
            if request is not None:
                body: Any = read_json_source(request)
            else:
                body = {
                    "gpu_count": gpus,
                    "engine": engine,
                    "allow_fp8_kv": not no_fp8,
                    "tail_quantile": tail,
                }
                if model is not None:
                    is_file = model.endswith(".json") or Path(model).is_file()
                    body["model"] = read_json_source(model, config=True) if is_file else model
                if max_model_len is not None:
                    body["max_model_len"] = parse_tokens(max_model_len, "max_model_len")
                for key, value in (
                    ("gpu", gpu),
                    ("concurrency", concurrency),
                    ("throughput_tokens_per_s", throughput),
                    ("kv_cache_dtype", dtype),
                    ("gpu_memory_utilization", util),
                ):
                    if value is not None:
                        body[key] = value
                if mix is not None:
                    body["context_mix"] = parse_mix(mix)
                if tpot is not None:
                    body["tpot_seconds"] = parse_seconds(tpot)
            req = RecommendRequest.model_validate(body)
            result = recommend(req)
        except PlanError as exc:
            fail(exc)
        except ValidationError as exc:
            emit_problem(exc)
        typer.echo(result.model_dump_json(indent=2) if as_json else human(result))
