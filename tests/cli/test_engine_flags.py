"""`kvplan plan`'s SGLang flags reach the plan as the API's fields do; bad values name the flag."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.core.schema import PlanRequest
from planner.service import default_catalog, plan

runner = CliRunner()
GEMMA = "google/gemma-3-27b-it"
BASE = ["plan", "--model", GEMMA, "--engine", "sglang", "--gpu", "H100-SXM-80GB", "--json"]


def _api(body: dict[str, Any]) -> dict[str, Any]:
    req = PlanRequest.model_validate(
        {"model": GEMMA, "engine": "sglang", "gpu": "H100-SXM-80GB", **body}
    )
    out: dict[str, Any] = json.loads(plan(req, catalog=default_catalog()).model_dump_json())
    return out


@pytest.mark.parametrize(
    ("flags", "body"),
    [
        (["--swa-full-tokens-ratio", "0.5"], {"swa_full_tokens_ratio": 0.5}),
        (["--max-total-tokens", "64k"], {"max_total_tokens": 65536}),
        (["--context-length", "32k"], {"context_length": 32768}),
        (["--chunked-prefill-size", "4k"], {"chunked_prefill_size": 4096}),
        (["--cuda-graph-max-bs", "64"], {"cuda_graph_max_bs": 64}),
    ],
)
def test_flag_gives_the_apis_plan(flags: list[str], body: dict[str, Any]) -> None:
    r = runner.invoke(app, [*BASE, *flags])
    assert r.exit_code in (0, 3), r.stderr
    assert json.loads(r.stdout) == _api(body)


def test_dp_attention_flags_give_the_apis_plan() -> None:
    r = runner.invoke(app, [*BASE, "--tp", "2", "--dp-size", "2", "--enable-dp-attention"])
    assert r.exit_code in (0, 3), r.stderr
    want = _api({"tensor_parallel_size": 2, "data_parallel_size": 2, "enable_dp_attention": True})
    assert json.loads(r.stdout) == want


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        (["--swa-full-tokens-ratio", "2"], "--swa-full-tokens-ratio"),
        (["--max-total-tokens", "lots"], "--max-total-tokens"),
        (["--context-length", "0"], "--context-length"),
        (["--chunked-prefill-size", "many"], "--chunked-prefill-size"),
        (["--cuda-graph-max-bs", "0"], "--cuda-graph-max-bs"),
        (["--dp-size", "0"], "--dp-size"),
    ],
)
def test_bad_value_exits_2_naming_the_flag(flags: list[str], flag: str) -> None:
    r = runner.invoke(app, ["plan", "--model", GEMMA, "--engine", "sglang", *flags])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.splitlines()[0].startswith(f"kvplan plan: {flag}: "), r.stderr
