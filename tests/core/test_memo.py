"""What plan() keeps between plans (planner.core.memo) never changes an answer: every request
answered after others that share its model and engine is answered as it is with nothing kept,
refusals included, in the same order of checks."""

from __future__ import annotations

import ast
import inspect
import json
from typing import Any

import pytest

from planner.core import inputs, resolved
from planner.core.errors import PlanError
from planner.core.memo import IdentityMemo, clear_memos, memo_by_identity
from planner.core.schema import PlanRequest
from planner.service import default_catalog, plan

from .conftest import GiB

MODEL = "meta-llama/Llama-3.1-8B"  # max_position_embeddings 131,072

# Requests of one model that share what the engine settles, or differ in one setting of it;
# each answer is compared with the same request planned with nothing kept.
BODIES: list[dict[str, Any]] = [
    {"model": MODEL, "context_tokens": 8192, "kv_budget_bytes": 48 * GiB},
    {"model": MODEL, "context_tokens": 32768, "kv_budget_bytes": 48 * GiB},
    {"model": MODEL, "context_tokens": 8192, "kv_budget_bytes": 1 << 20},  # below one request
    {"model": MODEL, "context_tokens": 200_000, "kv_budget_bytes": 48 * GiB},  # past the maximum
    {"model": MODEL, "context_tokens": 200_000, "allow_long_max_model_len": True,
     "kv_budget_bytes": 48 * GiB},
    {"model": MODEL, "context_tokens": 8192, "kv_budget_bytes": 48 * GiB,
     "calibration_id": "nope"},  # unknown calibration: refused after the settled checks
    {"model": MODEL, "context_tokens": 200_000, "kv_budget_bytes": 48 * GiB,
     "calibration_id": "nope"},  # vLLM refuses the length first
    {"model": MODEL, "context_tokens": 200_000, "engine": "trtllm", "calibration_id": "nope",
     "kv_budget_bytes": 48 * GiB},
    {"model": MODEL, "context_tokens": 8192, "kv_cache_dtype": "fp8", "gpu": "H100-SXM-80GB"},
    {"model": MODEL, "context_tokens": 8192, "gpu": "H100-SXM-80GB", "tensor_parallel_size": 2},
    {"model": MODEL, "context_tokens": 8192, "gpu": "H100-SXM-80GB", "pipeline_parallel_size": 3},
    {"model": MODEL, "requests": [{"context_tokens": 4096, "count": 3, "prefix_tokens": 1000},
                                  {"context_tokens": 9000}], "kv_budget_bytes": 48 * GiB},
    {"model": MODEL, "context_tokens": 8192, "kv_budget_bytes": 48 * GiB, "engine": "sglang"},
    {"model": MODEL, "context_tokens": 8192, "kv_budget_bytes": 48 * GiB, "engine": "sglang",
     "max_total_tokens": 100_000},
    {"model": MODEL, "context_tokens": 8192, "kv_budget_bytes": 48 * GiB,
     "engine_version": "0.9", "block_size": 32},
    {"model": MODEL, "context_tokens": 8192, "kv_budget_bytes": 48 * GiB, "engine": "sglang",
     "async_scheduling": True},  # refused: SGLang takes no --async-scheduling
    {"model": "google/gemma-3-27b-it", "context_tokens": 8192, "kv_budget_bytes": 48 * GiB},
    {"model": "google/gemma-3-27b-it", "context_tokens": 8192, "kv_budget_bytes": 48 * GiB,
     "hybrid_kv_cache_manager": False},
]  # fmt: skip


# One setting of `_Ask` (what the engine settles from) changed at a time, after BODIES[0].
_BASE = BODIES[0]
BODIES += [
    {**_BASE, "dtype": "float16"},
    {**_BASE, "kv_cache_dtype": "fp8"},
    {**_BASE, "tensor_parallel_size": 2},
    {**_BASE, "tensor_parallel_size": 3},  # refused: 8 KV heads over 3 ranks
    {**_BASE, "pipeline_parallel_size": 2},
    {**_BASE, "engine_version": "0.14"},
    {**_BASE, "engine_version": "0.14", "pipeline_parallel_size": 2},  # async off with PP
    {**_BASE, "context_length": 16384},  # refused: vLLM takes no context_length
    {**_BASE, "engine": "sglang", "context_length": 16384},
    {**_BASE, "engine": "sglang", "context_length": 200_000},  # past the model's maximum
    {**_BASE, "engine": "sglang", "context_length": 200_000, "allow_long_max_model_len": True},
    {**_BASE, "gpu": "H100-SXM-80GB"},
    {**_BASE, "gpu": {"memory_bytes": 80 * GiB, "bandwidth_bytes_per_s": 3.35e12}},
    {**_BASE, "async_scheduling": False},
    {**_BASE, "enable_prefix_caching": False, "shared_prefix_tokens": 1000},
    {**_BASE, "block_size": 32},
    {**_BASE, "max_num_batched_tokens": 2048, "model": "google/gemma-3-27b-it"},
    {**_BASE, "model": "google/gemma-3-27b-it"},
]


def answer(body: dict[str, Any]) -> str:
    try:
        return plan(PlanRequest.model_validate(body)).model_dump_json()
    except PlanError as exc:
        return f"{type(exc).__name__} {exc.problems!r}"


def fresh(body: dict[str, Any]) -> str:
    clear_memos()
    return answer(body)


