"""vLLM's own sizing code as the oracle for the planner's vLLM figures.

For every release in `versions.txt`, the release's harness (`vllm_sizing.py` for 0.33,
`vllm_sizing_0_11.py` for 0.11, `vllm_sizing_0_9.py` for 0.9 and 0.10; HARNESS below), run
inside that release's own virtualenv over every configuration generated below, reports what
vLLM computes: accept or refuse (with vLLM's reason), KV heads per rank, page bytes,
num_blocks, the KV-cache groups with their padding, blocks per request, resident requests, the
logged "GPU KV cache size" and "Maximum concurrency", the longest context one request can have
and the model's maximum length. Each configuration is one test case comparing those figures
with `plan()`.

The configurations are generated from a fixed seed over the models and settings the planner
supports, each in both scheduling modes (async scheduling on, vLLM 0.33's default, and off).
vLLM's answers are stored per release as fixtures (tests/oracle/matrix.py): `make test` reads
them; `make oracle RELEASE=…` reruns that release's code live and fails on any difference.
"""

from __future__ import annotations

import json
import random
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from planner.catalog import get_model
from planner.core.capacity import MAX_CONTEXT_SEARCH
from planner.core.errors import FieldError, PlanError
from planner.core.schema import PlanRequest
from planner.service import plan
from tests.oracle.conftest import AGREEMENT_KEY, SUMMARY_KEY, run_cached_oracle
from tests.oracle.matrix import acceptance_verdict, record, releases

pytestmark = pytest.mark.oracle

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# The releases the matrix checks, listed once (tests/oracle/versions.txt).
ORACLE_VERSIONS = releases("vllm")
# Each release family's sizing code has its own harness (their internal APIs differ): one for
# 0.11–0.20 (sizing through kv_cache_utils, no kv_cache_planning yet) and one for 0.21–0.33,
# each with small switches on what each release's modules provide; 0.21–0.24 run the latter
# with the backend choice inside the engine's config context (vllm_sizing_0_21.py says why),
# 0.9–0.10 the former with the switches vllm_sizing_0_9.py lists (no MLA spec class, per-worker
# grouping, no async scheduling in 0.9).
HARNESS = {
    "0.9": "vllm_sizing_0_9.py",
    "0.10": "vllm_sizing_0_9.py",
    **{f"0.{m}": "vllm_sizing_0_11.py" for m in range(11, 21)},
    **{f"0.{n}": "vllm_sizing_0_21.py" for n in range(21, 25)},
    **{f"0.{n}": "vllm_sizing.py" for n in range(25, 34)},
}
# Files a harness imports, hashed with it into the fixtures' provenance.
ALSO_READ = {
    "vllm_sizing_0_9.py": ("vllm_sizing_0_11.py",),
    "vllm_sizing_0_21.py": ("vllm_sizing.py",),
}
SEED = 20261201
BASE_CONFIGS = 200  # each in both scheduling modes
GIB = 1 << 30

# Catalog ids, plus the two models the catalog lacks (extra_models.json, published configs).
MODELS = (
    "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B",
    "Qwen/Qwen2.5-7B",
    "Qwen/Qwen2.5-72B",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-32B",
    "microsoft/Phi-3-mini-4k-instruct",
    "mistralai/Mistral-7B-v0.1",
    "google/gemma-2-9b",
    "google/gemma-2-27b",
    "google/gemma-3-27b-it",
    "openai/gpt-oss-20b",
    "openai/gpt-oss-120b",
    "meta-llama/Llama-4-Scout-17B-16E",
    "deepseek-ai/DeepSeek-V2-Lite",
    "deepseek-ai/DeepSeek-V3",
)
KV_DTYPES = ("auto", "bf16", "fp16", "fp8", "fp8_e5m2")
VLLM_KV_DTYPE = {"bf16": "bfloat16", "fp16": "float16"}
MODEL_DTYPES = ("auto", "bfloat16", "float16", "float32")
BLOCK_SIZES = (None, 16, 32, 64, 128)
TPS = (1, 1, 2, 4, 8, 16)
PPS = (1, 1, 1, 2, 3, 4)
BUDGETS_BYTES = tuple(int(g * GIB) for g in (0.05, 0.3, 1, 2, 4, 10, 16, 24, 40, 60, 80, 120))
CONTEXTS = (1024, 2048, 4096, 8192, 12345, 32768, 65536, 131072, 262144, 1048576)
MNBTS = (512, 2048, 4096, 8192, 16384)
# MLA against every KV-cache dtype and block size, beyond the random draws (which backend takes
# each: FlashAttention-MLA 16-bit only, FlashMLA / Triton MLA fp8 too, none fp8_e5m2).
MLA_GRID = tuple(
    (model, kv, bs)
    for model in ("deepseek-ai/DeepSeek-V2-Lite", "deepseek-ai/DeepSeek-V3")
    for kv in ("auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2")
    for bs in (None, 16, 64, 128)
)

