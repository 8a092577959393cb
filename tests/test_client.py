"""`planner.client`: typed sync/async client against the in-process app and mocked errors."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

import planner.client
from planner.api.schemas import SweepRequest
from planner.app import create_app
from planner.client import AsyncKvplanClient, KvplanAPIError, KvplanClient
from planner.core.schema import Plan, PlanRequest
from planner.settings import Settings
from tests.api.conftest import QUESTION_48_GIB

BASE = "http://kvplan.test"


@pytest.fixture
def app(tmp_path) -> FastAPI:  # type: ignore[no-untyped-def]
    return create_app(Settings(data_dir=tmp_path))


def test_exported_members() -> None:
    assert set(planner.client.__all__) == {
        "DEFAULT_TIMEOUT",
        "AsyncKvplanClient",
        "KvplanAPIError",
        "KvplanClient",
    }
    for name in planner.client.__all__:
        assert getattr(planner.client, name).__module__ in ("planner.client", "httpx")


async def test_async_client_plan_and_catalog(app: FastAPI) -> None:
    async with AsyncKvplanClient(BASE, transport=httpx.ASGITransport(app=app)) as client:
        plan = await client.plan(QUESTION_48_GIB)
        assert isinstance(plan, Plan)
        assert plan.capacity is not None and plan.capacity.max_requests == 47
        assert plan.capacity.engine_reported_concurrency == 48.0
        model = await client.model("meta-llama/Llama-3.1-8B")
        assert model.config["num_hidden_layers"] == 32
        assert "H100-SXM-80GB" in [g.id for g in await client.gpus()]
        assert (await client.health()).status == "ok"


async def test_async_client_raises_typed_problem(app: FastAPI) -> None:
    async with AsyncKvplanClient(BASE, transport=httpx.ASGITransport(app=app)) as client:
        with pytest.raises(KvplanAPIError) as excinfo:
            await client.plan({"model": "meta-llama/Llama-3.1-8B", "tensor_parallel_size": 3})
    problem = excinfo.value.problem
    assert excinfo.value.status == 422
    assert [e.field for e in problem.errors] == ["tensor_parallel_size"]
    assert problem.type.startswith("urn:kvplan:problem:")


def test_sync_client_models_sweep_and_request_models(app: FastAPI) -> None:
    # The sync client over a sync transport: a MockTransport that forwards to the ASGI app.
    from starlette.testclient import TestClient

    test_client = TestClient(app)

    def forward(request: httpx.Request) -> httpx.Response:
        upstream = test_client.request(
            request.method, request.url.path, content=request.content, headers=request.headers
        )
        return httpx.Response(
            upstream.status_code, headers=upstream.headers, content=upstream.content
        )

    with KvplanClient(BASE, transport=httpx.MockTransport(forward)) as client:
        plan = client.plan(PlanRequest.model_validate(QUESTION_48_GIB))
        assert plan.capacity is not None and plan.capacity.max_requests == 47
        assert "meta-llama/Llama-3.1-8B" in [m.id for m in client.models()]
        sweep = client.sweep(
            SweepRequest.model_validate(
                {
                    "base": {"model": "meta-llama/Llama-3.1-8B", "kv_budget_bytes": 48 << 30},
                    "context_tokens": [8192],
                }
            )
        )
        assert sweep.points[0].max_requests == 47
        with pytest.raises(KvplanAPIError) as excinfo:
            client.model("nobody/nothing")
        assert excinfo.value.status == 404


def test_non_problem_error_still_typed() -> None:
    def gateway(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            502, text="<html>bad gateway</html>", headers={"content-type": "text/html"}
        )

    with KvplanClient(BASE, transport=httpx.MockTransport(gateway)) as client:
        with pytest.raises(KvplanAPIError) as excinfo:
            client.health()
    assert excinfo.value.status == 502
    assert excinfo.value.problem.title == "Bad Gateway"
    assert "bad gateway" in excinfo.value.problem.detail


def test_request_sends_only_fields_set() -> None:
    seen: list[bytes] = []

    def capture(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        return httpx.Response(
            503,
            json={"type": "about:blank", "title": "x", "status": 503, "detail": "d"},
            headers={"content-type": "application/problem+json"},
        )

    with KvplanClient(BASE, transport=httpx.MockTransport(capture)) as client:
        with pytest.raises(KvplanAPIError):
            client.plan(PlanRequest(model="meta-llama/Llama-3.1-8B", context_tokens=8192))
    assert seen == [b'{"model":"meta-llama/Llama-3.1-8B","context_tokens":8192}']
