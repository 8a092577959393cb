"""Typed client for the kvplan REST API, sync and async, for deployment tooling.

    with KvplanClient("http://kvplan:8000") as client:
        plan = client.plan({"model": "meta-llama/Llama-3.1-8B", "kv_budget_bytes": 48 << 30})
        plan.capacity.max_requests

Every method returns the service's own response models. Any non-2xx answer raises
`KvplanAPIError`, carrying the parsed problem+json (`.problem.errors` locate each bad field);
transport failures stay httpx's (`httpx.TransportError`). Pass `transport=` to test in-process
(`httpx.ASGITransport(app)`) or against a `httpx.MockTransport`.
"""

from __future__ import annotations

import http
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from planner.api.schemas import (
    PROBLEM_MEDIA_TYPE,
    Health,
    Problem,
    Readiness,
    SweepRequest,
    SweepResponse,
)
from planner.catalog import CatalogModel, GpuEntry
from planner.core.schema import Plan, PlanRequest

__all__ = [
    "DEFAULT_TIMEOUT",
    "AsyncKvplanClient",
    "KvplanAPIError",
    "KvplanClient",
]

DEFAULT_TIMEOUT = httpx.Timeout(10.0, connect=5.0)
API = "/api/v1"

T = TypeVar("T")
_MODELS = TypeAdapter(list[CatalogModel])
_GPUS = TypeAdapter(list[GpuEntry])


class KvplanAPIError(Exception):
    """The service answered with an error; `problem` is its RFC 9457 body."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(f"{problem.status} {problem.title}: {problem.detail}")
        self.problem = problem

    @property
    def status(self) -> int:
        return self.problem.status

    @classmethod
    def from_response(cls, response: httpx.Response) -> KvplanAPIError:
        media_type = response.headers.get("content-type", "").split(";")[0].strip()
        if media_type == PROBLEM_MEDIA_TYPE:
            try:
                return cls(Problem.model_validate_json(response.content))
            except ValidationError:
                pass
        # Not ours (a proxy's page, a gateway timeout): keep the status and a bounded excerpt.
        try:
            phrase = http.HTTPStatus(response.status_code).phrase
        except ValueError:
            phrase = "Error"
        return cls(
            Problem(
                type="about:blank",
                title=phrase,
                status=response.status_code,
                detail=response.text[:500] or phrase,
            )
        )


def _body(request: BaseModel | Mapping[str, Any]) -> bytes:
    if isinstance(request, BaseModel):
        # Only the fields the caller set: the server applies its own defaults.
        return request.model_dump_json(exclude_unset=True).encode()
    return TypeAdapter(dict[str, Any]).dump_json(dict(request))


def _parse(response: httpx.Response, parse: Callable[[bytes], T]) -> T:
    if not response.is_success:
        raise KvplanAPIError.from_response(response)
    return parse(response.content)


_JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


def _id_path(kind: str, item_id: str) -> str:
    return f"{API}/{kind}/{quote(item_id, safe='/')}"


class KvplanClient:
    def __init__(
        self,
        base_url: str,
        *,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url, timeout=timeout, transport=transport, headers=headers
        )

    def plan(self, request: PlanRequest | Mapping[str, Any]) -> Plan:
        response = self._http.post(f"{API}/plan", content=_body(request), headers=_JSON_HEADERS)
        return _parse(response, Plan.model_validate_json)

    def sweep(self, request: SweepRequest | Mapping[str, Any]) -> SweepResponse:
        response = self._http.post(f"{API}/sweep", content=_body(request), headers=_JSON_HEADERS)
        return _parse(response, SweepResponse.model_validate_json)

    def models(self) -> list[CatalogModel]:
        return _parse(self._http.get(f"{API}/models"), _MODELS.validate_json)

    def model(self, model_id: str) -> CatalogModel:
        response = self._http.get(_id_path("models", model_id))
        return _parse(response, CatalogModel.model_validate_json)

    def gpus(self) -> list[GpuEntry]:
        return _parse(self._http.get(f"{API}/gpus"), _GPUS.validate_json)

    def gpu(self, gpu_id: str) -> GpuEntry:
        return _parse(self._http.get(_id_path("gpus", gpu_id)), GpuEntry.model_validate_json)

    def health(self) -> Health:
        return _parse(self._http.get("/healthz"), Health.model_validate_json)

    def ready(self) -> Readiness:
        return _parse(self._http.get("/readyz"), Readiness.model_validate_json)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncKvplanClient:
    def __init__(
        self,
        base_url: str,
        *,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url, timeout=timeout, transport=transport, headers=headers
        )

    async def plan(self, request: PlanRequest | Mapping[str, Any]) -> Plan:
        response = await self._http.post(
            f"{API}/plan", content=_body(request), headers=_JSON_HEADERS
        )
        return _parse(response, Plan.model_validate_json)

    async def sweep(self, request: SweepRequest | Mapping[str, Any]) -> SweepResponse:
        response = await self._http.post(
            f"{API}/sweep", content=_body(request), headers=_JSON_HEADERS
        )
        return _parse(response, SweepResponse.model_validate_json)

    async def models(self) -> list[CatalogModel]:
        return _parse(await self._http.get(f"{API}/models"), _MODELS.validate_json)

    async def model(self, model_id: str) -> CatalogModel:
        response = await self._http.get(_id_path("models", model_id))
        return _parse(response, CatalogModel.model_validate_json)

    async def gpus(self) -> list[GpuEntry]:
        return _parse(await self._http.get(f"{API}/gpus"), _GPUS.validate_json)

    async def gpu(self, gpu_id: str) -> GpuEntry:
        return _parse(await self._http.get(_id_path("gpus", gpu_id)), GpuEntry.model_validate_json)

    async def health(self) -> Health:
        return _parse(await self._http.get("/healthz"), Health.model_validate_json)

    async def ready(self) -> Readiness:
        return _parse(await self._http.get("/readyz"), Readiness.model_validate_json)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
