"""vLLM's own sizing code as the oracle for speculative drafts (EAGLE, EAGLE3, MTP,
draft_model, ngram) and KV-sharing layers (Gemma-3n), at each release in RELEASES.

`vllm_draft_sizing.py` (0.21-0.27: its wrapper `vllm_draft_sizing_0_21.py`) runs in each
release's oracle virtualenv (`make oracle RELEASE=…`) over every configuration
generated below and reports what vLLM computes with the draft declared through
`--speculative-config`: accept or refuse, the KV-cache groups (draft layers in them), num_blocks,
blocks per request, resident requests, the logged "GPU KV cache size" and "Maximum concurrency",
the longest context, the draft's KV layers, the lookahead slots (`num_speculative_tokens` +
`num_lookahead_tokens`) and the sliding windows' `extra_retained_tokens`. Each configuration is
one test case comparing those with `plan()` given the same `speculative_config`, in both
scheduling modes. Every release runs the same grid (one seed); its answers are stored as that
release's fixture (fixtures/vllm/<release>/<harness>.json).
"""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from planner.core.capacity import MAX_CONTEXT_SEARCH
from planner.core.schema import PlanRequest
from planner.service import plan
from tests.oracle.conftest import SUMMARY_KEY, run_cached_oracle
from tests.oracle.matrix import record
from tests.oracle.test_vllm_oracle import (
    FIGURES,
    VLLM_KV_DTYPE,
    _oracle_config,
    _oracle_figures,
    _plan_request,
    _planner_config,
    _planner_figures,
)

pytestmark = pytest.mark.oracle

HERE = Path(__file__).resolve().parent
# Each release's harness: 0.28+ run vllm_draft_sizing.py as it is; 0.21-0.27 lack what it
# reads from VllmConfig (num_lookahead_tokens), before 0.25 what vllm_sizing_0_21.py gives
# vllm_sizing.py, and before 0.24 the sparse-MLA cache dtype test under 0.24's function name.
DRAFT_0_21 = "vllm_draft_sizing_0_21.py"
RELEASES = {
    "0.33.0": "vllm_draft_sizing.py",
    "0.32.0": "vllm_draft_sizing.py",
    "0.31.0": "vllm_draft_sizing.py",
    "0.30.0": "vllm_draft_sizing.py",
    "0.29.0": "vllm_draft_sizing.py",
    "0.28.0": "vllm_draft_sizing.py",
    "0.27.1": DRAFT_0_21,
    "0.26.0": DRAFT_0_21,
    "0.25.1": DRAFT_0_21,
    "0.24.0": DRAFT_0_21,
    "0.23.0": DRAFT_0_21,
    "0.22.1": DRAFT_0_21,
    "0.21.0": DRAFT_0_21,
}
# Files a harness imports, hashed with it into the fixtures' provenance.
ALSO_READ = {
    "vllm_draft_sizing.py": ("vllm_sizing.py",),
    DRAFT_0_21: ("vllm_draft_sizing.py", "vllm_sizing.py", "vllm_sizing_0_21.py"),
}
NEWEST = next(iter(RELEASES))
SEED = 20261213
GIB = 1 << 30
BASE_CONFIGS = 105  # each in both scheduling modes


@cache
def _drafts() -> dict[str, dict[str, Any]]:
    data = json.loads((HERE / "draft_models.json").read_text())
    return {m["id"]: m["config"] for m in data["models"]}


def _config(model_id: str) -> dict[str, Any]:
    drafts = _drafts()
    return drafts[model_id] if model_id in drafts else _planner_config(model_id)


def _v32() -> dict[str, Any]:
    """DeepSeek-V3.2's config: DeepSeek-V3's shape plus the published indexer fields."""
    cfg = dict(_planner_config("deepseek-ai/DeepSeek-V3"))
    cfg.update(
        model_type="deepseek_v32",
        architectures=["DeepseekV32ForCausalLM"],
        index_head_dim=128,
        index_n_heads=64,
        index_topk=2048,
    )
    return cfg


