"""Calibration models (ingest contract: DESIGN.md) and the datasheet rows (probe.md table (c))."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from planner.probe import AttentionShape, CalibrationIn, ProbeRequest
from planner.probe.datasheet import lookup

GiB = 1 << 30
REQUIRED = {
    "device_name": "NVIDIA H200",
    "backend": "sdpa-flash",
    "copy_bandwidth_bytes_per_s": 4.3e12,
    "decode_bandwidth_bytes_per_s": 4.0e12,
    "fixed_overhead_seconds": 2e-5,
}


def test_ingest_needs_only_the_five_required_fields() -> None:
    c = CalibrationIn.model_validate(REQUIRED)
    assert c.measured_at is None and c.points == [] and c.flags == []


@pytest.mark.parametrize("missing", sorted(REQUIRED))
def test_each_required_field_is_required(missing: str) -> None:
    body = {k: v for k, v in REQUIRED.items() if k != missing}
    with pytest.raises(ValidationError) as info:
        CalibrationIn.model_validate(body)
    assert info.value.errors()[0]["loc"] == (missing,)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("copy_bandwidth_bytes_per_s", 0),
        ("copy_bandwidth_bytes_per_s", -1.0),
        ("decode_bandwidth_bytes_per_s", float("inf")),
        ("decode_bandwidth_bytes_per_s", float("nan")),
        ("decode_bandwidth_bytes_per_s", 1e300),
        ("fixed_overhead_seconds", -1e-6),
        ("fixed_overhead_seconds", 5.0),
        ("device_name", ""),
        ("device_name", "x" * 201),
        ("flags", ["Not A Flag"]),
        ("flags", ["ok"] * 33),
        ("measured_at", "2025-01-31T12:00:00"),  # no timezone
        ("surprise", 1),  # unknown field
    ],
)
def test_ingest_rejects_out_of_bounds(field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        CalibrationIn.model_validate({**REQUIRED, field: value})


def test_attention_shape_needs_whole_groups() -> None:
    assert AttentionShape().group_size == 4  # Llama-3.1-8B: 32 q heads over 8 KV heads
    with pytest.raises(ValidationError, match="multiple"):
        AttentionShape(num_q_heads=32, num_kv_heads=5)


@pytest.mark.parametrize(
    "body",
    [
        {"max_seconds": 121},
        {"max_seconds": 0},
        {"max_memory_bytes": 32 * GiB},
        {"attention_shape": {"num_q_heads": 1024, "num_kv_heads": 8, "head_dim": 128}},
        {"device": "tpu"},
        {"dtype": "fp4"},
    ],
)
def test_probe_request_is_bounded(body: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ProbeRequest.model_validate(body)


@pytest.mark.parametrize(
    ("name", "memory", "sms", "bandwidth"),
    [
        ("NVIDIA H200", 141 * 10**9, 132, 4.8e12),
        ("NVIDIA H100 80GB HBM3", 80 * GiB, 132, 3.35e12),
        ("NVIDIA H100 PCIe", 80 * GiB, 114, 2.0e12),
        ("NVIDIA H100 NVL", 94 * 10**9, 132, 3.9e12),
        ("NVIDIA A100-SXM4-80GB", 80 * GiB, 108, 2.039e12),
        ("NVIDIA A100 80GB PCIe", 80 * GiB, 108, 1.935e12),
        ("NVIDIA A100-SXM4-40GB", 40 * GiB, 108, 1.555e12),
        ("NVIDIA L40S", 46068 << 20, 142, 0.864e12),
        ("NVIDIA A10", 23028 << 20, 72, 0.6e12),
        ("NVIDIA L4", 23034 << 20, 58, 0.3e12),
        ("NVIDIA GeForce RTX 4090", 24 * GiB, 128, 1.008e12),
    ],
)
def test_datasheet_rows(name: str, memory: int, sms: int, bandwidth: float) -> None:
    found = lookup(name, memory_bytes=memory, sm_count=sms)
    assert found is not None
    assert found[0] == pytest.approx(bandwidth)


def test_unknown_device_has_no_datasheet() -> None:
    assert lookup("CPU: AMD EPYC") is None
