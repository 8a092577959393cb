"""Calibrations: run the probe on this host, ingest records measured elsewhere, read them back.

- `POST /probe` (admin): one probe per process at a time; a second call while one runs gets 429
  with `Retry-After`. Body bounds (`ProbeRequest`: max_seconds <= 120, memory <= 16 GiB, shapes
  bounded) turn oversize requests into 422 before anything is allocated. The probe and the store
  run in worker threads (`anyio.to_thread`), never on the event loop.
- `POST /calibrations` (admin): ingest a `CalibrationIn`, validated; 201 with the stored record,
  acknowledged only once committed durably. With `Idempotency-Key`, a retry of the same body
  returns the first record (200) and a different body under the same key is a 422.
- `GET /calibrations`, `GET /calibrations/{id}`: public reads; unknown id → 404.

Expects `app.state.settings.admin_token` and `app.state.store` (a `planner.store` store).
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
import time
from collections.abc import Callable
from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, Response

from planner.api.auth import require_admin
from planner.api.body import read_json_body
from planner.api.openapi import json_body
from planner.api.problems import ProblemException, make_problem, problem_responses
from planner.api.schemas import ProblemError
from planner.probe import (
    AttentionShape,
    Calibration,
    CalibrationIn,
    CalibrationList,
    ProbeFailed,
    ProbeRequest,
    ProbeUnavailable,
    run_probe,
)
from planner.store import CalibrationStore, IdempotencyConflict, StoreError

router = APIRouter(tags=["calibrations"])

ProbeRunner = Callable[[ProbeRequest], CalibrationIn]
MAX_LIST_LIMIT = 200
_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
# Time after max_seconds the probe may still need (allocation, first touch, backend trial).
_PROBE_SLACK_SECONDS = 10.0
MAX_IDEMPOTENCY_KEY_CHARS = 255
_IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]+$"  # visible ASCII, e.g. a UUID
# `validate`: model build plus the timed points (about a minute on CPU, a few on an H200).
_VALIDATE_SECONDS = 300.0


def default_probe_runner(body: ProbeRequest) -> CalibrationIn:
    return run_probe(
        body.device,
        body.max_seconds,
        shape=body.attention_shape,
        dtype=body.dtype,
        max_memory_bytes=body.max_memory_bytes,
    )


def _validated(body: ProbeRequest, store: CalibrationStore) -> Calibration:
    """`"validate": true`: probe with the validation model's shape, time it, store both records.

    Points are planned by `planner.service.plan` with the calibration read back from the store,
    the calls `POST /plan` makes for a `calibration_id` (without a second HTTP round trip).
    """
    from planner.probe.validate import core_link, probe_and_validate

    if body.attention_shape != AttentionShape() or body.dtype != "bf16":
        raise ProbeUnavailable(
            "validate probes the validation model's own shape and dtype; omit attention_shape "
            "and dtype"
        )
    return probe_and_validate(
        body.device,
        core_link(store),
        max_seconds=body.max_seconds,
        max_memory_bytes=body.max_memory_bytes,
    ).calibration


def get_probe_runner() -> ProbeRunner:
    """Dependency: the probe to run (tests override it with a stub)."""
    return default_probe_runner


class _ProbeSlot:
    """One probe per process: measurements that share the device would corrupt each other."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.busy_until = 0.0

    def retry_after_seconds(self) -> int:
        return max(1, math.ceil(self.busy_until - time.monotonic()))


_slot = _ProbeSlot()


def _store(request: Request) -> CalibrationStore:
    store: CalibrationStore | None = getattr(request.app.state, "store", None)
    if store is None:
        raise HTTPException(503, detail="the calibration store is not open on this server")
    return store


def _unavailable(exc: StoreError, request: Request | None = None) -> HTTPException:
    if request is not None:  # a failed write: /readyz reports it (planner.api.ops)
        request.app.state.write_failure = (time.monotonic(), str(exc))
    return HTTPException(503, detail=f"the calibration store failed: {exc}")


def _written(request: Request) -> None:
    request.app.state.write_failure = None


def _field_problem(field: str, msg: str) -> ProblemException:
    return ProblemException(
        make_problem(
            422,
            f"{field}: {msg}",
            title="Probe cannot run as asked",
            slug="probe",
            errors=[ProblemError(loc=[field], field=field, msg=msg)],
        )
    )


def _located(request: Request, response: Response, stored: Calibration) -> Calibration:
    path = request.app.url_path_for("get_calibration", calibration_id=stored.id)
    response.headers["Location"] = str(path)
    return stored


ADMIN_ERRORS = problem_responses(400, 401, 404, 413, 415, 422, 429, 503)


