""" "Did you mean" for model ids, offline: the typo is refused before any Hub call with the
closest catalog ids, over the API (problem+json `suggestions`), the CLI (exit 2) and the page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from planner.app import create_app
from planner.catalog.suggest import likely_typo, suggest_models
from planner.cli import app as cli
from planner.core.errors import UnknownIdError
from planner.resolve import resolve_model
from planner.resolve.settings import HubSettings
from planner.settings import Settings


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("meta-llama/Llama-3.1-8B-Instrct", "meta-llama/Llama-3.1-8B-Instruct"),
        ("llama3.1-8b", "meta-llama/Llama-3.1-8B"),
        ("meta-llama/Llama3.1-8B", "meta-llama/Llama-3.1-8B"),
        ("mistralai/Mistral-7B-Instrcut-v0.3", "mistralai/Mistral-7B-Instruct-v0.3"),
    ],
)
def test_a_typo_suggests_the_id_first(typed: str, meant: str) -> None:
    assert suggest_models(typed)[0] == meant
    assert likely_typo(typed) == meant


@pytest.mark.parametrize(
    "typed",
    # Another size, another quantized repo, another short tag: real repos, never typos.
    ["google/gemma-3-270m-it", "Qwen/Qwen3-8B-AWQ", "meta-llama/Llama-3.1-7B", "org/other-model"],
)
def test_real_looking_ids_are_not_taken_for_typos(typed: str) -> None:
    assert likely_typo(typed) is None


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(data_dir=tmp_path)), raise_server_exceptions=False) as c:
        yield c


def test_a_typo_is_refused_before_the_hub_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    import planner.resolve.hub as hub

    def no_fetch(*args: object, **kwargs: object) -> None:
        raise AssertionError("the Hub was asked")

    monkeypatch.setattr(hub, "fetch", no_fetch)
    with pytest.raises(UnknownIdError) as info:
        resolve_model("meta-llama/Llama-3.1-8B-Instrct", settings=HubSettings(enabled=True))
    assert info.value.suggestions[0] == "meta-llama/Llama-3.1-8B-Instruct"


def test_api_problem_lists_suggestions(client: TestClient) -> None:
    body = {"model": "meta-llama/Llama-3.1-8B-Instrct", "context_tokens": 8192,
            "kv_budget_bytes": 1 << 34}  # fmt: skip
    r = client.post("/api/v1/plan", json=body)
    assert 400 <= r.status_code < 500
    problem = r.json()
    assert r.headers["content-type"].startswith("application/problem+json")
    assert problem["suggestions"][0] == "meta-llama/Llama-3.1-8B-Instruct"
    assert problem["errors"][0]["field"] == "model"


def test_cli_exits_2_with_the_suggestion() -> None:
    r = CliRunner().invoke(cli, ["plan", "--model", "llama3.1-8b", "--budget", "16GiB"])
    assert r.exit_code == 2
    assert "meta-llama/Llama-3.1-8B" in r.stderr


def test_page_shows_the_suggestion(client: TestClient) -> None:
    r = client.get("/", params={"model": "llama3.1-8b", "kv_budget_gib": "16"})
    assert "Did you mean: meta-llama/Llama-3.1-8B" in r.text


def test_an_unknown_gpu_carries_its_suggestions() -> None:
    # The page shows them next to the GPU field as it does for models (issue 25 item 9): the
    # catalog's own entry for the H200 is H200-141GB.
    from planner.catalog import get_gpu

    with pytest.raises(UnknownIdError) as info:
        get_gpu("H200")
    assert info.value.suggestions == ("H200-141GB",)
    assert "Did you mean: H200-141GB?" in str(info.value.problems[0].msg)
