"""The release a vLLM log came from, when it names none: the source lines its start-up lines
print ("[gpu_worker.py:298] Available KV cache memory") against every release's, read in the
wheels of 0.9.0 to 0.33.0 (planner.core.engines.vllm.releases.LOG_SOURCE_LINES), with how sure
that is; and the release a version line names, pre-releases included.

Expected releases are the fixtures' own (tests/fixtures/engine_logs.jsonl: the version a
fixture states, or the thread's date), never this implementation's output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.core.engines.versions import parse_version, version_text
from planner.core.engines.vllm.logs import version_from_log
from planner.core.engines.vllm.releases import LOG_SOURCE_LINES, RELEASES
from planner.core.logs.parse import parse_log
from planner.core.reconcile_schema import ReconcileRequest
from planner.service import reconcile
from tests.core.test_reconcile import FIXTURES, INPUTS, coded, run


@pytest.mark.parametrize(
    ("fixture_id", "release", "code", "params"),
    [
        # LMCache#1739, its lines dated 10-03 (an Oct-2025 log): every line is 0.10.2's; 0.11.0
        # prints the same worker line but its KV-size lines at kv_cache_utils.py:1087/1091.
        (
            "vllm-v1-qwen3-14b-lmcache1739",
            "0.10.2",
            "reconcile.vllm.version_from_line_numbers",
            {"source": "gpu_worker.py:298, kv_cache_utils.py:864, kv_cache_utils.py:868"},
        ),
        # vllm#25350 quotes one tagged line: "Maximum concurrency" at kv_cache_utils.py:868 is
        # 0.10.2's alone (0.10.1 logs it at 853 or 1017, 0.11.0 at 1091).
        (
            "vllm-v1-fp8kv-mml100k-vllm25350",
            "0.10.2",
            "reconcile.vllm.version_from_line_numbers",
            {"source": "kv_cache_utils.py:868"},
        ),
        # The IBM Code Engine tutorial states vLLM 0.11.0; its four lines are 0.11.0's alone.
        (
            "vllm-v1-granite4-micro-fp8-l40s-ibmcodeengine",
            "0.11",
            "reconcile.vllm.version_from_line_numbers",
            {
                "source": "gpu_model_runner.py:2653, gpu_worker.py:298, kv_cache_utils.py:1087, "
                "kv_cache_utils.py:1091"
            },
        ),
        # vllm#33263 (2026-01-28): 0.14.0 and 0.14.1 print both lines there.
        (
            "vllm-v1-qwen3-1p7b-24gb-vllm33263",
            "0.14",
            "reconcile.vllm.version_from_line_numbers_of_several",
            {"source": "gpu_worker.py:358, kv_cache_utils.py:1305", "releases": "0.14, 0.14.1"},
        ),
        # vllm#28228, "Nov 2025": the KV-size lines are 0.11.1's and 0.11.2's, the worker's
        # line 349 no release's (a build on the way to 0.11.1).
        (
            "vllm-v1-kimi-linear-awq-tp2-3090-vllm28228",
            "0.11.1",
            "reconcile.vllm.version_from_some_line_numbers",
            {
                "source": "gpu_worker.py:349, kv_cache_utils.py:1229, kv_cache_utils.py:1234",
                "matched": 2,
                "total": 3,
                "releases": "0.11.1, 0.11.2",
            },
        ),
        # vllm#21348 quotes its lines without prefixes: only their layout tells, 0.9 to 0.27.
        (
            "vllm-v1-qwen3-235b-fp8-tp4-vllm21348",
            "0.19",
            "reconcile.vllm.version_from_separate_lines",
            {"first": "0.9", "last": "0.27"},
        ),
    ],
)
def test_a_log_without_a_version_line_is_dated_by_its_source_lines(
    fixture_id: str, release: str, code: str, params: dict[str, Any]
) -> None:
    settings = {k: v for k, v in INPUTS[fixture_id][1].items() if k != "engine_version"}
    r = run(fixture_id, settings=settings)
    assert r.engine_version == release
    assert coded(r)[code] == {"engine": "vLLM", "version": release, **params}


def test_the_kimi_log_reproduces_at_the_release_its_lines_name() -> None:
    # Inferred as 0.11.1 (above), the log's figures still reproduce or are explained.
    fid = "vllm-v1-kimi-linear-awq-tp2-3090-vllm28228"
    r = run(fid, settings={"tensor_parallel_size": 2})
    assert r.checks
    assert all(c.status in ("equal", "consistent") or c.reason for c in r.checks)


def test_every_release_on_the_index_has_its_source_lines() -> None:
    # Every release from 0.9.0 to 0.33.0 on the package index (pip index versions vllm).
    minors = set(RELEASES.minors())
    table = {v[:2] for v in map(parse_version, LOG_SOURCE_LINES) if v is not None}
    assert {f"{a}.{b}" for a, b in table} == minors
    assert FIXTURES  # the fixtures above are loaded


@pytest.mark.parametrize(
    ("version_line", "divided"),
    [("0.20.0", True), ("0.20.1rc1", True), ("0.20.1", False)],
)
def test_a_pre_release_version_line_takes_the_rules_before_its_final_release(
    version_line: str, divided: bool
) -> None:
    # "GPU KV cache size" divides num_blocks by Gemma-3's KV-cache groups up to 0.20.1rc1 and
    # is max_concurrency × max_model_len from 0.20.1 (versions.since; releases.py).
    log = (
        f"INFO vLLM API server version {version_line}\n"
        "Available KV cache memory: 40.00 GiB\n"
        "GPU KV cache size: 74,896 tokens\n"
    )
    r = reconcile(
        ReconcileRequest(log=log, model="google/gemma-3-27b-it", settings={"max_model_len": 32768})
    )
    assert r.engine_version == version_line.removesuffix(".0")
    assert ("reconcile.vllm.hybrid_tokens_divided" in coded(r)) is divided


def test_a_version_line_the_source_lines_contradict_is_kept_and_said() -> None:
    # vllm#19996's serve log (tests/fixtures/engine_logs_drafts.jsonl) ran a build the fixture
    # names 0.9.1.dev705+g01220ce89; its three lines are 0.9.2's alone (0.9.1's wheel logs them
    # at gpu_worker.py:227 and kv_cache_utils.py:715/719).
    lines = [
        "INFO 06-23 14:21:48 [gpu_worker.py:232] Available KV cache memory: 51.63 GiB",
        "INFO 06-23 14:21:48 [kv_cache_utils.py:716] GPU KV cache size: 410,128 tokens",
        "INFO 06-23 14:21:48 [kv_cache_utils.py:720] Maximum concurrency for 131,072 tokens per "
        "request: 3.13x",
    ]
    log = "INFO vLLM API server version 0.9.1.dev705+g01220ce89\n" + "\n".join(lines) + "\n"
    r = reconcile(ReconcileRequest(log=log, model="meta-llama/Llama-3.1-8B"))
    assert r.engine_version == "0.9.1"
    assert coded(r)["reconcile.version_lines_differ"] == {
        "engine": "vLLM",
        "named": "0.9.1.dev705+g01220ce89",
        "found": "0.9.2",
        "source": "gpu_worker.py:232, kv_cache_utils.py:716, kv_cache_utils.py:720",
    }


BUDGET_LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "budget_logs.jsonl"


def _stated_version_logs() -> list[tuple[str, str, list[str]]]:
    out = []
    for line in BUDGET_LOGS.read_text("utf-8").splitlines():
        d = json.loads(line)
        v = parse_version(d["engine_version"]) if d["engine"] == "vllm" else None
        if v is not None and RELEASES.covers(v) and len(v) == 3:
            out.append((d["id"], version_text(v), d["log_lines"]))
    return out


@pytest.mark.parametrize(("fid", "stated", "lines"), _stated_version_logs(), ids=lambda x: x)
def test_real_logs_of_a_stated_release_print_its_source_lines(
    fid: str, stated: str, lines: list[str]
) -> None:
    # The budget fixtures whose log states its release (tests/fixtures/budget_logs.jsonl,
    # version_evidence): with the version line left out, their source lines name that release
    # (0.19.0 and 0.19.1 print the same lines; 0.10.2 and 0.11.0 the same worker line).
    text = "\n".join(x for x in lines if "version" not in x.lower())
    facts = [f for f in parse_log(text).facts if f.engine == "vllm"]
    found = version_from_log(facts)
    tracked = ("available_kv", "kv_tokens", "max_concurrency", "weights")
    if not any(f.kind in tracked and ".py:" in f.text for f in facts):
        pytest.skip(f"{fid}: its lines carry no source line")
    assert found is not None and found[0] == stated, (fid, found)
