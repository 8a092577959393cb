"""SGLang's own start-up sizing code as the oracle for the planner's SGLang figures.

For every release in `versions-sglang.txt`, `sglang_sizing.py` runs inside that release's own
virtualenv over every configuration generated below (fixed seed) and reports what SGLang
computes at start-up: accept or refuse (with SGLang's reason), the automatic (or given)
mem_fraction_static, the page size its attention backend settles on, KV heads per rank, the
token pool (`max_total_num_tokens`; the full pool of a hybrid SWA model), the running-request
limit and the longest request (`max_req_len`). Each configuration is one test case comparing
those figures with `plan()`. SGLang's answers are stored per release as fixtures
(tests/oracle/matrix.py): `make test` reads them; `make oracle ENGINE=sglang RELEASE=…` reruns
that release's code live and fails on any difference.

The inputs are what a deployment states: the GPU (its catalog memory, the torch-visible total,
stands in for the nvidia-smi total SGLang's tiers read; on an H100 nvidia-smi shows 81,559 MiB
where torch sees 81,090 MiB), its compute capability, the memory free before the weights load
(the planner gets the rest as `non_torch_bytes`), the weights per rank, and SGLang's flags.
"""

from __future__ import annotations

import json
import random
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from planner.catalog import get_gpu
from planner.core.errors import FieldError, PlanError
from planner.core.schema import PlanRequest
from planner.service import plan
from tests.oracle.conftest import SUMMARY_KEY
from tests.oracle.matrix import acceptance_verdict, oracle_results, record, releases
from tests.oracle.sglang_hybrid_grid import HYBRID_FLAGS, generate_hybrid, model_config

pytestmark = pytest.mark.oracle

HERE = Path(__file__).resolve().parent
ORACLE_VERSIONS = releases("sglang")
HARNESS = "sglang_sizing.py"
# Releases before 0.5.21 keep the older layer bookkeeping (sglang_sizing_0_20.py says which).
OLD_LAYER_INFO_BEFORE = (0, 5, 21)
SWITCHES_0_19 = ("sglang_sizing_0_20.py", "sglang_sizing_0_19.py")
SEED = 20261202
BASE_CONFIGS = 240
GIB = 1 << 30
MIB = 1 << 20

MODELS = (
    "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B",
    "Qwen/Qwen2.5-7B",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-32B",
    "mistralai/Mistral-7B-v0.1",
    "microsoft/Phi-3-mini-4k-instruct",
    "deepseek-ai/DeepSeek-V2-Lite",
    "openai/gpt-oss-20b",
)
GPUS = ("H100-SXM-80GB", "A100-SXM-40GB", "L4-24GB", "H200-141GB", "B200-180GB")
# SGLang's --kv-cache-dtype spellings, and two it refuses (vLLM's "fp8", "fp16").
KV_DTYPES = ("auto", "auto", "bf16", "fp8_e4m3", "fp8_e5m2", "fp8", "fp16")
TPS = (1, 1, 2, 4, 8)
PPS = (1, 1, 1, 2)
FRACTIONS = (None, None, None, 0.8, 0.9)
RUNNING = (None, None, 8, 256, 100000)
CONTEXTS = (None, None, 4096, 32768)
PAGES = (None, None, None, 16, 64)
# Weights of the whole model, as a share of one GPU's memory × TP × PP.
WEIGHT_SHARES = (0.0, 0.1, 0.3, 0.6, 0.95)


def _planner_config(model_id: str) -> dict[str, Any]:
    return model_config(model_id)


@cache
def _gpu_bytes(gpu_id: str) -> int:
    """The GPU's memory as the planner sees it (the catalog's torch-visible total), given to
    SGLang as its nvidia-smi total too: both sides size from the same figure."""
    return get_gpu(gpu_id).usable_memory_bytes


@cache
def _gpu_cc(gpu_id: str) -> int | None:
    return get_gpu(gpu_id).compute_capability


