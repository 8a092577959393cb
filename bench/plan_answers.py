"""Dump every plan answer over the catalog × a grid of requests, to check "byte-identical".

Run before and after a change and compare the files (issue 26: speed work must not change one
byte of an answer):

    .venv/bin/python bench/plan_answers.py build/plan_answers.before.jsonl
    ... change the code ...
    .venv/bin/python bench/plan_answers.py build/plan_answers.after.jsonl
    cmp build/plan_answers.before.jsonl build/plan_answers.after.jsonl

Each line is one case: the request body sent, then what came back through each path:
`http` is `POST /api/v1/plan` on an in-process app (status, content type, body bytes: the
parse, cost check, plan and serialisation a client sees), `core` is `planner.service.plan` on
the same body, its `Plan.model_dump_json()` (or the error's class and problems). Refusals
(unknown engine release, a context past the model's maximum, a budget too small) are answers
too and are dumped alike, and so is a crash (the route's 500 and the exception's class), so
one failing case does not stop the check. The grid: every catalog model (refused ones
included) and two pasted hybrid configs × engines and releases × GPUs, budgets, contexts,
request mixes, KV dtypes, tensor/pipeline parallel sizes, speculative drafts, what-ifs. Prints
the case count and a SHA-256 of the file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30

# (engine, engine_version): the default release of each engine and some older vLLM rules.
ENGINES: tuple[tuple[str, str | None], ...] = (
    ("vllm", None),
    ("vllm", "0.9"),
    ("vllm", "0.19.0"),
    ("sglang", None),
    ("trtllm", None),
    ("transformers", None),
)

# Request variants (merged over {"model": ..., "engine": ...}); each exercises other rules.
VARIANTS: tuple[dict[str, Any], ...] = (
    {"context_tokens": 8192, "kv_budget_bytes": 48 * GIB, "kv_cache_dtype": "bf16"},
    {"context_tokens": 8192, "kv_budget_bytes": 48 * GIB},
    {"gpu": "H100-SXM-80GB", "context_tokens": 32768},
    {
        "gpu": "H200-141GB",
        "tensor_parallel_size": 8,
        "context_tokens": 131072,
        "output_tokens": 512,
    },
    {"gpu": "A100-SXM-40GB", "tensor_parallel_size": 2, "context_tokens": 4096},
    {"gpu": "L4-24GB", "kv_cache_dtype": "fp8", "context_tokens": 2048},
    {
        "gpu": "MI300X-192GB",
        "requests": [
            {"context_tokens": 2048, "count": 4, "prefix_tokens": 512},
            {"context_tokens": 8192, "count": 2},
        ],
    },
    {
        "gpu": {"name": "mine", "memory_bytes": 96 * GIB, "bandwidth_bytes_per_s": 3.2e12},
        "context_tokens": 16384,
        "gpu_memory_utilization": 0.85,
        "block_size": 32,
        "max_num_seqs": 64,
    },
    {"gpu": "B200-180GB", "pipeline_parallel_size": 2, "tensor_parallel_size": 4},
    {"kv_budget_bytes": 2 * GIB, "context_tokens": 1024, "kv_compression_ratio": 0.5},
    {"kv_budget_bytes": 1 << 20, "context_tokens": 65536},
    {"gpu": "H100-SXM-80GB", "enforce_eager": True, "weights_bytes": 0, "reserve_bytes": GIB},
    {
        "gpu": "H100-SXM-80GB",
        "context_tokens": 4096,
        "speculative_config": {"method": "ngram", "num_speculative_tokens": 4},
    },
    {
        "gpu": "H100-SXM-80GB",
        "context_tokens": 4096,
        "speculative_config": {
            "method": "draft_model",
            "model": "meta-llama/Llama-3.2-1B",
            "num_speculative_tokens": 3,
            "acceptance_rate": 0.7,
        },
    },
    {
        "gpu": "H200-141GB",
        "context_tokens": 8192,
        "speculative_config": {"method": "mtp", "num_speculative_tokens": 1},
    },
    {"gpu": "A10-24GB", "kv_cache_dtype": "int8", "bandwidth_bytes_per_s": 6e11},
    {"context_tokens": 4096},
)


def cases() -> Iterator[dict[str, Any]]:
    from planner.catalog import list_models, list_refused

    models: list[Any] = [m.id for m in list_models()] + [m.id for m in list_refused()]
    hybrid = json.loads((ROOT / "tests" / "fixtures" / "hybrid_models.json").read_text())
    models += [m["config"] for m in hybrid["models"][:2]]
    for model in models:
        for engine, version in ENGINES:
            for variant in VARIANTS:
                body: dict[str, Any] = {"model": model, "engine": engine}
                if version is not None:
                    body["engine_version"] = version
                body.update(variant)
                yield body


def core_answer(raw: bytes) -> str:
    from planner.contract.problems import ProblemException
    from planner.contract.strict_json import parse_json_body
    from planner.core.errors import PlanError
    from planner.core.schema import PlanRequest
    from planner.service import plan

    try:
        request = parse_json_body(raw, PlanRequest)
        return plan(request).model_dump_json()
    except ProblemException as exc:
        return "problem " + exc.problem.model_dump_json(exclude_none=True)
    except PlanError as exc:
        return f"{type(exc).__name__} {exc.problems!r}"
    except Exception as exc:  # a crash is dumped as an answer too, so the check covers the rest
        return f"crash {type(exc).__name__} {exc}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="file to write (JSON lines), e.g. under build/")
    args = ap.parse_args()
    # Everything inline (no worker processes; the answer bytes are the same either way), no
    # answer memo, no Hub (catalog models only), a scratch data dir.
    os.environ.setdefault("KVPLAN_INLINE_COST", str(10**9))
    os.environ.setdefault("KVPLAN_MAX_REQUEST_COST", str(10**9))
    os.environ.setdefault("KVPLAN_PLAN_CACHE_BYTES", "0")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("KVPLAN_DATA_DIR", str(ROOT / "build" / "plan_answers_data"))
    from fastapi.testclient import TestClient

    from planner.app import create_app

    args.out.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    n = 0
    with (
        TestClient(create_app(), raise_server_exceptions=False) as client,
        args.out.open("wb") as f,
    ):
        for body in cases():
            raw = json.dumps(body, separators=(",", ":")).encode()
            r = client.post(
                "/api/v1/plan", content=raw, headers={"content-type": "application/json"}
            )
            line = json.dumps(
                {
                    "request": body,
                    "http": [r.status_code, r.headers.get("content-type"), r.text],
                    "core": core_answer(raw),
                },
                separators=(",", ":"),
            ).encode()
            f.write(line + b"\n")
            digest.update(line + b"\n")
            n += 1
    print(f"{n} cases -> {args.out} sha256 {digest.hexdigest()}", file=sys.stderr)


if __name__ == "__main__":
    main()
