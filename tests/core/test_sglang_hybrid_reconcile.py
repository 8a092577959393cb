"""Reconciling SGLang's start-up lines for its second pools: a hybrid SWA model's "Full" and
"SWA" KV Cache lines, a Mamba-ish model's "Mamba Cache is allocated" line.

Each log is written from one case of SGLang 0.5.23's own sizing (the oracle fixture
tests/oracle/fixtures/sglang/0.5.23/sglang_hybrid.json): the free memory before and after the
weights as SGLang prints it (GB with two decimals), and the pools' sizes SGLang computed. The
planner's reconcile must recompute each logged figure from the printed memory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.core.engines.sglang import Sglang
from planner.core.engines.vllm import Vllm
from planner.core.logs.parse import parse_log
from planner.core.reconcile_request import logged_flags
from planner.core.reconcile_schema import ReconcileRequest, ReconcileResult
from planner.service import reconcile
from tests.oracle.sglang_hybrid_grid import model_config

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "oracle" / "fixtures" / "sglang" / "0.5.23" / "sglang_hybrid.json"
GIB = 1 << 30
# SGLang's defaults of the pool flags (a case setting one to its default keeps it); float32 is
# the state dtype of every grid model (Qwen3.5/3.6's configs say so, the others default to it).
DEFAULTS = {"swa_full_tokens_ratio": 0.8, "mamba_full_memory_ratio": 0.9,
            "max_mamba_cache_size": None, "mamba_ssm_dtype": "float32"}  # fmt: skip


def _inputs() -> dict[str, dict[str, Any]]:
    """The grid's cases (the fixture stores SGLang's answers, the grid rebuilds its inputs)."""
    from tests.oracle.test_sglang_oracle import GRIDS

    return {c["id"]: c for c in GRIDS["sglang_hybrid"]}


def _cases(kind: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Accepted cases of one kind with SGLang's default pool flags (the reconcile request has
    none of them: unset, or set to the default)."""
    results = json.loads(FIXTURE.read_text())["results"]
    inputs = _inputs()
    out = []
    for r in results:
        c = inputs[r["id"]]
        if not r["accepted"] or any(c.get(k, v) != v for k, v in DEFAULTS.items()):
            continue
        if (kind == "swa") != bool(r["is_hybrid_swa"]) or (
            kind == "state" and r.get("state_pool_slots") is None
        ):
            continue
        out.append((c, r))
    return out


def _log(c: dict[str, Any], r: dict[str, Any]) -> str:
    pre = c["free_before_load_bytes"] / GIB
    post = (c["free_before_load_bytes"] - c["weights_bytes_per_rank"]) / GIB
    lines = [
        f"[2026-12-02 10:00:00 TP0] Load weight begin. avail mem={pre:.2f} GB",
        f"[2026-12-02 10:00:09 TP0] Load weight end. type=Model, dtype=torch.bfloat16, "
        f"avail mem={post:.2f} GB, mem usage={pre - post:.2f} GB.",
    ]
    if r.get("state_pool_slots") is not None:
        lines.append(
            f"[2026-12-02 10:00:10 TP0] Mamba Cache is allocated. max_mamba_cache_size: "
            f"{r['state_pool_slots']}, "
        )
    if r["is_hybrid_swa"]:
        full, swa = r["full_max_total_num_tokens"], r["swa_max_total_num_tokens"]
        lines += [
            f"[2026-12-02 10:00:10 TP0] Use sliding window memory pool. "
            f"full_layer_tokens={full}, swa_layer_tokens={swa}",
            f"[2026-12-02 10:00:10 TP0] Full KV Cache is allocated. dtype: torch.bfloat16, "
            f"#tokens: {full}",
            f"[2026-12-02 10:00:10 TP0] SWA KV Cache is allocated. dtype: torch.bfloat16, "
            f"#tokens: {swa}",
        ]
    else:
        lines.append(
            f"[2026-12-02 10:00:10 TP0] KV Cache is allocated. dtype: torch.bfloat16, "
            f"#tokens: {r['max_total_num_tokens']}"
        )
    return "\n".join(lines) + "\n"


def _run(c: dict[str, Any], r: dict[str, Any]) -> ReconcileResult:
    return _run_log(c, r, _log(c, r))


def _run_log(c: dict[str, Any], r: dict[str, Any], log: str) -> ReconcileResult:
    settings: dict[str, Any] = {
        "tensor_parallel_size": c["tensor_parallel_size"],
        "mem_fraction_static": r["mem_fraction_static"],
        "block_size": r["page_size"],
        "engine_version": "0.5.23",
    }
    if c["kv_cache_dtype"] != "auto":
        settings["kv_cache_dtype"] = c["kv_cache_dtype"]
    if c.get("context_length"):
        settings["max_model_len"] = c["context_length"]
    body = {"log": log, "model": model_config(c["model"]), "engine": "sglang",
            "settings": settings}  # fmt: skip
    return reconcile(ReconcileRequest.model_validate(body))