FIGURES = (
    "accepted",
    "kv_heads",
    "page_bytes",
    "num_blocks",
    "groups",
    "blocks_per_request",
    "resident_requests",
    "logged_concurrency",
    "logged_tokens",
    "longest_context_tokens",
    "model_max_len",
)


@cache
def _extra_models() -> dict[str, dict[str, Any]]:
    data = json.loads((HERE / "extra_models.json").read_text())
    return {m["id"]: m["config"] for m in data["models"]}


def _planner_config(model_id: str) -> dict[str, Any]:
    extra = _extra_models()
    return extra[model_id] if model_id in extra else dict(get_model(model_id).config)


def _oracle_config(config: dict[str, Any]) -> dict[str, Any]:
    """Multimodal wrappers (Gemma-3, Llama-4) as their text-only model: the vision towers have no
    KV layers, and their processors need torchvision, which the oracle does not install."""
    arch = (config.get("architectures") or [""])[0]
    text = config.get("text_config")
    if text is None or not arch.endswith("ForConditionalGeneration"):
        return config
    out = dict(text)
    out["architectures"] = [arch.replace("ForConditionalGeneration", "ForCausalLM")]
    out.setdefault("torch_dtype", config.get("torch_dtype", "bfloat16"))
    return out


def _declared_max_tokens(model_id: str) -> int:
    """The config's own max_position_embeddings (text_config for wrappers; Gemma-3's text config
    leaves it to transformers' default, 131,072). Input data for the generator only."""
    cfg = _planner_config(model_id)
    cfg = cfg.get("text_config", cfg)
    return int(cfg.get("max_position_embeddings", 131072))


def _context(rng: random.Random, model_id: str) -> int:
    """Mostly contexts the model allows (so the capacity figures are exercised); one in ten
    beyond its maximum, which vLLM refuses."""
    limit = _declared_max_tokens(model_id)
    fits = [t for t in CONTEXTS if t <= limit]
    over = [t for t in CONTEXTS if t > limit]
    if over and rng.random() < 0.1:
        return rng.choice(over)
    return rng.choice(fits)


def _generate() -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    base: list[dict[str, Any]] = []
    # Every model at its defaults first, then random settings.
    for i in range(BASE_CONFIGS):
        model = MODELS[i % len(MODELS)]
        plain = i < len(MODELS)
        base.append(
            {
                "model": model,
                "kv_cache_dtype": "auto" if plain else rng.choice(KV_DTYPES),
                "dtype": "auto" if plain or rng.random() < 0.6 else rng.choice(MODEL_DTYPES),
                "block_size": None if plain else rng.choice(BLOCK_SIZES),
                "tensor_parallel_size": 1 if plain else rng.choice(TPS),
                "pipeline_parallel_size": 1 if plain else rng.choice(PPS),
                "kv_budget_bytes": 40 * GIB if plain else rng.choice(BUDGETS_BYTES),
                "context_tokens": 32768 if plain else _context(rng, model),
                "max_num_batched_tokens": 8192 if plain else rng.choice(MNBTS),
            }
        )
    for model, kv, bs in MLA_GRID:
        base.append(
            {
                "model": model,
                "kv_cache_dtype": kv,
                "dtype": "auto",
                "block_size": bs,
                "tensor_parallel_size": 8 if model.endswith("V3") else 1,
                "pipeline_parallel_size": 1,
                "kv_budget_bytes": 40 * GIB,
                "context_tokens": 8192,
                "max_num_batched_tokens": 8192,
            }
        )
    out: dict[str, dict[str, Any]] = {}
    for b in base:
        for async_on in (True, False):
            c = dict(b, async_scheduling=async_on)
            c["id"] = _case_id(c)
            out.setdefault(c["id"], c)  # a grid case the random draws already made adds nothing
    return list(out.values())


