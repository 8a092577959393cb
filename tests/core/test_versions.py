"""Engine versions as logs and users write them: pre-releases parsed and ordered before their
final release, and rules keyed by the release that first had them."""

from __future__ import annotations

import pytest

from planner.core.engines import get_engine
from planner.core.engines.versions import parse_version, release_order, since, version_text


@pytest.mark.parametrize(
    ("text", "echo"),
    [
        ("0.19", "0.19"),
        ("v0.10.1", "0.10.1"),
        ("0.20.1rc1", "0.20.1rc1"),
        ("0.11.0rc2", "0.11.0rc2"),
        # vllm#34076's and the spark#396 log's version lines (tests/fixtures/budget_logs.jsonl).
        ("0.15.2rc1.dev93+g11a4c9d30", "0.15.2rc1"),
        ("0.29.1rc1.dev17+gd2d649e67", "0.29.1rc1"),
        ("0.10.1.1", "0.10.1"),  # a rebuild of 0.10.1 on the package index
        # vllm#19996's main-branch build: its log prints 0.9.2's source lines (gpu_worker.py:232,
        # kv_cache_utils.py:716/720, tests/fixtures/engine_logs_drafts.jsonl), so it is no
        # pre-release of 0.9.1.
        ("0.9.1.dev705+g01220ce89", "0.9.1"),
    ],
)
def test_versions_keep_their_pre_release(text: str, echo: str) -> None:
    v = parse_version(text)
    assert v is not None and version_text(v) == echo


def test_a_pre_release_comes_before_its_final_release() -> None:
    order = ["0.20.0", "0.20.1a1", "0.20.1b2", "0.20.1rc1", "0.20.1rc2", "0.20.1"]
    keys = [release_order(v) for v in map(parse_version, order) if v is not None]
    assert keys == sorted(keys) and len(set(keys)) == len(order)


def test_patch_rules_start_at_the_final_release_and_minor_rules_at_the_line() -> None:
    rc1 = parse_version("0.20.1rc1")
    assert rc1 is not None
    assert not since(rc1, (0, 20, 1)) and since(rc1, (0, 20))
    # An x.y.0 pre-release is cut from the x.y release branch: it has that line's rules.
    assert since(parse_version("0.26.0rc1") or (), (0, 26))


def test_gpu_kv_cache_size_formula_changed_between_0_20_1rc1_and_0_20_1() -> None:
    # "GPU KV cache size: N tokens": num_blocks // groups × block_size in 0.20.0's wheel
    # (v1/core/kv_cache_utils.py) and, as real 0.20.1rc1 logs print it, in that pre-release;
    # int(max_concurrency × max_model_len) in 0.20.1 and 0.20.2's wheel.
    assert [get_engine("vllm", v).tokens_from_concurrency for v in (
        "0.20.0", "0.20.1rc1", "0.20.1", "0.20.2rc1"
    )] == [False, False, True, True]  # fmt: skip
