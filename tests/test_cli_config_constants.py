"""A config.json as published may hold a bare Infinity (Nemotron-H's `time_step_limit`:
[0.0, Infinity]); kvplan reads it from a file as transformers does, and a field the planner
reads that holds one is refused by name."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app
from planner.core.config_fields import json_constant

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _nemotron() -> dict[str, object]:
    models = json.loads((ROOT / "tests/fixtures/hybrid_models.json").read_text("utf-8"))["models"]
    return next(m["config"] for m in models if m["id"] == "nvidia/NVIDIA-Nemotron-Nano-9B-v2")


def test_json_constants_read_as_their_text() -> None:
    text = '{"time_step_limit": [0.0, Infinity], "x": -Infinity, "y": NaN}'
    assert json.loads(text, parse_constant=json_constant) == {
        "time_step_limit": [0.0, "Infinity"],
        "x": "-Infinity",
        "y": "NaN",
    }


def test_a_config_file_with_a_bare_infinity_plans(tmp_path: Path) -> None:
    body = json.dumps(_nemotron())[:-1] + ', "time_step_limit": [0.0, Infinity]}'
    path = tmp_path / "config.json"
    path.write_text(body, "utf-8")
    r = runner.invoke(app, ["plan", "--model", str(path), "--budget", "48GiB", "--json"])
    assert r.exit_code == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["capacity"]["max_requests"] > 0


def test_infinity_in_a_field_the_planner_reads_is_refused_by_name(tmp_path: Path) -> None:
    body = json.dumps({**_nemotron(), "num_hidden_layers": 0})
    path = tmp_path / "config.json"
    path.write_text(body.replace('"num_hidden_layers": 0', '"num_hidden_layers": Infinity'))
    r = runner.invoke(app, ["plan", "--model", str(path), "--budget", "48GiB", "--json"])
    assert r.exit_code == 2
    assert "num_hidden_layers" in r.stdout + r.stderr