def _case_id(c: dict[str, Any]) -> str:
    budget = c["kv_budget_bytes"]
    budget_s = f"{budget / GIB:g}G" if budget >= GIB else f"{budget // (1 << 20)}M"
    return "-".join(
        [
            c["model"].split("/")[-1],
            f"kv_{c['kv_cache_dtype']}",
            f"dt_{c['dtype']}",
            f"bs{c['block_size'] or 'def'}",
            f"tp{c['tensor_parallel_size']}",
            f"pp{c['pipeline_parallel_size']}",
            budget_s,
            f"ctx{c['context_tokens']}",
            f"mnbt{c['max_num_batched_tokens']}",
            "async" if c["async_scheduling"] else "sync",
        ]
    )


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


BASE_CASES = _generate()
# Models a release's oracle cannot load, left out of its grid. 0.9.2 imports only with
# transformers 4.53 or older (4.54's own "aimv2" config clashes with the one vLLM registers),
# which has no DeepSeek-V2 config: vLLM 0.9.2 ran it as the checkpoint's remote code
# (--trust-remote-code), which the oracle does not fetch. DeepSeek-V3 is MLA there too.
UNLOADABLE = {"0.9": frozenset({"deepseek-ai/DeepSeek-V2-Lite"})}
# One case per (release, configuration); ids start with the release.
CASES = [
    dict(c, vllm=v, id=f"v{_minor(v)}-{c['id']}")
    for v in ORACLE_VERSIONS
    for c in BASE_CASES
    if c["model"] not in UNLOADABLE.get(_minor(v), ())
]


