"""Property-based contract test: every operation in the OpenAPI, in-process, default checks.

All of schemathesis' checks run (no 5xx, documented statuses and content types, response
schemas, negative data rejected, unsupported methods answered 405, ...). One adjustment, stated:
`positive_data_acceptance` also accepts 422 for the planning bodies (`/plan`, `/sweep`,
`/reconcile`, `/recommend`) and the probe/calibration bodies (`/probe`, `/calibrations`), because
a schema-valid body can still name an unknown catalog id, a TP size the model's heads do not
divide, an attention shape whose query heads are not a multiple of its KV heads, or an engine log
with no KV-cache lines — rules JSON Schema cannot express, which the API answers with a
documented 422 problem naming the field. Admin routes run with a token and a stub probe.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import CHECKS
from schemathesis.config import SchemathesisConfig

from planner.api import calibrations
from planner.app import create_app
from planner.probe import CalibrationIn
from planner.settings import Settings

_CONFIG = SchemathesisConfig.from_dict(
    {
        "operations": [
            {
                "include-path-regex": (
                    "^/api/v1/(plan|sweep|reconcile|recommend|probe|calibrations)$"
                ),
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
# Admin routes enabled, so they are fuzzed for real (401 without the token, bodies validated);
# the admin rate limit is lifted (this checks the contract; tests/api/test_limits.py the limit),
# and the probe is a stub (the real one measures for seconds per call).
_TOKEN = "schemathesis-admin-token-0123456789"
_AUTH = {"Authorization": f"Bearer {_TOKEN}"}
_CANNED = CalibrationIn(
    device_name="stub",
    backend="stub",
    copy_bandwidth_bytes_per_s=1e12,
    decode_bandwidth_bytes_per_s=1e12,
    fixed_overhead_seconds=0.0,
)
_APP = create_app(
    Settings(
        data_dir=_DATA_DIR,
        admin_token=_TOKEN,
        admin_rate_per_minute=100_000,
        admin_rate_burst=100_000,
    )
)
_APP.dependency_overrides[calibrations.get_probe_runner] = lambda: lambda body: _CANNED
schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", _APP, config=_CONFIG)
# Every check schemathesis has, not only the defaults ("schema-valid request rejected",
# `positive_data_acceptance`, included); the stateful ones see one call at a time here.
ALL_CHECKS = CHECKS.get_all()


@schema.parametrize()
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_api_contract(case: schemathesis.Case) -> None:
    case.call_and_validate(headers=_AUTH, checks=ALL_CHECKS)