def _generate() -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    out: list[dict[str, Any]] = []
    for i in range(BASE_CONFIGS):
        plain = i < len(MODELS) * 2
        model = MODELS[i % len(MODELS)]
        gpu = GPUS[(i // len(MODELS)) % len(GPUS)] if plain else rng.choice(GPUS)
        tp = 1 if plain else rng.choice(TPS)
        pp = 1 if plain else rng.choice(PPS)
        total = _gpu_bytes(gpu)
        # Free before load: the total less the CUDA context (and NCCL at TP/PP > 1), a
        # deployment's own figure, given to both sides.
        context = rng.choice((512, 768, 1536)) * MIB if not plain else 512 * MIB
        free = total - context
        share = 0.1 if plain else rng.choice(WEIGHT_SHARES)
        weights_rank = int(free * share)
        c = {
            "model": model,
            "gpu": gpu,
            "tensor_parallel_size": tp,
            "pipeline_parallel_size": pp,
            "kv_cache_dtype": "auto" if plain else rng.choice(KV_DTYPES),
            "free_before_load_bytes": free,
            "weights_bytes_per_rank": weights_rank,
            "mem_fraction_static": None if plain else rng.choice(FRACTIONS),
            "max_running_requests": None if plain else rng.choice(RUNNING),
            "context_length": None if plain else rng.choice(CONTEXTS),
            "page_size": None if plain else rng.choice(PAGES),
        }
        c["id"] = _case_id(c, i)
        out.append(c)
    ids = [c["id"] for c in out]
    assert len(set(ids)) == len(ids), "generated ids must be unique"
    return out


# The second grid: SGLang's sizing flags (each set in about half its cases), on the SWA model,
# dense ones and Blackwell; stored as its own fixture (sglang_flags.json).
FLAG_SEED = 20261203
FLAG_CONFIGS = 120
FLAG_MODELS = ("openai/gpt-oss-20b", "openai/gpt-oss-20b", "meta-llama/Llama-3.1-8B",
               "Qwen/Qwen3-8B", "deepseek-ai/DeepSeek-V2-Lite")  # fmt: skip
FLAG_VALUES: dict[str, tuple[Any, ...]] = {
    "chunked_prefill_size": (1024, 4096, 16384),
    "cuda_graph_max_bs": (16, 160, 768),
    "max_total_tokens": (4096, 100000, 1 << 22),
    "swa_full_tokens_ratio": (0.001, 0.1, 0.5, 1.0),
}


def _generate_flags() -> list[dict[str, Any]]:
    rng = random.Random(FLAG_SEED)
    out: list[dict[str, Any]] = []
    for i in range(FLAG_CONFIGS):
        model = FLAG_MODELS[i % len(FLAG_MODELS)]
        gpu = rng.choice(GPUS)
        total = _gpu_bytes(gpu)
        free = total - 768 * MIB
        c: dict[str, Any] = {
            "model": model,
            "gpu": gpu,
            "tensor_parallel_size": rng.choice((1, 1, 2, 4)),
            "pipeline_parallel_size": 1,
            "kv_cache_dtype": rng.choice(("auto", "auto", "fp8_e4m3")),
            "free_before_load_bytes": free,
            "weights_bytes_per_rank": int(free * rng.choice((0.05, 0.3, 0.8))),
            "mem_fraction_static": rng.choice((None, None, 0.85)),
            "max_running_requests": rng.choice((None, None, 48)),
            "context_length": rng.choice((None, 8192)),
            "page_size": rng.choice((None, None, 16, 64)),
        }
        flags = {k: rng.choice(v) for k, v in FLAG_VALUES.items() if rng.random() < 0.5}
        c.update(flags)
        c["id"] = (
            "flags-"
            + _case_id(c, i)
            + "".join(f"-{k.split('_')[0]}{v}" for k, v in sorted(flags.items()))
        )
        out.append(c)
    return out


# The third grid: DP attention (--enable-dp-attention --dp-size D: attention at TP / D).
DP_MODELS = ("Qwen/Qwen3-8B", "meta-llama/Llama-3.1-70B", "deepseek-ai/DeepSeek-V2-Lite",
             "Qwen/Qwen2.5-7B")  # fmt: skip


def _generate_dp() -> list[dict[str, Any]]:
    rng = random.Random(SEED + 2)
    out: list[dict[str, Any]] = []
    for i in range(40):
        tp = rng.choice((2, 4, 8))
        gpu = rng.choice(("H100-SXM-80GB", "H200-141GB", "A100-SXM-40GB", "B200-180GB"))
        free = _gpu_bytes(gpu) - 1536 * MIB
        c: dict[str, Any] = {
            "model": DP_MODELS[i % len(DP_MODELS)],
            "gpu": gpu,
            "tensor_parallel_size": tp,
            "pipeline_parallel_size": 1,
            "kv_cache_dtype": rng.choice(("auto", "fp8_e4m3")),
            "free_before_load_bytes": free,
            "weights_bytes_per_rank": int(free * rng.choice((0.05, 0.3, 0.6))),
            "mem_fraction_static": rng.choice((None, None, 0.85)),
            "max_running_requests": rng.choice((None, 256, 1024)),
            "context_length": rng.choice((None, 8192)),
            "page_size": None,
            "dp_size": rng.choice([d for d in (2, 4, 8) if d <= tp]),
            "enable_dp_attention": True,
        }
        c["id"] = f"dpattn-{_case_id(c, i)}-dp{c['dp_size']}"
        out.append(c)
    return out


def _case_id(c: dict[str, Any], i: int) -> str:
    return "-".join(
        [
            f"{i:03d}",
            c["model"].split("/")[-1],
            c["gpu"].split("-")[0],
            f"kv_{c['kv_cache_dtype']}",
            f"tp{c['tensor_parallel_size']}",
            f"pp{c['pipeline_parallel_size']}",
            f"w{c['weights_bytes_per_rank'] // GIB}G",
            f"f{c['mem_fraction_static'] or 'auto'}",
            f"mrr{c['max_running_requests'] or 'def'}",
            f"ctx{c['context_length'] or 'def'}",
            f"ps{c['page_size'] or 'def'}",
        ]
    )


# The grids, each stored as its own fixture: {fixture name -> configurations}.
GRIDS = {
    "sglang_sizing": _generate(),
    "sglang_flags": _generate_flags(),
    "sglang_dp": _generate_dp(),
    "sglang_hybrid": generate_hybrid(_gpu_bytes, _case_id),
}
# The hybrid grid's harness reports the state and SWA pools too (it runs sglang_sizing's path).
GRID_HARNESS = {"sglang_hybrid": ("sglang_hybrid_sizing.py", ("sglang_sizing.py",))}


def _harness(version: str, grid: str) -> tuple[str, tuple[str, ...]]:
    """(harness, the files it also runs) for one grid at one release: before 0.5.21 the older
    layer bookkeeping (sglang_sizing_0_20.py), at 0.5.19 also its parallel widths and config
    registrations (sglang_sizing_0_19.py)."""
    harness, also_read = GRID_HARNESS.get(grid, (HARNESS, ()))
    v = tuple(int(x) for x in version.split("."))
    if v >= OLD_LAYER_INFO_BEFORE:
        return harness, also_read
    switches = ("sglang_sizing_0_20.py",) if v >= (0, 5, 20) else SWITCHES_0_19
    old = harness.replace(".py", switches[-1][len("sglang_sizing") :])
    files = (harness, *also_read, *switches)
    return old, tuple(f for f in dict.fromkeys(files) if f != old)


BASE_CASES = GRIDS["sglang_sizing"]
# Cases a release's oracle virtualenv cannot answer for its own code: 0.5.19 to 0.5.21 ask
# transformers 5.12.1 and their virtualenvs have 5.19.0 (requirements-sglang-0.5.x.txt), whose
# heterogeneous Gemma-4 config refuses the `text_config.head_dim` that their config parsers read
# (5.12.1 has no per-layer configs and returns it): the refusal would be the newer transformers', so
# Gemma-4 is left out of their hybrid grids (the planner answers it with the rules read in
# 0.5.21's wheel, releases.GEMMA4_SWA_SINCE).
NOT_ANSWERABLE = {v: ("gemma-4-",) for v in ("0.5.21", "0.5.20", "0.5.19")}
CASES = [
    # The whole release in the id: several 0.5.x releases are checked side by side.
    dict(c, sglang=v, grid=g, id=f"v{v}-{c['id']}")
    for v in ORACLE_VERSIONS
    for g, cases in GRIDS.items()
    for c in cases
    if not any(m in c["id"] for m in NOT_ANSWERABLE.get(v, ()))
]


def _oracle_inputs(version: str, grid: str = "sglang_sizing") -> list[dict[str, Any]]:
    return [
        {
            "id": c["id"],
            "config": _planner_config(c["model"]),
            "gpu_mib": _gpu_bytes(c["gpu"]) / MIB,
            "compute_capability": _gpu_cc(c["gpu"]),
            **{
                k: c[k]
                for k in (
                    "tensor_parallel_size",
                    "pipeline_parallel_size",
                    "kv_cache_dtype",
                    "free_before_load_bytes",
                    "weights_bytes_per_rank",
                    "mem_fraction_static",
                    "max_running_requests",
                    "context_length",
                    "page_size",
                )
            },
            # the flags and DP grids' own
            **{
                k: c[k]
                for k in (*FLAG_VALUES, *HYBRID_FLAGS, "dp_size", "enable_dp_attention")
                if k in c
            },
        }
        for c in CASES
        if c["sglang"] == version and c["grid"] == grid
    ]


@pytest.fixture(scope="session")
def oracle() -> Any:
    done: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}

    def get(version: str, grid: str = "sglang_sizing") -> dict[str, dict[str, Any]]:
        if (version, grid) not in done:
            harness, also_read = _harness(version, grid)
            done[version, grid] = oracle_results(
                version,
                harness,
                _oracle_inputs(version, grid),
                name=grid,
                engine="sglang",
                also_read=also_read,
                timeout_s=3600,
            )
        return done[version, grid]

    return get


# SGLang's flags and the planner's request fields for them (shared/DESIGN.md names).
FLAG_FIELDS = {
    "context_length": "context_length",
    "max_running_requests": "max_num_seqs",
    "mem_fraction_static": "gpu_memory_utilization",
    "page_size": "block_size",
    **{k: k for k in FLAG_VALUES},
    **{k: k for k in HYBRID_FLAGS},
    "dp_size": "data_parallel_size",
    "enable_dp_attention": "enable_dp_attention",
}


def _plan_request(c: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    total = _gpu_bytes(c["gpu"])
    tp, pp = c["tensor_parallel_size"], c["pipeline_parallel_size"]
    body: dict[str, Any] = {
        "model": _planner_config(c["model"]),
        "engine": "sglang",
        "engine_version": c["sglang"],
        "gpu": c["gpu"],
        "kv_cache_dtype": c["kv_cache_dtype"],
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": pp,
        "weights_bytes": c["weights_bytes_per_rank"] * tp * pp,
        "non_torch_bytes": total - c["free_before_load_bytes"],
    }
    for flag, field in FLAG_FIELDS.items():
        if c.get(flag) is not None:
            body[field] = c[flag]
    missing = [k for k in body if k not in PlanRequest.model_fields]
    return {k: v for k, v in body.items() if k not in missing}, missing


def _planner_figures(body: dict[str, Any]) -> dict[str, Any]:
    try:
        p = plan(PlanRequest.model_validate(body))
    except FieldError as e:
        return {"accepted": False, "fields": [pr.field for pr in e.problems], "error": e.detail}
    except PlanError as e:
        return {"accepted": False, "fields": [], "error": f"{type(e).__name__}: {e.detail}"}
    cap = p.capacity
    assert cap is not None
    if cap.engine_starts is False:
        return {"accepted": False, "fields": ["gpu_memory_utilization"], "error": cap.start_error}
    budget = cap.budget
    return {
        "accepted": True,
        "mem_fraction_static": budget.gpu_memory_utilization if budget is not None else None,
        "page_size": p.block_size,
        "kv_heads": p.per_rank.kv_heads,
        "tokens": cap.engine_reported_tokens,
        "running_requests": cap.max_num_seqs,
        "max_req_len": cap.engine_max_request_tokens,
        "swa_tokens": cap.swa_pool_tokens,
        "state_slots": cap.state_pool_slots,
        "state_bytes": cap.state_bytes_per_slot,
    }


def _oracle_figures(r: dict[str, Any]) -> dict[str, Any]:
    if r.get("traceback"):
        pytest.fail(f"oracle harness error (not an SGLang answer):\n{r['traceback']}")
    if not r["accepted"]:
        return {"accepted": False, "error": r["error"], "stage": r["stage"]}
    return {
        "accepted": True,
        "mem_fraction_static": r["mem_fraction_static"],
        "page_size": r["page_size"],
        # The planner's per-rank heads are its first attention layer's: a sliding one where
        # SGLang reports the sliding layers' apart (Gemma-4's full layers have their own).
        "kv_heads": r.get("swa_kv_heads_per_rank", r["kv_heads_per_rank"]),
        "tokens": r["max_total_num_tokens"],
        "running_requests": r["max_running_requests"],
        "max_req_len": r["max_req_len"],
        # The SWA pool of a hybrid SWA model; the state pool of a Mamba-ish one (its slots and
        # the bytes one slot holds), as the hybrid harness reports them.
        "swa_tokens": r["swa_max_total_num_tokens"] if r.get("is_hybrid_swa") else None,
        "state_slots": r.get("state_pool_slots"),
        "state_bytes": r.get("state_bytes_per_slot"),
    }


FIGURES = ("accepted", "mem_fraction_static", "page_size", "kv_heads", "tokens",
           "running_requests", "max_req_len", "swa_tokens", "state_slots",
           "state_bytes")  # fmt: skip


def compare(c: dict[str, Any], r: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    body, missing = _plan_request(c)
    mine = _planner_figures(body)
    theirs = _oracle_figures(r)
    verdict = {"accepted": acceptance_verdict("SGLang", theirs, mine)}
    if not (theirs["accepted"] and mine["accepted"]):
        return verdict, missing
    for fig in FIGURES[1:]:
        a, b = theirs[fig], mine[fig]
        if fig == "kv_heads" and a is None:  # MLA: one latent head, not reported by SGLang
            continue
        verdict[fig] = "ok" if a == b else f"SGLang {a!r} != planner {b!r}"
    return verdict, missing


_AGREEMENT: dict[str, Any] = {}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_planner_matches_sglang(case: dict[str, Any], oracle: Any) -> None:
    r = oracle(case["sglang"], case["grid"])[case["id"]]
    verdict, missing = compare(case, r)
    _AGREEMENT[case["id"]] = {"verdict": verdict, "missing": missing, "case": case, "sglang": r}
    problems = [f"the planner has no request field(s) {missing}"] if missing else []
    problems += [f"{k}: {v}" for k, v in verdict.items() if v != "ok"]
    record("sglang", case["sglang"], case["grid"].removeprefix("sglang_"), not problems)
    assert not problems, f"{case['id']} vs SGLang {case['sglang']}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("version", ORACLE_VERSIONS)
def test_oracle_covers_every_kind_and_setting(version: str, oracle: Any) -> None:
    """The generated set really exercises what it claims (not a test of the planner)."""
    results = oracle(version)
    assert len(results) == len(BASE_CASES)
    flagged = oracle(version, "sglang_flags")
    assert len(flagged) == len(GRIDS["sglang_flags"])
    assert any(r["accepted"] and r["swa_max_total_num_tokens"] for r in flagged.values())
    accepted = [r for r in results.values() if r["accepted"]]
    assert len(accepted) > len(results) // 2
    assert any(r["is_hybrid_swa"] for r in accepted), "no hybrid SWA model accepted"
    assert any(r["kv_heads_per_rank"] is None for r in accepted), "no MLA model accepted"
    assert len({r["mem_fraction_static"] for r in accepted}) > 4, "too few automatic fractions"
    assert {r["page_size"] for r in accepted} >= {1, 64}
    refused = [r for r in results.values() if not r["accepted"]]
    assert {r["stage"] for r in refused} >= {"server_args", "kv_cache"}, "too few refusal kinds"
    hybrid = oracle(version, "sglang_hybrid")
    asked = [c for c in CASES if c["sglang"] == version and c["grid"] == "sglang_hybrid"]
    assert len(hybrid) == len(asked)
    served = [r for r in hybrid.values() if r["accepted"]]
    assert any(r.get("state_pool_slots") for r in served), "no state pool sized"
    assert {r.get("state_ssm_dtype") for r in served} >= {"float32", "bfloat16"}
    assert any("mamba" in r.get("error", "").lower() for r in hybrid.values()), "no state refusal"
    if tuple(int(x) for x in version.split(".")) >= (0, 5, 22):  # Gemma-4's SWA pools
        assert any(r["is_hybrid_swa"] and r["swa_max_total_num_tokens"] for r in served)


def report_agreement(agreement: dict[str, Any]) -> str:
    lines = []
    for version in ORACLE_VERSIONS:
        rows = [a for a in agreement.values() if a["case"]["sglang"] == version]
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
        lines.append(f"SGLang {version}: {whole}/{len(rows)} configurations agree on every figure")
        lines += [f"  {fig}: {n}/{m}" for fig, (n, m) in counts.items()]
    return "\n".join(lines)


@pytest.fixture(scope="session", autouse=True)
def _write_agreement(request: pytest.FixtureRequest) -> Any:
    yield
    if not _AGREEMENT:
        return
    path = Path(request.config.rootpath) / ".pytest_cache" / "sglang-oracle" / "agreement.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_AGREEMENT, indent=1, default=str))
    summary = report_agreement(_AGREEMENT)
    path.with_suffix(".txt").write_text(summary + "\n")
    before = request.config.stash.get(SUMMARY_KEY, "")
    request.config.stash[SUMMARY_KEY] = "\n".join(
        s for s in (before, f"SGLang (N agree / M compared), details in {path}\n{summary}") if s
    )


if __name__ == "__main__":  # `python test_sglang_oracle.py` lists the generated ids
    sys.stdout.write("\n".join(c["id"] for c in CASES) + "\n")
