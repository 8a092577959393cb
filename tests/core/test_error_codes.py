"""Every error is a registered code with params (planner.core.errors): no raise site in planner/
words its own English, so the page can say each one in its own language."""

from __future__ import annotations

import ast
import string
from pathlib import Path

import pytest

from planner.core.errors import (
    ERROR_TEMPLATES,
    UNCODED,
    FieldError,
    FieldProblem,
    Message,
    PlanError,
    UnknownIdError,
)

PLANNER = Path(__file__).resolve().parents[2] / "planner"
# Constructors whose message argument must be a registered code, and where it sits.
CODE_ARG = {
    "PlanError": 0,
    "FieldError": 1,
    "ModelConfigError": 1,
    "UnknownIdError": 1,
    "ModelNotFoundError": 1,
    "GatedModelError": 1,
    "HubUnavailableError": 1,
    "RevisionNotFoundError": 1,
    "ModelFilesError": 1,
    "invalid": 0,  # a request validator's error (planner.core.errors.invalid)
}


def _codes(node: ast.expr) -> list[str] | None:
    """The codes an argument can be: a literal, or a conditional between literals."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if (  # {"a": "code.a", ...}.get(key, "code.default"): a table of literals
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Dict)
        and node.func.attr == "get"
        and len(node.args) == 2
    ):
        found = [_codes(v) for v in [*node.func.value.values, node.args[1]]]
        return None if None in found else [c for codes in found for c in codes or []]
    if isinstance(node, ast.IfExp):
        body, orelse = _codes(node.body), _codes(node.orelse)
        return body + orelse if body is not None and orelse is not None else None
    return None


def _sites() -> list[tuple[str, int, str, ast.Call, int]]:
    out = []
    for path in sorted(PLANNER.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        rel = str(path.relative_to(PLANNER.parent))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id in CODE_ARG:
                out.append((rel, node.lineno, func.id, node, CODE_ARG[func.id]))
            elif (
                isinstance(func, ast.Attribute)
                and func.attr == "of"
                and isinstance(func.value, ast.Name)
                and func.value.id in ("FieldProblem", "Message")
            ):
                out.append(
                    (
                        rel,
                        node.lineno,
                        f"{func.value.id}.of",
                        node,
                        int(func.value.id == "FieldProblem"),
                    )
                )
            elif isinstance(func, ast.Name) and func.id == "FieldProblem":
                out.append((rel, node.lineno, "FieldProblem", node, -1))
    return out


def test_every_raise_site_names_a_registered_code() -> None:
    sites = _sites()
    assert len(sites) > 150  # the scan sees the raise sites (about 230 today)
    bare, unknown = [], []
    for rel, line, name, call, index in sites:
        if rel == "planner/core/errors.py":
            continue  # the registry's own plumbing
        if index < 0:
            bare.append(f"{rel}:{line}: {name}(...) built directly; use FieldProblem.of")
            continue
        codes = _codes(call.args[index]) if len(call.args) > index else None
        if codes is None:
            bare.append(f"{rel}:{line}: {name} without a literal code")
            continue
        unknown += [f"{rel}:{line}: {c!r}" for c in codes if c not in ERROR_TEMPLATES]
    assert bare == [] and unknown == []


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def test_every_raise_site_gives_its_templates_params() -> None:
    # A site that leaves out a param its template formats would fail at raise time (a 500).
    missing = []
    for rel, line, name, call, index in _sites():
        if index < 0 or len(call.args) <= index or any(k.arg is None for k in call.keywords):
            continue  # no literal code, or params splatted from a dict (checked where built)
        given = {k.arg for k in call.keywords} - {"suggestions"}
        for code in _codes(call.args[index]) or []:
            if code in ERROR_TEMPLATES and not _fields(ERROR_TEMPLATES[code]) <= given:
                missing.append(
                    f"{rel}:{line}: {code} lacks {_fields(ERROR_TEMPLATES[code]) - given}"
                )
    assert missing == []


def test_request_validators_raise_registered_messages() -> None:
    # A pydantic validator's bare ValueError would reach problem+json without a code.
    bare = []
    schemas = [*PLANNER.glob("core/*schema*.py"), PLANNER / "api" / "schemas.py"]
    for path in schemas:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                func = node.exc.func
                if isinstance(func, ast.Name) and func.id == "ValueError":
                    bare.append(f"{path.name}:{node.lineno}")
    assert len(schemas) >= 5 and bare == []


def test_codes_are_dotted_names() -> None:
    for code in ERROR_TEMPLATES:
        assert code.replace("_", "").replace(".", "").isalnum() and code == code.lower(), code


def test_the_english_text_is_the_template_formatted_with_the_params() -> None:
    exc = FieldError("tensor_parallel_size", "engine.tp_divides_heads",
                     label="vLLM", hq=32, tp=3, ok=[1, 2, 4, 8])  # fmt: skip
    assert exc.code == "field.detail"
    problem = exc.problems[0]
    assert problem.code == "engine.tp_divides_heads"
    assert problem.params == {"label": "vLLM", "hq": 32, "tp": 3, "ok": [1, 2, 4, 8]}
    assert problem.msg == (
        "vLLM requires num_attention_heads (32) divisible by tensor_parallel_size (3); "
        "sizes that work: [1, 2, 4, 8]"
    )
    assert exc.detail == "tensor_parallel_size: " + problem.msg


def test_a_nested_reason_renders_in_english_and_as_json() -> None:
    inner = Message.of("quantity.not_a_number", text="abc")
    exc = FieldError("context_tokens", "cli.tokens_unreadable", reason=inner)
    assert exc.problems[0].msg == (
        "cannot read 'abc' as a number; write tokens, e.g. 8192 or 8k (k = 1024)"
    )
    assert exc.problems[0].message.as_json() == {
        "reason": {"code": "quantity.not_a_number", "params": {"text": "abc"}}
    }


def test_an_unregistered_message_is_kept_as_english_under_uncoded() -> None:
    # A raise site another branch adds before it is converted still says what it said.
    exc = PlanError("plain words, not a code")
    assert exc.code == UNCODED and exc.detail == "plain words, not a code"
    assert exc.whole().msg == "plain words, not a code"


def test_a_problem_moved_to_another_field_keeps_code_and_params() -> None:
    first = FieldProblem.of(("gpu",), "catalog.unknown_id", key="X", kind="gpu", hint="")
    moved = UnknownIdError.at(("settings", "gpu"), first)
    assert moved.problems[0].loc == ("settings", "gpu")
    assert (moved.problems[0].code, moved.problems[0].msg) == (first.code, first.msg)
    assert moved.suggestions == ()


@pytest.mark.parametrize("code", sorted(ERROR_TEMPLATES))
def test_every_template_parses(code: str) -> None:
    fields = [f for _, f, _, _ in string.Formatter().parse(ERROR_TEMPLATES[code]) if f]
    assert all(f.isidentifier() for f in fields), code


def test_reconcile_reasons_and_derivations_carry_codes() -> None:
    from planner.core.reconcile_schema import ReconcileRequest
    from planner.service import reconcile
    from tests.core.test_logparse import load_fixtures

    fixture = {f["id"]: f for f in load_fixtures()}["vllm-v1-granite4-micro-fp8-l40s-ibmcodeengine"]
    log = "\n".join(fixture["log_lines"])
    alone = reconcile(ReconcileRequest(log=log))
    unrecomputed = [c for c in alone.checks if c.status == "not_recomputable"]
    assert unrecomputed and all(c.reason_code == "reason.no_model" for c in unrecomputed)
    assert all(c.reason == ERROR_TEMPLATES["reason.no_model"] for c in unrecomputed)
    # With a model, the reserves say how they were learned, each line with its code: the
    # log's "Model loading took 3.4244 GiB" is the weights per rank (line 1 of the fixture).
    full = reconcile(ReconcileRequest(log=log, model="meta-llama/Llama-3.1-8B"))
    assert full.reserves is not None
    first = full.reserves.derivation_detail[0]
    assert (first.code, first.params) == (
        "derivation.weights_per_rank",
        {"gib": "3.4244", "line": 1},
    )
    assert full.reserves.derivation[0] == "weights per rank 3.4244 GiB (line 1)"


def test_an_error_carried_back_from_a_worker_keeps_codes_and_params() -> None:
    import pickle

    from planner.api.jobs import CarriedPlanError

    exc = FieldError("tensor_parallel_size", "engine.tp_divides_heads",
                     label="vLLM", hq=32, tp=3, ok=[1, 2, 4, 8])  # fmt: skip
    back = pickle.loads(pickle.dumps(CarriedPlanError.of(exc))).rebuild()
    assert (back.code, back.detail) == (exc.code, exc.detail)
    assert back.problems[0].message == exc.problems[0].message
    busy = pickle.loads(pickle.dumps(CarriedPlanError.of(PlanError("page.busy", reason="x"))))
    assert busy.rebuild().message == Message("page.busy", {"reason": "x"})


def test_a_recommendation_that_cannot_launch_says_why_with_a_code() -> None:
    from planner.core.recommend_schema import RecommendRequest
    from planner.service import recommend
    from planner.web.i18n import message_text, translations

    # Llama-3.1-8B on one L4 cannot hold one request of 1,000,000 tokens (test_recommend).
    r = recommend(RecommendRequest.model_validate(
        {"model": "meta-llama/Llama-3.1-8B", "gpu": "L4-24GB", "max_model_len": 1_000_000,
         "concurrency": 1}
    ))  # fmt: skip
    assert r.binding_constraint == "max_model_len" and r.binding_detail_code == "recommend.binding"
    assert r.binding_detail_params is not None
    reason = r.binding_detail_params["reason"]
    assert reason["code"] == "recommend.max_model_len"
    assert reason["params"]["max_len"] == 1_000_000
    assert r.binding_detail == Message.from_json("recommend.binding", r.binding_detail_params).text
    zh = message_text(Message.from_json("recommend.binding", r.binding_detail_params),
                      translations("zh").gettext)  # fmt: skip
    assert zh is not None and "容纳不下一个 max_model_len 1,000,000 的请求" in zh