@pytest.mark.parametrize("kind", ["swa", "state"])
def test_second_pool_lines_recomputed(kind: str) -> None:
    cases = _cases(kind)
    assert len(cases) >= 3, f"too few {kind} cases in the fixture"
    second = "swa_max_total_num_tokens" if kind == "swa" else "max_mamba_cache_size"
    for c, r in cases:
        checks = {x.figure: x for x in _run(c, r).checks}
        for figure in ("max_total_num_tokens", second):
            got = checks[figure]
            assert got.status in ("equal", "consistent"), (c["id"], figure, got)


def _flagged_cases(kind: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Accepted cases of one kind that set a pool flag away from SGLang's default."""
    results = json.loads(FIXTURE.read_text())["results"]
    inputs = _inputs()
    out = []
    for r in results:
        c = inputs[r["id"]]
        if not r["accepted"] or all(c.get(k, v) == v for k, v in DEFAULTS.items()):
            continue
        swa = "swa_full_tokens_ratio" in c and c["swa_full_tokens_ratio"] != 0.8
        if (kind == "swa") != swa or (kind == "state" and r.get("state_pool_slots") is None):
            continue
        out.append((c, r))
    return out


def _server_args(c: dict[str, Any]) -> str:
    """SGLang's `server_args=ServerArgs(…)` start-up line (server_args.py's dataclass repr), with
    the case's pool flags; the ones it leaves unset as SGLang prints its defaults."""
    flags = {**DEFAULTS, **{k: c[k] for k in DEFAULTS if c.get(k) is not None}}
    shown = ", ".join(f"{k}={v!r}" for k, v in flags.items())
    return (
        f"[2026-12-02 09:59:58] server_args=ServerArgs(model_path='model', "
        f"tp_size={c['tensor_parallel_size']}, {shown}, enable_dp_attention=False)\n"
    )


@pytest.mark.parametrize("kind", ["swa", "state"])
def test_pool_flags_come_from_the_server_args_line(kind: str) -> None:
    # The cases with a non-default --swa-full-tokens-ratio / --mamba-full-memory-ratio /
    # --max-mamba-cache-size / --mamba-ssm-dtype: SGLang's own pools (the oracle fixture)
    # are recomputed once the flags are read from the log's ServerArgs line, with nothing in
    # the reconcile request, and the plan request carries them.

    cases = _flagged_cases(kind)
    assert len(cases) >= 10, f"too few flagged {kind} cases in the fixture"
    second = "swa_max_total_num_tokens" if kind == "swa" else "max_mamba_cache_size"
    missed_without = 0
    for c, r in cases:
        log = _log(c, r)
        flagged = _server_args(c) + log
        expected = {k: c[k] for k in DEFAULTS if c.get(k) is not None}
        args = parse_log(flagged).args
        assert logged_flags(Sglang(Sglang.releases.default), args) == {
            k: v for k, v in {**DEFAULTS, **expected}.items() if v is not None
        }
        result = _run_log(c, r, flagged)
        checks = {x.figure: x for x in result.checks}
        for figure in ("max_total_num_tokens", second):
            if figure in checks:
                assert checks[figure].status in ("equal", "consistent"), (c["id"], figure)
        used = {s.name: (s.value, s.source) for s in result.settings}
        for k, v in expected.items():
            assert used[k] == (str(v), "log"), (c["id"], k)
        assert result.plan_request is not None
        for k, v in expected.items():
            assert result.plan_request[k] == v, (c["id"], k)
        statuses = [x.status for x in _run_log(c, r, log).checks if x.figure == second]
        missed_without += "different" in statuses
    # Without the line the defaults are used, and some of these pools come out otherwise.
    assert missed_without > 0


def test_an_unset_or_out_of_range_logged_flag_is_left_out() -> None:

    line = (
        "server_args=ServerArgs(model_path='m', tp_size=1, swa_full_tokens_ratio=1.5, "
        "mamba_full_memory_ratio=0.9, max_mamba_cache_size=None, mamba_ssm_dtype='float8')\n"
        "KV Cache is allocated. #tokens: 1000, K size: 0.01 GB, V size: 0.01 GB\n"
    )
    args = parse_log(line).args
    assert logged_flags(Sglang(Sglang.releases.default), args) == {"mamba_full_memory_ratio": 0.9}
    assert logged_flags(Vllm(Vllm.releases.default), args) == {}  # not vLLM's flags