def _oracle_inputs(version: str) -> list[dict[str, Any]]:
    return [
        {
            "id": c["id"],
            "config": _oracle_config(_planner_config(c["model"])),
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


def _run_oracle(version: str, cache_dir: Path) -> dict[str, dict[str, Any]]:
    """vLLM's figures for every case of one release: one subprocess, cached by content."""
    harness = HARNESS.get(_minor(version))
    assert harness, f"no oracle harness for vLLM {version} (HARNESS lists {sorted(HARNESS)})"
    return run_cached_oracle(
        version, harness, _oracle_inputs(version), cache_dir, also_read=ALSO_READ.get(harness, ())
    )


@pytest.fixture(scope="session")
def oracle(request: pytest.FixtureRequest) -> Any:
    """version -> {case id -> vLLM's figures}; each release's oracle runs on first use."""
    cache_dir = Path(request.config.rootpath) / ".pytest_cache" / "vllm-oracle"
    cache_dir.mkdir(parents=True, exist_ok=True)
    done: dict[str, dict[str, dict[str, Any]]] = {}

    def get(version: str) -> dict[str, dict[str, Any]]:
        if version not in done:
            done[version] = _run_oracle(version, cache_dir)
        return done[version]

    return get


def _plan_request(c: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The planner request for a case, and the request fields the planner does not have yet."""
    body: dict[str, Any] = {
        "model": _planner_config(c["model"]),
        "engine": "vllm",
        # The release itself: some rules start at a patch release (0.20.1).
        "engine_version": c["vllm"],
        "async_scheduling": c["async_scheduling"],
        "kv_cache_dtype": c["kv_cache_dtype"],
        "tensor_parallel_size": c["tensor_parallel_size"],
        "pipeline_parallel_size": c["pipeline_parallel_size"],
        "kv_budget_bytes": c["kv_budget_bytes"],
        "context_tokens": c["context_tokens"],
        "max_num_batched_tokens": c["max_num_batched_tokens"],
    }
    if c["dtype"] != "auto":
        body["dtype"] = c["dtype"]
    if c["block_size"] is not None:
        body["block_size"] = c["block_size"]
    missing = [k for k in body if k not in PlanRequest.model_fields]
    # Without the field the planner cannot be told; plan without it and fail the case for it.
    return {k: v for k, v in body.items() if k not in missing}, missing


def _planner_figures(body: dict[str, Any]) -> dict[str, Any]:
    try:
        p = plan(PlanRequest.model_validate(body))
    except FieldError as e:
        return {"accepted": False, "fields": [pr.field for pr in e.problems], "error": e.detail}
    except PlanError as e:  # refused without naming a field: the case fails on that
        return {"accepted": False, "fields": [], "error": f"{type(e).__name__}: {e.detail}"}
    cap = p.capacity
    assert cap is not None
    return {
        "accepted": True,
        "kv_heads": p.per_rank.kv_heads,
        "page_bytes": p.per_rank.page_bytes,
        "num_blocks": cap.num_blocks,
        "groups": sorted(
            (g.kind, g.layers, g.padding_layers, g.block_size, g.blocks_per_request)
            for g in cap.kv_groups
        ),
        "blocks_per_request": cap.blocks_per_request,
        "resident_requests": cap.max_requests,
        "logged_concurrency": cap.engine_reported_concurrency,
        "logged_tokens": cap.engine_reported_tokens,
        # vLLM's figure is its own estimate (estimate_max_model_len), which before 0.29 counts
        # the null block as free; the planner gives that estimate beside its admission limit.
        "longest_context_tokens": (
            cap.engine_max_model_len_estimate
            if cap.engine_max_model_len_estimate is not None
            else cap.longest_context_tokens
        ),
        "model_max_len": p.model.max_model_len,
    }


def _memory_check(error: str) -> bool:
    """Whether a refusal while sizing the cache is vLLM's memory check (not, say, 0.9–0.10's
    assertion that every pipeline stage grouped its layers alike)."""
    return error.startswith(
        ("ValueError: To serve at least one request", "ValueError: No available memory")
    )


def _oracle_figures(r: dict[str, Any]) -> dict[str, Any]:
    if r["stage"] == "harness":
        pytest.fail(f"oracle harness error (not a vLLM answer):\n{r['error']}")
    out: dict[str, Any] = {"accepted": r["accepted"], "error": r.get("error")}
    if r["stage"] == "kv_cache" and _memory_check(r.get("error") or ""):
        # vLLM refuses to start when one request at max_model_len does not fit; the planner
        # answers that as "0 requests fit" with the longest context that would.
        out.update(
            accepted=True,
            resident_requests=0,
            longest_context_tokens=r.get("longest_context_tokens"),
            model_max_len=r.get("model_max_len"),
            kv_heads=r.get("kv_heads_per_rank"),
            page_bytes=r.get("page_bytes_per_layer"),
        )
        return out
    if not r["accepted"]:
        return out
    allocated = r.get("resident_requests_allocated")
    if allocated is not None and allocated != r["resident_requests"]:
        # vLLM's KVCacheManager admitted a different number of whole requests than the formula
        # the harness reports: the harness is wrong, not the planner.
        pytest.fail(
            f"oracle self-check: KVCacheManager admitted {allocated} whole requests, "
            f"(num_blocks - 1) // blocks_per_request = {r['resident_requests']}"
        )
    out.update(
        kv_heads=r["kv_heads_per_rank"],
        page_bytes=r["page_bytes_per_layer"],
        num_blocks=r["num_blocks"],
        groups=sorted(
            (g["kind"], g["layers"], g["padding_layers"], g["block_size"], g["blocks_per_request"])
            for g in r["groups"]
        ),
        blocks_per_request=r["blocks_per_request"],
        resident_requests=r["resident_requests"],
        logged_concurrency=r["logged_concurrency"],
        logged_tokens=r["logged_tokens"],
        longest_context_tokens=r["longest_context_tokens"],
        model_max_len=r["model_max_len"],
    )
    return out


# Which request field a vLLM refusal is about (by the words of vLLM's own message).
_REFUSAL_FIELDS = (
    (
        ("kv_cache_dtype", "kv cache dtype", "kv-cache-dtype", "No valid attention backend"),
        {"kv_cache_dtype", "dtype"},
    ),
    (("max_model_len", "max seq len", "max_position_embeddings"), {"context_tokens"}),
    (
        ("tensor_parallel", "num_kv_heads", "num_key_value_heads", "attention heads", "tp "),
        {"tensor_parallel_size"},
    ),
    (("pipeline", "pp "), {"pipeline_parallel_size"}),
    (("block_size", "block size"), {"block_size"}),
    (("max_num_batched_tokens",), {"max_num_batched_tokens", "context_tokens"}),
    (("dtype", "float16", "bfloat16"), {"dtype", "kv_cache_dtype"}),
)


def _expected_fields(error: str) -> set[str]:
    low = error.lower()
    for words, fields in _REFUSAL_FIELDS:
        if any(w.lower() in low for w in words):
            return fields
    return set()


def compare(
    c: dict[str, Any], r: dict[str, Any], notes: dict[str, str]
) -> tuple[dict[str, str], list[str]]:
    """Per figure: "ok" or a one-line diff; and the request fields the planner lacks."""
    body, missing = _plan_request(c)
    mine = _planner_figures(body)
    theirs = _oracle_figures(r)
    verdict = {"accepted": acceptance_verdict("vLLM", theirs, mine)}
    if not theirs["accepted"]:
        if not mine["accepted"] and mine["fields"]:
            # Which field each side blames is reported, not asserted: vLLM stops at its first
            # check, and a configuration can be wrong in two ways at once.
            notes["planner_refusal_fields"] = ",".join(mine["fields"])
            want = _expected_fields(theirs["error"] or "")
            if want and not (set(mine["fields"]) & want):
                notes["refusal_field"] = (
                    f"planner names {mine['fields']}, vLLM's reason is about {sorted(want)}"
                )
        return verdict, missing
    if not mine["accepted"]:
        return verdict, missing
    for fig in FIGURES[1:]:
        if fig not in theirs:
            continue
        a, b = theirs[fig], mine.get(fig)
        verdict[fig] = "ok" if a == b else f"vLLM {a!r} != planner {b!r}"
    return verdict, missing


@pytest.fixture(scope="session")
def agreement(request: pytest.FixtureRequest) -> dict[str, Any]:
    store = request.config.stash.setdefault(AGREEMENT_KEY, {})
    return store


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_planner_matches_vllm(case: dict[str, Any], oracle: Any, agreement: dict[str, Any]) -> None:
    r = oracle(case["vllm"])[case["id"]]
    notes: dict[str, str] = {}
    verdict, missing = compare(case, r, notes)
    agreement[case["id"]] = {
        "verdict": verdict,
        "missing": missing,
        "notes": notes,
        "case": case,
        "vllm": r,
    }
    bad = {k: v for k, v in verdict.items() if v != "ok"}
    problems = []
    if missing:
        problems.append(f"the planner has no request field(s) {missing} (planned without them)")
    problems += [f"{k}: {v}" for k, v in bad.items()]
    record("vllm", case["vllm"], "plain", not problems)
    assert not problems, f"{case['id']} vs vLLM {case['vllm']}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("version", ORACLE_VERSIONS)
def test_oracle_covers_every_kind_and_setting(version: str, oracle: Any) -> None:
    """The generated set really exercises what it claims (not a test of the planner)."""
    results = oracle(version)
    assert len(results) == sum(c["vllm"] == version for c in CASES) >= 300
    accepted = [r for r in results.values() if r["accepted"]]
    kinds = {g["kind"] for r in accepted for g in r["groups"]}
    # Before 0.14 vLLM sizes chunked-local layers as full attention (the hybrid manager is off
    # for them unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1, its default from 0.14).
    minor = int(version.split(".")[1])
    want = {"full", "sliding", "mla"} | ({"chunked"} if minor >= 14 else set())
    assert kinds >= want, kinds
    assert any(
        len(r["groups"]) > 1 and any(g["padding_layers"] for g in r["groups"]) for r in accepted
    ), "no hybrid configuration with padding layers"
    refused = [r for r in results.values() if not r["accepted"]]
    assert {r["stage"] for r in refused} >= {"config", "kv_cache"}, "too few refusal kinds"
    for key in ("tensor_parallel_size", "pipeline_parallel_size", "kv_cache_dtype"):
        assert len({c[key] for c in CASES}) > 2, key
    assert {c["async_scheduling"] for c in CASES} == {True, False}


def report_agreement(agreement: dict[str, Any]) -> str:
    """Per release, scheduling mode and figure: N agree out of M compared (for the summary)."""
    lines = []
    for version, mode in [(v, m) for v in ORACLE_VERSIONS for m in (True, False)]:
        rows = [
            a
            for a in agreement.values()
            if a["case"]["async_scheduling"] is mode and a["case"]["vllm"] == version
        ]
        if not rows:
            continue
        counts: dict[str, list[int]] = {}
        for a in rows:
            for fig, v in a["verdict"].items():
                ok_n = counts.setdefault(fig, [0, 0])
                ok_n[0] += v == "ok"
                ok_n[1] += 1
        whole = sum(
            all(v == "ok" for v in a["verdict"].values()) and not a["missing"] for a in rows
        )
        lines.append(
            f"vLLM {version}, async_scheduling={mode}: "
            f"{whole}/{len(rows)} configurations agree on every figure"
        )
        lines += [f"  {fig}: {n}/{m}" for fig, (n, m) in counts.items()]
    return "\n".join(lines)


@pytest.fixture(scope="session", autouse=True)
def _write_agreement(agreement: dict[str, Any], request: pytest.FixtureRequest):
    yield
    if not agreement:
        return
    path = Path(request.config.rootpath) / ".pytest_cache" / "vllm-oracle" / "agreement.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(agreement, indent=1, default=str))
    summary = report_agreement(agreement)
    path.with_suffix(".txt").write_text(summary + "\n")
    request.config.stash[SUMMARY_KEY] = f"details in {path}\n{summary}"


if __name__ == "__main__":  # `python test_vllm_oracle.py` lists the generated ids
    sys.stdout.write("\n".join(c["id"] for c in CASES) + "\n")