@router.post(
    "/probe",
    operation_id="run_probe",
    summary="Run the decode-bandwidth probe on this host and store the calibration (admin)",
    status_code=201,
    response_model=Calibration,
    dependencies=[Depends(require_admin)],
    responses=ADMIN_ERRORS,
    openapi_extra=json_body("ProbeRequest"),
)
async def post_probe(
    request: Request,
    response: Response,
    runner: Annotated[ProbeRunner, Depends(get_probe_runner)],
) -> Calibration:
    body = await read_json_body(request, ProbeRequest)
    store = _store(request)
    if not _slot.lock.acquire(blocking=False):
        retry = _slot.retry_after_seconds()
        raise HTTPException(
            429,
            detail=f"a probe is already running on this host; retry in {retry} s",
            headers={"Retry-After": str(retry)},
        )
    try:
        extra = _VALIDATE_SECONDS if body.validate_model else 0.0
        _slot.busy_until = time.monotonic() + body.max_seconds + _PROBE_SLACK_SECONDS + extra
        try:
            # Not abandoned on cancel: the slot stays taken until the measuring thread is done.
            # A stubbed probe (tests, contract fuzzing) measures nothing, the model included.
            if body.validate_model and runner is default_probe_runner:
                stored = await anyio.to_thread.run_sync(_validated, body, store)
            else:
                result = await anyio.to_thread.run_sync(runner, body)
                stored = await anyio.to_thread.run_sync(store.add, result)
            _written(request)
        except ProbeUnavailable as exc:
            raise _field_problem("device", str(exc)) from None
        except ProbeFailed as exc:
            raise _field_problem("max_seconds", str(exc)) from None
        except StoreError as exc:
            raise _unavailable(exc, request) from None
    finally:
        _slot.busy_until = 0.0
        _slot.lock.release()
    return _located(request, response, stored)


@router.post(
    "/calibrations",
    operation_id="ingest_calibration",
    summary="Store a calibration measured elsewhere, e.g. by `kvplan probe --report` (admin)",
    status_code=201,
    response_model=Calibration,
    dependencies=[Depends(require_admin)],
    responses={
        200: {"description": "Replay: the record first stored under this Idempotency-Key."},
        **ADMIN_ERRORS,
    },
    openapi_extra=json_body("CalibrationIn"),
)
async def post_calibration(
    request: Request,
    response: Response,
    idempotency_key: Annotated[
        str | None,
        Header(
            min_length=1,
            max_length=MAX_IDEMPOTENCY_KEY_CHARS,
            pattern=_IDEMPOTENCY_KEY_PATTERN,
            description="Retry-safe writes: the same key with the same body returns the first "
            "record (200, `Idempotent-Replayed: true`); with a different body, 422.",
        ),
    ] = None,
) -> Calibration:
    body = await read_json_body(request, CalibrationIn)
    store = _store(request)
    try:
        if idempotency_key is None:
            stored = await anyio.to_thread.run_sync(store.add, body)
        else:
            fingerprint = hashlib.sha256(body.model_dump_json().encode()).hexdigest()
            stored, replayed = await anyio.to_thread.run_sync(
                store.add_once, body, idempotency_key, fingerprint
            )
            if replayed:
                response.status_code = 200
                response.headers["Idempotent-Replayed"] = "true"
        _written(request)
    except IdempotencyConflict:
        msg = (
            "this key was already used with a different body; use a new key for a new record, "
            "or resend the first body unchanged"
        )
        raise ProblemException(
            make_problem(
                422,
                f"Idempotency-Key: {msg}",
                title="Idempotency key reused",
                slug="idempotency-key-reused",
                errors=[
                    ProblemError(
                        loc=["header", "Idempotency-Key"], field="Idempotency-Key", msg=msg
                    )
                ],
            )
        ) from None
    except StoreError as exc:
        raise _unavailable(exc, request) from None
    return _located(request, response, stored)


@router.get(
    "/calibrations",
    operation_id="list_calibrations",
    summary="Stored calibrations, newest first",
    response_model=CalibrationList,
    responses=problem_responses(422, 503),
)
def list_calibrations(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> CalibrationList:
    try:
        items = _store(request).list(limit=limit, offset=offset)
    except StoreError as exc:
        raise _unavailable(exc) from None
    return CalibrationList(items=items, limit=limit, offset=offset)


@router.get(
    "/calibrations/{calibration_id}",
    operation_id="get_calibration",
    name="get_calibration",
    summary="One stored calibration",
    response_model=Calibration,
    responses=problem_responses(404, 503),
)
def get_calibration(request: Request, calibration_id: str) -> Calibration:
    found = None
    if _ID.fullmatch(calibration_id):
        try:
            found = _store(request).get(calibration_id)
        except StoreError as exc:
            raise _unavailable(exc) from None
    if found is None:
        raise HTTPException(
            404,
            detail=f"no calibration {calibration_id[:64]!r}; GET /api/v1/calibrations lists them",
        )
    return found
