"""`kvplan reconcile` and `kvplan recommend`: readable output, --json, exit 2 with problem+json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app as kvplan
from planner.cli.recommend import parse_mix, parse_seconds
from planner.core.errors import FieldError
from tests.core.test_logparse import load_fixtures

runner = CliRunner()
FIXTURES = {f["id"]: f for f in load_fixtures()}


@pytest.fixture
def granite_log(tmp_path: Path) -> Path:
    path = tmp_path / "startup.log"
    lines = FIXTURES["vllm-v1-granite4-micro-fp8-l40s-ibmcodeengine"]["log_lines"]
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


@pytest.fixture
def granite_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "_name_or_path": "ibm-granite/granite-4.0-micro",
                "model_type": "granite",
                "num_hidden_layers": 40,
                "num_attention_heads": 40,
                "num_key_value_heads": 8,
                "hidden_size": 2560,
                "torch_dtype": "bfloat16",
                "max_position_embeddings": 131072,
            }
        )
    )
    return path


def test_reconcile_human(granite_log: Path, granite_config: Path) -> None:
    result = runner.invoke(
        kvplan,
        [
            "reconcile",
            str(granite_log),
            "--model",
            str(granite_config),
            "--gpu",
            "L40S-48GB",
            "--util",
            "0.9",
        ],
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    # Fixture: 28,950 blocks -> 463,200 tokens, logged 463,136, window 28,946..28,954.
    assert "463,136" in out and "463,200" in out and "consistent" in out
    assert "28,946..28,954" in out
    assert "reserve_bytes" in out


def test_reconcile_json(granite_log: Path, granite_config: Path) -> None:
    result = runner.invoke(
        kvplan, ["reconcile", str(granite_log), "--model", str(granite_config), "--json"]
    )
    assert result.exit_code == 0
    body = json.loads(result.stdout)
    assert body["engine"] == "vllm" and body["summary"]["consistent"] == 1


@pytest.mark.parametrize(
    ("args", "content", "field"),
    [
        (["--engine", "sglang"], None, "engine"),
        ([], b"", "log"),
        ([], b"\x00\x01\x02binary\xff\xfe", "log"),
        ([], b"x" * ((2 << 20) + 1), "log"),
        (
            ["--tp", "3", "--model", "meta-llama/Llama-3.1-8B"],
            None,
            "settings.tensor_parallel_size",
        ),
        (["--engine", "llama.cpp"], None, "engine"),
    ],
    ids=["wrong-engine", "empty", "binary", "too-big", "bad-tp", "unknown-engine"],
)
def test_reconcile_bad_input_exits_2(
    granite_log: Path, args: list[str], content: bytes | None, field: str
) -> None:
    if content is not None:
        granite_log.write_bytes(content)
    result = runner.invoke(kvplan, ["reconcile", str(granite_log), *args, "--json"])
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and "Traceback" not in result.stderr
    problem = json.loads(result.stderr)
    assert field in [e["field"] for e in problem["errors"]]


def test_reconcile_missing_file() -> None:
    result = runner.invoke(kvplan, ["reconcile", "/no/such/file.log", "--json"])
    assert result.exit_code == 2
    assert "no such file" in json.loads(result.stderr)["detail"]


def test_recommend_human_and_json() -> None:
    args = [
        "recommend",
        "--model",
        "meta-llama/Llama-3.1-8B",
        "--gpu",
        "H100-SXM-80GB",
        "--mix",
        "70%:2k,20%:8k,10%:32k",
        "--concurrency",
        "32",
        "--tpot",
        "50ms",
    ]
    result = runner.invoke(kvplan, args)
    assert result.exit_code == 0, result.output
    assert "vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 1" in result.stdout
    body = json.loads(runner.invoke(kvplan, [*args, "--json"]).stdout)
    assert body["feasible"] is True and body["settings"]["max_num_seqs"] == 32


def test_recommend_impossible_exits_0_and_says_why() -> None:
    result = runner.invoke(
        kvplan,
        [
            "recommend",
            "--model",
            "meta-llama/Llama-3.1-405B",
            "--gpu",
            "H100-SXM-80GB",
            "--gpus",
            "4",
            "--max-model-len",
            "131072",
            "--concurrency",
            "4",
        ],
    )
    assert result.exit_code == 0
    assert "binding    weights_exceed_memory" in result.stdout
    assert "nearest    gpu_count" in result.stdout


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--mix", "70%2k"], "context_mix"),
        (["--mix", "50%:2k,40%:8k"], "context_mix"),
        (["--tpot", "fast"], "tpot_seconds"),
        (["--engine", "transformers"], "engine"),
    ],
)
def test_recommend_bad_input_exits_2(args: list[str], field: str) -> None:
    base = [
        "recommend",
        "--model",
        "meta-llama/Llama-3.1-8B",
        "--gpu",
        "L4-24GB",
        "--concurrency",
        "4",
        "--mix",
        "100%:2k",
    ]
    result = runner.invoke(kvplan, [*base, *args, "--json"])
    assert result.exit_code == 2, result.output
    problem = json.loads(result.stderr)
    assert field in [e["field"] for e in problem["errors"]] or field in problem["detail"]


def test_parsers() -> None:
    assert parse_mix("70%:2k,20%:8k,10%:32k") == [
        {"context_tokens": 2048, "share": 0.7},
        {"context_tokens": 8192, "share": 0.2},
        {"context_tokens": 32768, "share": 0.1},
    ]
    assert parse_mix("0.5:1000, 0.5@3000") == [
        {"context_tokens": 1000, "share": 0.5},
        {"context_tokens": 3000, "share": 0.5},
    ]
    assert parse_seconds("50ms") == pytest.approx(0.05)
    assert parse_seconds("0.2s") == pytest.approx(0.2)
    with pytest.raises(FieldError):
        parse_seconds("0.2")  # 0.2 what? a duration needs its unit
    with pytest.raises(FieldError):
        parse_mix("a:b")
