"""vLLM's own quantization configs as the oracle for `engines/vllm/quant_gpu.py`: each wheel's
`get_quantization_config(name).get_min_capability()` for every method the planner's table for
that release names, and the start-up check that compares it with the device's capability
(`vllm_quant_gpu.py`, stored per release as a fixture)."""

from __future__ import annotations

import pytest

from planner.core.engines.vllm.quant_gpu import READ_AT
from tests.oracle.matrix import oracle_results
from tests.oracle.test_vllm_oracle import ORACLE_VERSIONS

pytestmark = pytest.mark.oracle

READ_RELEASES = [v for v in ORACLE_VERSIONS if tuple(int(x) for x in v.split(".")[:2]) in READ_AT]


@pytest.mark.parametrize("version", READ_RELEASES)
def test_minimum_capabilities_are_the_wheels_own(version: str) -> None:
    major, minor = (int(x) for x in version.split(".")[:2])
    table = READ_AT[(major, minor)]
    got = oracle_results(version, "vllm_quant_gpu.py", [{"id": n} for n in sorted(table)])
    assert all(r["config_refuses_below"] for r in got.values())  # VllmConfig still refuses
    assert {k: r["min_capability"] for k, r in got.items()} == table
