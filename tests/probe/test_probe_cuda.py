"""CUDA backend pieces that run without a GPU: kernels on torch-CPU, backend choice, refusal.

The timed CUDA path itself needs a device: `bench/probe_gpu.sh` runs it on one.
"""

from __future__ import annotations

import pytest

from planner.probe import AttentionShape, ProbeUnavailable
from planner.probe.timing import Deadline

torch = pytest.importorskip("torch")

from planner.probe.cuda import (  # noqa: E402
    choose_backend,
    probe_cuda,
    reference_decode,
    sdpa_decode,
)

SHAPE = AttentionShape(num_q_heads=8, num_kv_heads=2, head_dim=32)


def _qkv(batch: int = 2, ctx: int = 40) -> tuple[object, object, object]:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(batch, SHAPE.num_q_heads, 1, SHAPE.head_dim, generator=g)
    # SDPA storage is (B, S, Hkv, d); the kernels see (B, Hkv, S, d) views.
    k = torch.randn(batch, ctx, SHAPE.num_kv_heads, SHAPE.head_dim, generator=g).transpose(1, 2)
    v = torch.randn(batch, ctx, SHAPE.num_kv_heads, SHAPE.head_dim, generator=g).transpose(1, 2)
    return q, k, v


def test_reference_matches_expanded_gqa_attention() -> None:
    q, k, v = _qkv()
    group = SHAPE.group_size
    ke = k.repeat_interleave(group, dim=1)  # query head h uses KV head h // group
    ve = v.repeat_interleave(group, dim=1)
    scores = (q @ ke.transpose(-1, -2)) / SHAPE.head_dim**0.5
    want = torch.softmax(scores, dim=-1) @ ve
    torch.testing.assert_close(reference_decode(torch, q, k, v), want, rtol=1e-5, atol=1e-5)


def test_sdpa_matches_reference() -> None:
    q, k, v = _qkv()
    torch.testing.assert_close(
        sdpa_decode(torch, q, k, v), reference_decode(torch, q, k, v), rtol=1e-4, atol=1e-4
    )


def test_choose_backend_names_what_ran() -> None:
    choice = choose_backend(torch, torch.device("cpu"), SHAPE, torch.float32)
    assert choice.name in {
        "sdpa-flash",
        "sdpa-efficient",
        "sdpa-cudnn",
        "sdpa-math",
        "matmul-reference",
    }
    if choice.name == "sdpa-math":
        assert "math_fallback" in choice.flags
    if choice.name == "matmul-reference":
        assert choice.sdpa_backend is None and "fallback" in choice.flags


def test_fp8_goes_to_the_flagged_reference() -> None:
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("torch without fp8")
    choice = choose_backend(torch, torch.device("cpu"), SHAPE, torch.float8_e4m3fn)
    assert choice.name == "matmul-reference"
    assert "not_representative" in choice.flags


def test_probe_cuda_refuses_without_a_device() -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(ProbeUnavailable, match="cpu"):
        probe_cuda(SHAPE, Deadline(1.0))