def _two_mtp_modules() -> dict[str, Any]:
    """DeepSeek-V3 with two MTP modules (multi-module MTP: min(n_predict, k) > 1)."""
    return dict(_planner_config("deepseek-ai/DeepSeek-V3"), num_nextn_predict_layers=2)


# (target, method, draft id): "deepseek-v3-2mtp" is DeepSeek-V3 with two MTP modules,
# "deepseek-v32" DeepSeek-V3.2 (sparse MLA with its indexer cache)
SETUPS: tuple[tuple[str, str | None, str | None], ...] = (
    ("meta-llama/Llama-3.1-8B", "eagle", "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"),
    ("meta-llama/Llama-3.1-8B", "eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"),
    ("meta-llama/Llama-3.1-70B", "eagle", "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"),
    ("openai/gpt-oss-20b", "eagle3", "nvidia/gpt-oss-120b-Eagle3"),
    ("openai/gpt-oss-120b", "eagle3", "nvidia/gpt-oss-120b-Eagle3"),
    ("deepseek-ai/DeepSeek-V3", "mtp", None),
    ("deepseek-v3-2mtp", "mtp", None),
    ("meta-llama/Llama-3.1-70B", "draft_model", "meta-llama/Llama-3.2-1B"),
    ("meta-llama/Llama-3.1-8B", "ngram", None),
    ("google/gemma-3n-E2B-it", None, None),
    ("google/gemma-3n-E4B-it", None, None),
    ("google/gemma-3n-E2B-it", "ngram", None),
    ("deepseek-v32", None, None),
)
KV_DTYPES = ("auto", "auto", "fp8")
BLOCK_SIZES = (None, 16, 32, 64)
TPS = (1, 1, 2, 4, 8)
PPS = (1, 1, 1, 2)
BUDGETS_BYTES = tuple(int(g * GIB) for g in (0.3, 1, 4, 10, 24, 40, 60))
CONTEXTS = (1024, 4096, 8192, 12345, 32768, 131072)
MNBTS = (2048, 8192, 16384)
KS = (1, 2, 3, 4, 5)
# DeepSeek-V3.2's cache dtypes against the model dtype, beyond the random draws: which sparse
# MLA backend takes each (fp8: FlashMLA-sparse's fp8_ds_mla; fp8_e4m3: FlashInfer-MLA-sparse;
# bf16: auto for V3.2), and what float16 models may use.
V32_DTYPES = tuple(
    (kv, dtype, bs)
    for kv in ("fp8", "fp8_e4m3", "bf16", "fp16")
    for dtype in ("auto", "float16")
    for bs in (None, 128)
)


def _target_config(model: str) -> dict[str, Any]:
    variants = {"deepseek-v3-2mtp": _two_mtp_modules, "deepseek-v32": _v32}
    return variants[model]() if model in variants else _config(model)


def _max_tokens(model: str) -> int:
    cfg = _target_config(model)
    return int(cfg.get("text_config", cfg).get("max_position_embeddings", 131072))


