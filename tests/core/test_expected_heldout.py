"""The floor against every published measurement (training and held-out): physics, so no
measured step may beat it, and the expected step is never below it."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from planner.service import plan

ROOT = Path(__file__).resolve().parents[2]
MEASUREMENTS = ROOT / "bench" / "measurements"


def _fit_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "fit_step_model", ROOT / "bench" / "fit_step_model.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _rows() -> list[dict[str, Any]]:
    rows = []
    for name in ("decode_measurements_train.jsonl", "decode_measurements_validation.jsonl"):
        for line in (MEASUREMENTS / name).read_text().splitlines():
            if line.strip():
                rows.append(json.loads(line))
    return rows


def test_every_row_names_its_source_and_quote() -> None:
    for r in _rows():
        assert r["source_url"].startswith("https://") and r["quote"] and r["derivation"], r["id"]
        assert r["measured_step_ms"] > 0 and r["batch"] >= 1, r["id"]


def test_the_floor_beats_no_measurement_and_the_estimate_keeps_above_it() -> None:
    fit = _fit_module()
    beaten, below = [], []
    for r in _rows():
        if r.get("excluded"):
            continue
        b = plan(fit.request_for(r)).bounds
        assert b is not None and b.expected is not None
        if b.decode_step_seconds > r["measured_step_ms"] / 1e3:
            beaten.append(r["id"])
        if b.expected.decode_step_seconds < b.decode_step_seconds * (1 - 1e-12):
            below.append(r["id"])
    assert beaten == [] and below == []


@pytest.mark.parametrize("name", ["decode_measurements_validation.jsonl"])
def test_an_excluded_row_says_why(name: str) -> None:
    for line in (MEASUREMENTS / name).read_text().splitlines():
        r = json.loads(line)
        if "excluded" in r:
            assert len(r["excluded"]) > 40, r["id"]
