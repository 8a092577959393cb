"""Property-based contract test: every operation in the OpenAPI, in-process, default checks.

All of schemathesis' default checks run (no 5xx, documented statuses and content types, response
schemas, negative data rejected, unsupported methods answered 405, ...). One adjustment, stated:
`positive_data_acceptance` also accepts 422 for the planning bodies (`/plan`, `/sweep`,
`/reconcile`, `/recommend`), because a schema-valid body can still name an unknown catalog id, a
TP size the model's heads do not divide, or an engine log with no KV-cache lines — rules JSON
Schema cannot express, which the API answers with a documented 422 problem naming the field.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from planner.app import create_app
from planner.settings import Settings

_CONFIG = SchemathesisConfig.from_dict(
    {
        "operations": [
            {
                "include-path-regex": "^/api/v1/(plan|sweep|reconcile|recommend)$",
                "checks": {
                    "positive_data_acceptance": {"expected-statuses": ["2xx", "404", "422"]}
                },
            }
        ]
    }
)

# A throwaway data dir: the lifespan opens the calibration store there.
_DATA_DIR = Path(tempfile.mkdtemp(prefix="kvplan-schemathesis-"))
atexit.register(shutil.rmtree, _DATA_DIR, ignore_errors=True)
schema = schemathesis.openapi.from_asgi(
    "/api/v1/openapi.json", create_app(Settings(data_dir=_DATA_DIR)), config=_CONFIG
)


@schema.parametrize()
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_api_contract(case: schemathesis.Case) -> None:
    case.call_and_validate()