def _generate(version: str) -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    base: list[dict[str, Any]] = [
        # The logged Llama-3.1-8B + EAGLE deployment (vllm#19996): 51.63 GiB, 131,072 tokens.
        {
            "model": "meta-llama/Llama-3.1-8B",
            "method": "eagle",
            "draft": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B",
            "k": 3,
            "kv_cache_dtype": "auto",
            "block_size": 16,
            "tensor_parallel_size": 1,
            "pipeline_parallel_size": 1,
            "kv_budget_bytes": round(51.63 * GIB),
            "context_tokens": 131072,
            "max_num_batched_tokens": 8192,
        }
    ]
    for i in range(BASE_CONFIGS - 1):
        model, method, draft = SETUPS[i % len(SETUPS)]
        limit = _max_tokens(model)
        blocks = BLOCK_SIZES
        if model == "deepseek-v32":
            blocks = (None, None, 64, 16)  # sparse MLA takes 64 only: mostly planned, some refused
        base.append(
            {
                "model": model,
                "method": method,
                "draft": draft,
                "k": rng.choice(KS) if method else None,
                "kv_cache_dtype": rng.choice(KV_DTYPES),
                "block_size": rng.choice(blocks),
                "tensor_parallel_size": rng.choice(TPS),
                "pipeline_parallel_size": rng.choice(PPS),
                "kv_budget_bytes": rng.choice(BUDGETS_BYTES),
                "context_tokens": rng.choice([t for t in CONTEXTS if t <= limit]),
                "max_num_batched_tokens": rng.choice(MNBTS),
            }
        )
    for kv, dtype, bs in V32_DTYPES:
        base.append(
            {
                "model": "deepseek-v32",
                "method": None,
                "draft": None,
                "k": None,
                "kv_cache_dtype": kv,
                "dtype": dtype,
                "block_size": bs,
                "tensor_parallel_size": 8,
                "pipeline_parallel_size": 1,
                "kv_budget_bytes": 40 * GIB,
                "context_tokens": 32768,
                "max_num_batched_tokens": 8192,
            }
        )
    out: dict[str, dict[str, Any]] = {}
    for b in base:
        for async_on in (True, False):
            c = dict({"dtype": "auto"}, **b, async_scheduling=async_on, vllm=version)
            c["id"] = _case_id(c)
            out.setdefault(c["id"], c)  # a draw repeating an earlier one adds nothing
    return list(out.values())


def _case_id(c: dict[str, Any]) -> str:
    budget = c["kv_budget_bytes"]
    budget_s = f"{budget / GIB:g}G" if budget >= GIB else f"{budget // (1 << 20)}M"
    return "-".join(
        [
            f"v{c['vllm'].rsplit('.', 1)[0]}",
            c["model"].split("/")[-1],
            f"{c['method'] or 'nodraft'}{c['k'] or ''}",
            f"kv_{c['kv_cache_dtype']}",
            *([f"dt_{c['dtype']}"] if c["dtype"] != "auto" else []),
            f"bs{c['block_size'] or 'def'}",
            f"tp{c['tensor_parallel_size']}",
            f"pp{c['pipeline_parallel_size']}",
            budget_s,
            f"ctx{c['context_tokens']}",
            f"mnbt{c['max_num_batched_tokens']}",
            "async" if c["async_scheduling"] else "sync",
        ]
    )


CASES = [c for v in RELEASES for c in _generate(v)]


def _speculative(c: dict[str, Any]) -> dict[str, Any] | None:
    if c["method"] is None:
        return None
    spec: dict[str, Any] = {"method": c["method"], "num_speculative_tokens": c["k"]}
    if c["draft"] is not None:
        spec["model"] = _config(c["draft"])
    return spec


def _oracle_inputs(version: str) -> list[dict[str, Any]]:
    return [
        {
            "id": c["id"],
            "config": _oracle_config(_target_config(c["model"])),
            "speculative_config": _speculative(c),
            "kv_cache_dtype": VLLM_KV_DTYPE.get(c["kv_cache_dtype"], c["kv_cache_dtype"]),
            "dtype": c["dtype"],
            "block_size": c["block_size"],
            "tensor_parallel_size": c["tensor_parallel_size"],
            "pipeline_parallel_size": c["pipeline_parallel_size"],
            "kv_budget_bytes": c["kv_budget_bytes"],
            "context_tokens": c["context_tokens"],
            "max_num_batched_tokens": c["max_num_batched_tokens"],
            "async_scheduling": c["async_scheduling"],
            "longest_search_cap": MAX_CONTEXT_SEARCH,
        }
        for c in CASES
        if c["vllm"] == version
    ]


