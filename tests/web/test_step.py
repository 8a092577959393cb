"""The floor and the expected step side by side: the summary line, the CLI, the page (en, zh)."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from planner.cli import app
from planner.core.expected_schema import ExpectedOut, StepTermOut
from planner.web.i18n import translations
from planner.web.step import step_parts, step_summary

URL = (
    "/?model=meta-llama/Llama-3.1-70B&kv_cache_dtype=bf16&context_tokens=8192"
    "&gpu=H100-SXM-80GB&tensor_parallel_size=4"
)


def term(code: str, ms: float, group: str, counted: bool = True) -> StepTermOut:
    return StepTermOut(
        code=code,  # type: ignore[arg-type]
        seconds=ms / 1e3,
        group=group,  # type: ignore[arg-type]
        counted=counted,
        measured=False,
        params={},
    )


# The issue's example: 9.0 + 0.1 + 2.4 + (3.0 + 1.3) = 15.8 ms over a 9.1 ms floor.
EXAMPLE = ExpectedOut(
    decode_step_seconds=15.8e-3,
    tpot_seconds=15.8e-3,
    decode_tokens_per_s=1.0,
    batch_requests=1,
    dominant="memory",
    terms=[
        term("weights_read", 9.0, "memory"),
        term("kv_read", 0.1, "memory"),
        term("matmul", 0.5, "compute", counted=False),
        term("attention", 0.0, "compute", counted=False),
        term("all_reduce", 2.4, "communication"),
        term("pipeline_handoff", 0.0, "communication"),
        term("per_layer", 3.0, "fixed"),
        term("per_step", 1.3, "fixed"),
    ],
    constants_source="catalog",
    measured_terms=[],
)


def test_summary_reads_like_the_issue() -> None:
    assert step_summary(9.1e-3, EXAMPLE) == (
        "floor 9.1 ms · expected 15.8 ms: weights 9.0 · KV 0.100 · all-reduce 2.4 · fixed 4.3"
    )
    # The parts are the counted terms: they add up to the step.
    assert sum(s for _, s in step_parts(EXAMPLE)) == pytest.approx(15.8e-3)


def test_summary_in_chinese() -> None:
    zh = step_summary(9.1e-3, EXAMPLE, translations("zh").gettext)
    assert zh.startswith("下限 9.1 ms · 预期 15.8 ms: 权重 9.0")
    assert "固定开销 4.3" in zh


def test_cli_plan_prints_floor_and_expected() -> None:
    r = CliRunner().invoke(
        app,
        [
            "plan",
            "--model",
            "meta-llama/Llama-3.1-70B",
            "--gpu",
            "H100-SXM-80GB",
            "--tp",
            "4",
            "--context",
            "8k",
        ],
    )
    assert r.exit_code == 0, r.stdout
    line = next(x for x in r.stdout.splitlines() if x.startswith("expected"))
    assert re.search(r"floor [\d.]+ ms · expected [\d.]+ ms: weights [\d.]+ · KV", line)
    assert "all-reduce" in line and "fixed" in line and "fitted constants" in line


@pytest.mark.parametrize(
    ("lang", "words"),
    [
        ("en", ["Expected decode step", "floor ", "· expected", "all-reduce", "fitted"]),
        ("zh", ["预期解码步", "下限 ", "· 预期", "权重", "拟合"]),
    ],
)
def test_page_shows_both(client: TestClient, lang: str, words: list[str]) -> None:
    response = client.get(URL, headers={"Accept-Language": lang})
    assert response.status_code == 200
    text = response.text
    start = text.index('id="expected-step"')
    block = re.sub(r"<[^>]+>", " ", text[start : text.index("</div>", start)])
    for w in words:
        assert w in block, (w, block)
