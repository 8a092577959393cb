"""`kvplan lab`: seed 000's four lines, exit codes 0 / 1 / 2, problem+json on bad input."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from planner.cli import lab as lab_cli
from planner.lab.lab import Comparison, run_lab

# Seed 000, verbatim.
SEED_LINES = [
    "full vs token: PASS",
    "full vs chunks: PASS",
    "wrong mask detected: PASS",
    "128 KiB/token; 8192 tokens = 1.000 GiB",
]

runner = CliRunner()


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    # A bare app with only this command, so the test does not depend on the others.
    app = typer.Typer()
    lab_cli.register(app)

    @app.callback()
    def _root() -> None:
        pass

    return app


@pytest.mark.parametrize("args", [[], ["--seed", "7"], ["--chunks", "1,3,2,5"]])
def test_prints_the_seed_lines_and_exits_0(app: typer.Typer, args: list[str]) -> None:
    result = runner.invoke(app, ["lab", *args])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:4] == SEED_LINES
    assert any(line.startswith("quantized cache") for line in lines)
    assert "wrong offset detected: PASS (first mismatch at position 1)" in lines


def test_count_table_rows_carry_the_closed_forms(app: typer.Typer) -> None:
    out = runner.invoke(app, ["lab"]).stdout
    # d = 8, n = 32: no cache 3·32·64 = 6144 and 2·32·8 = 512; cache 3·64 = 192 and 512.
    assert "  32 |           6144    512 |         192    512 | match" in out.splitlines()


def test_json_report(app: typer.Typer) -> None:
    result = runner.invoke(app, ["lab", "--json", "--seed", "7"])
    assert result.exit_code == 0
    body = json.loads(result.stdout)
    assert body["passed"] is True
    assert all(body["checks"].values())
    assert body["kv"] == {"bytes_per_token": 131072, "tokens": 8192, "total_bytes": 2**30}


@pytest.mark.parametrize(
    ("args", "loc"),
    [
        (["--chunks", "5"], "chunks"),
        (["--chunks", "1,x"], "chunks"),
        (["--chunks", "1,0,2"], "chunks"),
        (["--chunks", "64,64,64"], "chunks"),
        (["--chunks", ""], "chunks"),
        (["--seed", "-1"], "seed"),
        (["--seed", "seven"], "seed"),
    ],
)
def test_bad_input_exits_2_with_problem_json(app: typer.Typer, args: list[str], loc: str) -> None:
    result = runner.invoke(app, ["lab", *args])
    assert result.exit_code == 2
    assert result.stdout == ""
    problem = json.loads(result.stderr)
    assert problem["status"] == 422
    assert {"type", "title", "detail", "errors"} <= problem.keys()
    assert problem["errors"][0]["loc"] == [loc]
    assert "Traceback" not in result.stderr


def test_a_failed_check_exits_1(app: typer.Typer, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(seed: int, chunks: tuple[int, ...]):  # type: ignore[no-untyped-def]
        report = run_lab(seed, chunks)
        bad = Comparison("full vs token", 0.5, 2)
        return dataclasses.replace(report, full_vs_token=bad)

    monkeypatch.setattr(lab_cli, "run_lab", broken)
    result = runner.invoke(app, ["lab"])
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == "full vs token: FAIL"


def test_registered_on_the_kvplan_app() -> None:
    from planner.cli import app as kvplan

    result = runner.invoke(kvplan, ["lab", "--seed", "7"])
    assert result.exit_code == 0
    assert result.stdout.splitlines()[:4] == SEED_LINES


def test_python_m_planner_lab() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "planner", "lab"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:4] == SEED_LINES