@pytest.fixture(scope="session")
def draft_oracle(request: pytest.FixtureRequest) -> Any:
    """release -> {case id -> vLLM's figures}: one harness run (or fixture) per release."""
    done: dict[str, dict[str, dict[str, Any]]] = {}

    def get(version: str) -> dict[str, dict[str, Any]]:
        if version not in done:
            harness = RELEASES[version]
            done[version] = run_cached_oracle(
                version,
                harness,
                _oracle_inputs(version),
                prefix="draft-",
                also_read=ALSO_READ[harness],
                timeout_s=3600,
            )
        return done[version]

    return get


def _body(c: dict[str, Any]) -> dict[str, Any]:
    case = dict(c, model=c["model"])
    body, missing = _plan_request({**case, "model": "meta-llama/Llama-3.1-8B"})
    assert not missing
    body["model"] = _target_config(c["model"])
    spec = _speculative(c)
    if spec is not None:
        body["speculative_config"] = spec
    return body


def _draft_figures(body: dict[str, Any]) -> dict[str, Any]:
    try:
        p = plan(PlanRequest.model_validate(body))
    except Exception:  # the refusal itself is compared by _planner_figures
        return {}
    d = p.model.draft
    retained = d.extra_retained_tokens if d else 0
    return {
        "draft_layers": d.kv_layers if d else 0,
        "lookahead_tokens": d.lookahead_tokens if d else 0,
        "extra_retained_tokens": retained
        if any(g.kind == "sliding" for g in p.model.groups)
        else None,
    }


def compare(c: dict[str, Any], r: dict[str, Any]) -> dict[str, str]:
    body = _body(c)
    mine = _planner_figures(body)
    theirs = _oracle_figures(r)
    verdict: dict[str, str] = {}
    if not theirs["accepted"]:
        ok = not mine["accepted"] and bool(mine["fields"])
        verdict["accepted"] = (
            "ok" if ok else f"vLLM refuses ({theirs['error'][:300]}); planner: {mine}"
        )
        return verdict
    if not mine["accepted"]:
        return {"accepted": f"vLLM runs it; the planner refuses: {mine['error'][:300]}"}
    verdict["accepted"] = "ok"
    for fig in FIGURES[1:]:
        if fig in theirs:
            a, b = theirs[fig], mine.get(fig)
            verdict[fig] = "ok" if a == b else f"vLLM {a!r} != planner {b!r}"
    if r["stage"] is None:
        extra = _draft_figures(body)
        vllm_side = {
            "draft_layers": r["draft_layers"],
            "lookahead_tokens": r["num_speculative_tokens"] + r["num_lookahead_tokens"],
            "extra_retained_tokens": r["extra_retained_tokens"],
        }
        for fig, a in vllm_side.items():
            b = extra.get(fig)
            verdict[fig] = "ok" if a == b else f"vLLM {a!r} != planner {b!r}"
        if "decoding_requests" in r:
            n, ctx = r["decoding_requests"], r["decoding_context_tokens"]
            verdict["decoding_requests"] = _decoding_verdict(body, n, ctx)
    return verdict


def _decoding_verdict(body: dict[str, Any], n: int, ctx: int) -> str:
    """vLLM's allocate_slots admitted n decoding requests of ctx tokens (drafts and lookahead
    reserved): the planner's workload check must take n of them and refuse n + 1."""

    def fits(count: int) -> bool | None:
        mix = {"context_tokens": ctx, "count": count}
        cap = plan(PlanRequest.model_validate({**body, "requests": [mix]})).capacity
        return cap.workload_fits if cap is not None else None

    ok = (n == 0 or fits(n)) and not fits(n + 1)
    return "ok" if ok else f"vLLM admits {n} decoding requests of {ctx}; planner fits differ"


AGREEMENT: dict[str, dict[str, Any]] = {}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_planner_matches_vllm_with_drafts(case: dict[str, Any], draft_oracle: Any) -> None:
    version = case["vllm"]
    r = draft_oracle(version)[case["id"]]
    if r["stage"] == "harness":
        pytest.fail(f"oracle harness error (not a vLLM answer):\n{r['error']}")
    verdict = compare(case, r)
    AGREEMENT[case["id"]] = {"verdict": verdict, "case": case, "vllm": r}
    bad = [f"{k}: {v}" for k, v in verdict.items() if v != "ok"]
    record("vllm", version, "drafts", not bad)
    assert not bad, f"{case['id']} vs vLLM {version}:\n  " + "\n  ".join(bad)


