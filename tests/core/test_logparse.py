"""Start-up log parsing: every real fixture line, and the noise real logs carry.

Fixtures: tests/fixtures/engine_logs.jsonl (a copy of shared/research/engine_logs.jsonl: real
excerpts from public issue threads, with their sources and hand recomputations).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.core.errors import FieldError
from planner.core.logs import MAX_LOG_BYTES, MAX_LOG_LINES, half_unit, to_int
from planner.core.logs.parse import parse_log

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "engine_logs.jsonl"
ENGINE = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm"}


def load_fixtures() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURES.read_text("utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("fixture", load_fixtures(), ids=lambda f: f["id"])
def test_every_fixture_line_is_recognised(fixture: dict[str, Any]) -> None:
    parsed = parse_log("\n".join(fixture["log_lines"]))
    assert parsed.detected_engine == ENGINE[fixture["engine"]]
    assert len(parsed.facts) == len(fixture["log_lines"])


def test_fixture_count() -> None:
    assert len(load_fixtures()) == 21


def test_values_as_printed() -> None:
    log = (
        "(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [gpu_worker.py:298] Available KV cache "
        "memory: 6.51 GiB\n"
        "(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [kv_cache_utils.py:864] GPU KV cache "
        "size: 42,656 tokens\n"
        "(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [kv_cache_utils.py:868] Maximum "
        "concurrency for 32,768 tokens per request: 1.30x"
    )
    parsed = parse_log(log)
    avail, tokens, conc = parsed.facts
    assert avail.values == {"gib": "6.51"}
    assert avail.source == "EngineCore_DP0 pid=1133552"
    assert to_int(tokens.values["tokens"]) == 42656
    assert conc.values == {"context_tokens": "32,768", "x": "1.30"}
    assert [f.line_no for f in parsed.facts] == [1, 2, 3]


def test_ansi_colours_timestamps_and_ranks() -> None:
    log = (
        "\x1b[1;36m(Worker_TP1 pid=77)\x1b[0;0m INFO 11-06 10:51:48 [gpu_worker.py:349] "
        "Available KV cache memory: 2.30 GiB\r\n"
        "#033[1;36m(Worker_TP0 pid=76)#033[0;0m INFO Available KV cache memory: 2.29 GiB\n"
        "[2025-03-08 12:29:21 DP0 TP3 EP0] KV Cache is allocated. #tokens: 46611, "
        "K size: 1.42 GB, V size: 1.42 GB\n"
        "[12/20/2025-04:21:51] [TRT-LLM] [RANK 0] [I] [MemUsageChange] Allocated 41.11 GiB for "
        "max tokens (524288)\n"
        "some unrelated line with numbers 1,234 and GiB\n"
    )
    parsed = parse_log(log)
    kinds = [(f.kind, f.source) for f in parsed.facts]
    assert kinds == [
        ("available_kv", "Worker_TP1 pid=77"),
        ("available_kv", "Worker_TP0 pid=76"),
        ("kv_allocated", "DP0 TP3 EP0"),
        ("allocated", "RANK 0"),
    ]
    assert parsed.facts[0].values["gib"] == "2.30"
    assert parsed.facts[3].values == {"gib": "41.11", "tokens": "524288"}


def test_v0_multi_line_profile_and_cuda_blocks() -> None:
    # Format of vLLM v0 worker.py (found in public logs): three lines, then "# cuda blocks".
    log = (
        "INFO 08-06 01:39:21 model_runner.py:1115] Loading model weights took 7.1694 GB\n"
        "INFO 08-06 01:39:22 worker.py:267] the current vLLM instance can use total_gpu_memory "
        "(39.56GiB) x gpu_memory_utilization (0.90) = 35.60GiB\n"
        "INFO 08-06 01:39:22 worker.py:267] model weights take 7.17GiB; non_torch_memory takes "
        "0.01GiB; PyTorch activation peak memory takes 1.83GiB; the rest of the memory reserved "
        "for KV Cache is 26.60GiB.\n"
        "INFO 08-06 01:39:23 executor_base.py:111] # cuda blocks: 13618, # CPU blocks: 2048\n"
    )
    parsed = parse_log(log)
    by_kind = {f.kind: f.values for f in parsed.facts}
    assert by_kind["v0_instance_memory"] == {
        "total_gib": "39.56",
        "utilization": "0.90",
        "requested_gib": "35.60",
    }
    assert by_kind["v0_breakdown"]["kv_gib"] == "26.60"
    assert by_kind["num_blocks"] == {"gpu_blocks": "13618", "cpu_blocks": "2048"}


def test_argument_dumps_keep_only_planning_keys() -> None:
    log = (
        "INFO [utils.py:328] non-default args: {'model': 'Qwen/Qwen3-14B', 'max_model_len': "
        "32768, 'tensor_parallel_size': 2, 'api_key': ['sk-secret-value'], 'kv_cache_dtype': "
        "'fp8', 'gpu_memory_utilization': 0.85}\n"
        "GPU KV cache size: 1,000 tokens\n"
    )
    parsed = parse_log(log)
    assert parsed.args == {
        "model": "Qwen/Qwen3-14B",
        "max_model_len": "32768",
        "tensor_parallel_size": "2",
        "kv_cache_dtype": "fp8",
        "gpu_memory_utilization": "0.85",
    }
    assert all("sk-secret" not in f.text for f in parsed.facts)


def test_version_line() -> None:
    log = (
        "INFO 11-14 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: "
        "model='ibm-granite/granite-4.0-micro', max_seq_len=131072, tensor_parallel_size=1\n"
        "Available KV cache memory: 35.34 GiB\n"
    )
    parsed = parse_log(log)
    assert parsed.version == "0.11.0"
    assert parsed.args["max_seq_len"] == "131072"


def test_half_unit() -> None:
    assert half_unit("6.51") == pytest.approx(0.005)
    assert half_unit("24.0") == pytest.approx(0.05)
    assert half_unit("8") == 0.5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("  \n\t\n", "empty"),
        ("abc\x00def", "binary"),
        ("".join(chr(i % 32) for i in range(1, 4000)), "binary"),
        ("x" * (MAX_LOG_BYTES + 1), "larger than"),
        ("a\n" * (MAX_LOG_LINES + 1), "lines"),
    ],
    ids=["empty", "blank", "nul", "control-bytes", "too-big", "too-many-lines"],
)
def test_bad_text_is_a_field_error(text: str, message: str) -> None:
    with pytest.raises(FieldError) as info:
        parse_log(text)
    assert info.value.problems[0].field == "log"
    assert message in info.value.detail


@pytest.mark.parametrize(
    "line",
    [
        "GPU KV cache size: " + "1," * 400_000 + " tokens",
        "Maximum concurrency for " + "9" * 500_000 + " tokens per request: 1.0x",
        "KV Cache is allocated. " + "#tokens: " * 100_000,
        "Add " * 200_000 + "padding layers, may waste at most 1%",
        "non-default args: {" + "'a': 1, " * 100_000 + "}",
        "with config: " + "a=b, " * 200_000,
        "\x1b[" + "1;" * 300_000,
    ],
    ids=["separators", "digits", "labels", "back-search", "py-args", "eq-args", "ansi"],
)
def test_adversarial_lines_finish(line: str) -> None:
    # Each pattern is anchored with bounded repetitions: these finish in linear time (a
    # backtracking regex would not return). Long lines are cut to MAX_LINE_CHARS.
    parsed = parse_log(line)
    assert parsed.lines_read == 1