def test_answers_after_other_plans_are_the_answers_with_nothing_kept() -> None:
    alone = [fresh(b) for b in BODIES]
    clear_memos()
    for _ in range(2):  # the second pass finds every setting kept
        assert [answer(b) for b in BODIES] == alone
    assert any(a.startswith("FieldError") for a in alone)  # refusals are compared too


def test_a_kept_model_is_settled_once() -> None:
    clear_memos()
    first = inputs.resolve(PlanRequest.model_validate(BODIES[0]), default_catalog())
    again = inputs.resolve(PlanRequest.model_validate(BODIES[1]), default_catalog())
    assert again.shape is first.shape and again.sched is first.sched
    assert (first.context_tokens, again.context_tokens) == (8192, 32768)
    assert len(inputs._SETTLED) == 1
    other = inputs.resolve(PlanRequest.model_validate(BODIES[8]), default_catalog())
    assert (first.kv_dtype.name, other.kv_dtype.name) == ("bf16", "fp8")
    assert len(inputs._SETTLED) == 2  # another dtype and GPU: settled on their own


def test_identity_memo_answers_only_for_the_objects_it_was_given() -> None:
    memo: IdentityMemo[str] = IdentityMemo(2)
    a, b = [1, 2], [1, 2]  # equal, not the same
    memo.put((a,), "k", "for a")
    assert memo.get((a,), "k") == "for a"
    assert memo.get((b,), "k") is None and memo.get((a,), "other") is None
    memo.put((b,), "k", "for b")
    memo.put((a,), "x", "third")  # bounded: the oldest entry goes
    assert len(memo) == 2 and memo.get((a,), "k") is None and memo.get((b,), "k") == "for b"


def test_memo_by_identity_computes_once_per_object() -> None:
    calls: list[object] = []

    @memo_by_identity(8)
    def f(obj: object, n: int) -> tuple[object, int]:
        calls.append(obj)
        return obj, n

    x, y = object(), object()
    assert f(x, 1) == f(x, 1) == (x, 1)
    assert f(y, 1) == (y, 1) and f(x, 2) == (x, 2)
    assert calls == [x, y, x]


def test_settling_reads_of_the_request_only_what_its_key_holds() -> None:
    # `_settle` gets the request's settings as `_Ask` (the memo's key); it may read the request
    # itself only for what makes a resolve not kept (drafts, windows) and their lengths.
    allowed = {"speculative_config", "max_attention_window", "context_tokens", "requests"}
    tree = ast.parse(inspect.getsource(inputs._settle))
    read = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "request"
    }
    assert read and read <= allowed
    assert set(inputs._Ask._fields) - {"tp", "pp", "allow_long", "gpu"} <= set(
        PlanRequest.model_fields
    )


@pytest.fixture(autouse=True)
def _nothing_kept_after() -> Any:
    yield
    clear_memos()


def _pasted(**change: Any) -> dict[str, Any]:
    config = default_catalog().model(MODEL, None).config
    assert config is not None
    return {**json.loads(json.dumps(config)), **change}  # a new dict, as a request parses one


def test_equal_pasted_configs_share_one_model_and_others_do_not() -> None:
    clear_memos()
    first = resolved.pasted_model(_pasted())
    assert resolved.pasted_model(_pasted()) is first  # equal JSON, another dict
    assert resolved.pasted_model(_pasted(num_key_value_heads=4)) is not first
    assert resolved.pasted_model(_pasted(num_key_value_heads=4)).shape.num_key_value_heads == 4
    # Too wide to keep (its key would pin 32 KiB and more): counted afresh each time.
    wide = _pasted(id2label={str(i): f"label-{i:06d}" for i in range(4000)})
    assert resolved.pasted_model(wide) is not resolved.pasted_model(dict(wide))
    clear_memos()
    assert resolved.pasted_model(_pasted()) is not first


def test_pasted_answers_after_other_plans_are_the_answers_with_nothing_kept() -> None:
    bodies = [{**b, "model": _pasted()} for b in BODIES if b["model"] == MODEL]
    bodies += [{**bodies[0], "model": _pasted(num_key_value_heads=4)}]
    alone = [fresh(b) for b in bodies]
    clear_memos()
    for _ in range(2):
        assert [answer(b) for b in bodies] == alone


def test_note_kept_by_value_formats_as_afresh() -> None:
    """A note raised afresh is kept per value: params equal in Python but formatted apart
    (1, 1.0 and True; 0.0 and -0.0) get their own entries, each the one formatted afresh."""
    from planner.core import plan as plan_module
    from planner.core.notes import note

    clear_memos()
    base = {"reported": 1.5, "num_blocks": 10, "need": 3, "fit": 1}
    asked = [
        note("capacity.null_block", ctx=ctx, **base) for ctx in (1, 1.0, True, 0.0, -0.0, 1, 1.0)
    ]
    asked.append(note("capacity.null_block", **{**base, "fit": 2}, ctx=1))  # another order
    kept = [plan_module._note_by_value(n) for n in asked]
    assert kept == [plan_module._note_entry(n) for n in asked]
    assert [k.text for k in kept][:5] == [plan_module._note_entry(n).text for n in asked[:5]]
    assert len({k.text for k in kept[:5]}) == 4  # 1 and True format alike, the rest apart
    assert kept[2].params["ctx"] is True and kept[0].params["ctx"] is not True  # JSON apart
    assert kept[5] is kept[0] and kept[6] is kept[1]  # the same value: the kept entry
    assert list(kept[7].params) == [*base, "ctx"]  # params keep the order they came in
