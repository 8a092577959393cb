"""Engines as types: a new engine is one module plus one registry line; a new release of an
engine is one version range; unknown versions are refused listing the supported ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from planner.catalog import get_model
from planner.core.capacity import Pool
from planner.core.engines import ENGINES, Releases, get_engine, register
from planner.core.engines.base import Engine
from planner.core.engines.sglang import TokenPool
from planner.core.errors import FieldError
from planner.core.model import shape_from_config
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


# Which model runner vLLM 0.25-0.28 picks decides the batches in flight under PP with async
# scheduling (vllm/config/vllm.py, read in the 0.25.1-0.28.0 wheels): max_concurrent_batches is
# pp + 1 on the V2 runner, pp on V1 (V1 "does not fully support async scheduling with PP");
# use_v2_model_runner is True for a dense model (_is_default_v2_model_runner_model: `not
# model_config.is_moe`), for the MoE architectures in DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES
# (DeepseekV2ForCausalLM since 0.25.1), and False for other MoE models and for speculative
# methods outside eagle/eagle3/mtp/dflash/dspark (_get_v2_model_runner_unsupported_features).
# From 0.29 every model takes V2.
@pytest.mark.parametrize(
    ("version", "model", "spec", "batches"),
    [
        ("0.28", "mistralai/Mistral-7B-v0.1", None, 4),  # dense: V2
        ("0.26", "google/gemma-2-9b", None, 4),
        ("0.30", "mistralai/Mistral-7B-v0.1", "eagle", 4),
        ("0.28", "openai/gpt-oss-20b", None, 3),  # MoE, not listed: V1
        ("0.28", "deepseek-ai/DeepSeek-V2-Lite", None, 4),  # MoE, listed
        ("0.28", "deepseek-ai/DeepSeek-V3", None, 3),  # MoE, not listed
        ("0.29", "openai/gpt-oss-20b", None, 4),  # every model on V2
    ],
)
def test_vllm_runner_decides_the_batches_in_flight(
    version: str, model: str, spec: str | None, batches: int
) -> None:
    shape = shape_from_config(get_model(model).config)
    sched = get_engine("vllm", version).scheduling(512, True, None, 3, shape, spec)
    assert sched.concurrent_batches == batches
    assert sched.in_flight_tokens == batches * 512
    # Without PP both runners overlap two batches.
    assert (
        get_engine("vllm", version).scheduling(512, True, None, 1, shape, spec).concurrent_batches
        == 2
    )


# vLLM's own answers (tests/oracle/fixtures/vllm/0.29.0 and 0.24.0/vllm_draft_sizing*.json): a
# draft head under PP is refused before 0.30 (its ModelConfig took the target's pipeline size),
# n-gram with an explicit async_scheduling=true before 0.33 (and async is off by default).
def test_vllm_refuses_what_it_cannot_schedule_with_a_draft() -> None:
    shape = shape_from_config(get_model("mistralai/Mistral-7B-v0.1").config)
    old = get_engine("vllm", "0.28")
    with pytest.raises(FieldError) as exc:
        old.scheduling(512, True, None, 3, shape, "eagle")
    assert [p.field for p in exc.value.problems] == ["pipeline_parallel_size"]
    assert old.scheduling(512, True, None, 3, shape, "draft_model").concurrent_batches == 3
    with pytest.raises(FieldError) as exc:
        old.scheduling(512, True, None, 1, shape, "ngram")
    assert [p.field for p in exc.value.problems] == ["async_scheduling"]
    assert old.scheduling(512, None, None, 1, shape, "ngram").async_scheduling is False
    new = get_engine("vllm", "0.33")
    assert new.scheduling(512, None, None, 1, shape, "ngram").async_scheduling is True


# vLLM 0.28.0's own answer (tests/oracle/fixtures/vllm/0.28.0/vllm_sizing.json, case
# Mistral-7B-v0.1-kv_fp8_e5m2-dt_auto-bs16-tp1-pp3-40G-ctx12345-mnbt512-async): the sliding
# group (window 4,096) takes cdiv(min(4,095 + 4 batches x 512, 12,345), 16) + 1 = 385 blocks a
# request, and 309 requests are resident.
def test_vllm_0_28_dense_sliding_model_under_pp_reserves_pp_plus_one_batches() -> None:
    p = run(
        model="mistralai/Mistral-7B-v0.1", engine_version="0.28.0", kv_cache_dtype="fp8_e5m2",
        block_size=16, pipeline_parallel_size=3, kv_budget_bytes=40 * GiB,
        context_tokens=12345, max_num_batched_tokens=512, async_scheduling=True,
    )  # fmt: skip
    assert p.capacity is not None
    assert p.capacity.blocks_per_request == 385
    assert p.capacity.max_requests == 309


def test_vllm_only_settings_are_refused_for_other_engines() -> None:
    with pytest.raises(FieldError) as exc:
        run(model="meta-llama/Llama-3.1-8B", engine="sglang", async_scheduling=True)
    assert exc.value.problems[0].loc == ("async_scheduling",)
