"""`GET /api/v1/models`, `/models/{id}`, `/gpus`, `/gpus/{id}`: the catalog, read-only.

Model ids contain a slash (`meta-llama/Llama-3.1-8B`), hence the `:path` converter. An unknown id
in the path is a 404 problem naming the id and how to list the known ones.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import Response
from pydantic import TypeAdapter

from planner import catalog
from planner.api.problems import ProblemException, problem_from_plan_error, problem_responses
from planner.catalog import CatalogModel, GpuEntry
from planner.core.errors import UnknownIdError

router = APIRouter(tags=["catalog"])

_Id = Annotated[str, Path(min_length=1, max_length=200)]


def _not_found(exc: UnknownIdError, param: str) -> ProblemException:
    problem = problem_from_plan_error(exc, status=404)
    errors = [e.model_copy(update={"loc": ["path", param], "field": param}) for e in problem.errors]
    return ProblemException(problem.model_copy(update={"errors": errors}))


_MODELS = TypeAdapter(list[CatalogModel])
_GPUS = TypeAdapter(list[GpuEntry])
_MODEL = TypeAdapter(CatalogModel)
_GPU = TypeAdapter(GpuEntry)


@cache
def _model_json(served_id: str) -> bytes:
    """One entry's answer, the bytes FastAPI's response model would write (its adapter's
    `dump_json`, by alias), made once per entry: the catalog is static."""
    return _MODEL.dump_json(catalog.get_model(served_id), by_alias=True)


@cache
def _gpu_json(gpu_id: str) -> bytes:
    return _GPU.dump_json(catalog.get_gpu(gpu_id), by_alias=True)


@cache
def _models_json() -> bytes:
    """The catalog is static: serialize each listing once, not per request."""
    return _MODELS.dump_json(catalog.list_models())


@cache
def _gpus_json() -> bytes:
    return _GPUS.dump_json(catalog.list_gpus())


@router.get(
    "/models",
    operation_id="list_models",
    summary="Catalog models",
    response_model=list[CatalogModel],
)
async def list_models() -> Response:
    return Response(content=_models_json(), media_type="application/json")


@router.get(
    "/models/{model_id:path}",
    operation_id="get_model",
    summary="One catalog model by id (ids contain a slash)",
    response_model=CatalogModel,
    responses=problem_responses(404, 422),
)
async def get_model(model_id: _Id) -> Response:
    try:
        served = catalog.get_model(model_id)
    except UnknownIdError as exc:
        raise _not_found(exc, "model_id") from None
    return Response(content=_model_json(served.id), media_type="application/json")


@router.get(
    "/gpus", operation_id="list_gpus", summary="Catalog GPUs", response_model=list[GpuEntry]
)
async def list_gpus() -> Response:
    return Response(content=_gpus_json(), media_type="application/json")


@router.get(
    "/gpus/{gpu_id}",
    operation_id="get_gpu",
    summary="One catalog GPU by id",
    response_model=GpuEntry,
    responses=problem_responses(404, 422),
)
async def get_gpu(gpu_id: _Id) -> Response:
    try:
        found = catalog.get_gpu(gpu_id)
    except UnknownIdError as exc:
        raise _not_found(exc, "gpu_id") from None
    return Response(content=_gpu_json(found.id), media_type="application/json")