@pytest.mark.parametrize("version", list(RELEASES))
def test_draft_oracle_covers_every_method(version: str, draft_oracle: Any) -> None:
    """The generated set exercises what it claims at each release (not a test of the
    planner)."""
    answers = draft_oracle(version)
    cases = [c for c in CASES if c["vllm"] == version]
    accepted = [r for r in answers.values() if r["accepted"]]
    by_method = {c["method"] for c in cases if answers[c["id"]]["accepted"]}
    assert by_method >= {"eagle", "eagle3", "mtp", "draft_model", "ngram", None}, by_method
    assert any(r["draft_layers"] == 2 for r in accepted), "no multi-module MTP case"
    gemma = [c for c in cases if "gemma-3n" in c["model"] and answers[c["id"]]["accepted"]]
    assert gemma, "no Gemma-3n case accepted"
    assert all(answers[c["id"]]["kv_layers"] < 30 for c in gemma)
    v32 = [answers[c["id"]] for c in cases if c["model"] == "deepseek-v32"]
    assert any(r["accepted"] and r["groups"][0]["layers"] == 122 for r in v32), "no V3.2 case"
    assert {c["async_scheduling"] for c in cases} == {True, False}
    assert len(cases) >= 150


@pytest.mark.parametrize("version", list(RELEASES))
def test_logged_eagle_deployment(version: str, draft_oracle: Any) -> None:
    """vllm#19996: vLLM sizes 33 KV layers, 25,633 blocks, 410,128 tokens, 3.13x, and so does
    the planner with the draft declared (the first two cases of each release's grid)."""
    for case in [c for c in CASES if c["vllm"] == version][:2]:
        r = draft_oracle(version)[case["id"]]
        assert (r["kv_layers"], r["num_blocks"], r["logged_tokens"], r["logged_concurrency"]) == (
            33,
            25633,
            410128,
            3.13,
        )
        p = plan(PlanRequest.model_validate(_body(case)))
        assert p.capacity is not None
        cap = p.capacity
        assert (cap.num_blocks, cap.engine_reported_tokens, cap.engine_reported_concurrency) == (
            25633,
            410128,
            3.13,
        )


@pytest.fixture(scope="session", autouse=True)
def _write_draft_agreement(request: pytest.FixtureRequest):
    yield
    if not AGREEMENT:
        return
    lines = []
    for version, mode in [(v, m) for v in RELEASES for m in (True, False)]:
        rows = [
            a
            for a in AGREEMENT.values()
            if a["case"]["async_scheduling"] is mode and a["case"]["vllm"] == version
        ]
        if not rows:
            continue
        whole = sum(all(v == "ok" for v in a["verdict"].values()) for a in rows)
        lines.append(
            f"vLLM {version} drafts/KV sharing, async_scheduling={mode}: "
            f"{whole}/{len(rows)} configurations agree on every figure"
        )
        counts: dict[str, list[int]] = {}
        for a in rows:
            for fig, v in a["verdict"].items():
                counts.setdefault(fig, [0, 0])
                counts[fig][0] += v == "ok"
                counts[fig][1] += 1
        lines += [f"  {fig}: {n}/{m}" for fig, (n, m) in counts.items()]
    path = Path(request.config.rootpath) / ".pytest_cache" / "vllm-oracle" / "agreement-draft"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".json").write_text(json.dumps(AGREEMENT, indent=1, default=str))
    summary = "\n".join(lines)
    path.with_suffix(".txt").write_text(summary + "\n")
    previous = request.config.stash.get(SUMMARY_KEY, "")
    request.config.stash[SUMMARY_KEY] = (previous + "\n" if previous else "") + summary
