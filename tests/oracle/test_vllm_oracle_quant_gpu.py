"""vLLM's own quantization configs as the oracle for `engines/vllm/quant_gpu.py`: each wheel's
`get_quantization_config(name).get_min_capability()` for every method the planner's table for
that release names, and the start-up check that compares it with the device's capability."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from planner.core.engines.vllm.quant_gpu import READ_AT
from tests.oracle.conftest import require_oracle_python
from tests.oracle.test_vllm_oracle import ORACLE_VERSIONS

pytestmark = pytest.mark.oracle

_PROBE = """
import json, logging, sys, inspect
logging.disable(logging.CRITICAL)
from vllm.model_executor.layers.quantization import get_quantization_config
import vllm.config as config_pkg
try:  # 0.33 keeps VllmConfig in vllm/config/vllm.py; 0.11 in vllm/config/__init__.py
    from vllm.config import vllm as vllm_config
except ImportError:
    vllm_config = config_pkg
names = json.loads(sys.argv[1])
out = {n: get_quantization_config(n).get_min_capability() for n in names}
src = inspect.getsource(vllm_config)
out["__check__"] = "capability < quant_config.get_min_capability()" in src
print(json.dumps(out))
"""


@pytest.mark.parametrize("version", ORACLE_VERSIONS)
def test_minimum_capabilities_are_the_wheels_own(version: str) -> None:
    python = require_oracle_python(version)
    major, minor = (int(x) for x in version.split(".")[:2])
    table = READ_AT[(major, minor)]
    proc = subprocess.run(
        [str(python), "-c", _PROBE, json.dumps(sorted(table))],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got.pop("__check__") is True  # VllmConfig still refuses below the minimum
    assert got == table
