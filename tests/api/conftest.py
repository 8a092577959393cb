"""Fixtures for the REST service: one app per test from explicit settings (no singletons)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient

from planner.app import create_app
from planner.settings import Settings
from tests.work_pool import SharedPool

# The 48 GiB question (DESIGN.md, seeds): Llama-3.1-8B, bf16 KV, 8k context, 48 GiB of KV memory.
QUESTION_48_GIB = {
    "model": "meta-llama/Llama-3.1-8B",
    "kv_cache_dtype": "bf16",
    "context_tokens": 8192,
    "kv_budget_bytes": 51539607552,
}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path)


@pytest.fixture
def app(settings: Settings, shared_pool: SharedPool) -> FastAPI:
    return create_app(settings, work_pool=shared_pool.for_settings(settings))


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client
