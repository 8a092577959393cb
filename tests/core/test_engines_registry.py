"""Engines as types: a new engine is one module plus one registry line; a new release of an
engine is one version range; unknown versions are refused listing the supported ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from planner.core.capacity import Pool
from planner.core.engines import ENGINES, Releases, get_engine, register
from planner.core.engines.base import Engine
from planner.core.engines.sglang import TokenPool
from planner.core.errors import FieldError
from planner.core.specs import LayerSpec, WindowPolicy
from planner.core.units import KVDtype
from tests.core.conftest import GiB, run


@dataclass(frozen=True)
class ToyEngine(Engine):
    """A fifth engine: a token pool with no null block, 4 tokens per page."""

    name: ClassVar[str] = "toy"
    label: ClassVar[str] = "Toy"
    releases: ClassVar[Releases] = Releases(first=(1, 0, 0), last=(1, 2, 0), default=(1, 2, 0))
    default_block_size: ClassVar[int] = 4
    memory_base = "total"
    memory_fraction_flag: ClassVar[str] = "--fraction"
    running_cap_flag: ClassVar[str] = "--max-batch"

    def default_memory_utilization(self) -> float:
        return 0.5

    def stage_pool(
        self,
        stack: tuple[tuple[LayerSpec, int], ...],
        dtype: KVDtype,
        block_size: int,
        policy: WindowPolicy,
        budget_bytes: int,
    ) -> Pool:
        per_token = sum(n * s.bytes_per_token(dtype) for s, n in stack)
        pages = budget_bytes // (per_token * block_size)
        return TokenPool((), pages, 0, block_size, stack, dtype, "full_length", budget_bytes)


@pytest.fixture
def toy() -> object:
    register(ToyEngine)
    yield ToyEngine
    ENGINES.pop("toy")


def test_a_fifth_engine_is_one_class_and_one_registry_line(toy: object) -> None:
    # Llama-3.1-8B: 131,072 B per token; 1 GiB holds 8,192 tokens = 2,048 pages of 4; a request
    # of 8,192 tokens needs 2,048 pages: exactly 1 fits (no null block).
    p = run(model="meta-llama/Llama-3.1-8B", engine="toy", context_tokens=8192, kv_budget_bytes=GiB)
    assert p.engine == "toy" and p.engine_version == "1.2" and p.block_size == 4
    assert p.capacity is not None
    assert (p.capacity.num_blocks, p.capacity.max_requests) == (2048, 1)
    with pytest.raises(FieldError) as exc:
        run(model="meta-llama/Llama-3.1-8B", engine="toy", engine_version="2.0")
    assert exc.value.problems[0].loc == ("engine_version",)
    assert "1.0 to 1.2" in exc.value.problems[0].msg


def test_unknown_versions_are_refused_with_the_supported_range() -> None:
    with pytest.raises(FieldError) as exc:
        run(model="meta-llama/Llama-3.1-8B", engine_version="0.8.5")
    assert exc.value.problems[0].loc == ("engine_version",)
    assert "0.9 to 0.33" in exc.value.problems[0].msg


@pytest.mark.parametrize(
    ("text", "echo"), [("0.19", "0.19"), ("0.19.0", "0.19"), ("v0.10.1", "0.10.1"), (None, "0.33")]
)
def test_any_release_from_0_9_to_0_33_is_accepted(text: str | None, echo: str) -> None:
    p = run(model="meta-llama/Llama-3.1-8B", engine_version=text, kv_budget_bytes=GiB,
            context_tokens=1024)  # fmt: skip
    assert p.engine_version == echo


def test_release_rules_switch_where_vllm_changed_them() -> None:
    # Async scheduling default from 0.14 (PR #27614); in-flight window admission from 0.26;
    # gpu_memory_utilization 0.92 from 0.20 (vllm/config/cache.py).
    assert get_engine("vllm", "0.13").scheduling(None, None, None, 1).async_scheduling is False
    assert get_engine("vllm", "0.14").scheduling(None, None, None, 1).async_scheduling is True
    assert get_engine("vllm", "0.25").scheduling(8192, None, None, 1).in_flight_tokens == 8192
    assert get_engine("vllm", "0.26").scheduling(8192, None, None, 1).in_flight_tokens == 16384
    assert get_engine("vllm", "0.19").default_memory_utilization() == 0.9
    assert get_engine("vllm", "0.20").default_memory_utilization() == 0.92


def test_vllm_only_settings_are_refused_for_other_engines() -> None:
    with pytest.raises(FieldError) as exc:
        run(model="meta-llama/Llama-3.1-8B", engine="sglang", async_scheduling=True)
    assert exc.value.problems[0].loc == ("async_scheduling",)
