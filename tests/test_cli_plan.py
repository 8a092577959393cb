"""`kvplan plan / models / gpus`: the contract JSON in and out, exit 2 naming the field."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()
LLAMA = "meta-llama/Llama-3.1-8B"


def plan_json(body: Any) -> tuple[int, str, str]:
    r = runner.invoke(app, ["plan", "--request", "-"], input=json.dumps(body))
    return r.exit_code, r.stdout, r.stderr


def test_request_roundtrip_answers_47() -> None:
    code, out, _ = plan_json(
        {
            "model": LLAMA,
            "kv_cache_dtype": "bf16",
            "context_tokens": 8192,
            "kv_budget_bytes": 48 << 30,
        }
    )
    assert code == 0
    assert json.loads(out)["capacity"]["max_requests"] == 47


def test_list_in_list_out() -> None:
    code, out, _ = plan_json(
        [{"model": LLAMA, "context_tokens": 1}, {"model": LLAMA, "context_tokens": 2}]
    )
    assert code == 0
    assert [p["requests"][0]["context_tokens"] for p in json.loads(out)] == [1, 2]


def test_list_is_all_or_nothing_with_indexed_locations() -> None:
    code, out, err = plan_json(
        [
            {"model": LLAMA},
            {"model": LLAMA},
            {"model": LLAMA, "tensor_parallel_size": 3},
            {"model": LLAMA, "tensor_parallel_size": True},
        ]
    )
    assert code == 2 and out == ""
    problem = json.loads(err)
    assert [e["field"] for e in problem["errors"]] == ["[3].tensor_parallel_size"]
    code, out, err = plan_json([{"model": LLAMA}, {"model": LLAMA, "tensor_parallel_size": 3}])
    assert code == 2 and out == ""
    assert json.loads(err)["errors"][0]["field"] == "[1].tensor_parallel_size"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            {
                "model": {
                    "num_hidden_layers": 2,
                    "num_attention_heads": 6,
                    "num_key_value_heads": 4,
                    "head_dim": 64,
                }
            },
            "model.num_key_value_heads",
        ),
        ({"model": LLAMA, "tensor_parallel_size": 3}, "tensor_parallel_size"),
        (
            {
                "model": "meta-llama/Llama-3.1-70B",
                "engine": "transformers",
                "tensor_parallel_size": 16,
            },
            "tensor_parallel_size",
        ),
        ({"model": LLAMA, "context_tokens": 0}, "context_tokens"),
        ({"model": LLAMA, "context_tokens": -5}, "context_tokens"),
        ({"model": LLAMA, "kv_budget_bytes": 10**30}, "kv_budget_bytes"),
        ({"model": LLAMA, "kv_cache_dtype": "fp7"}, "kv_cache_dtype"),
        ({"model": LLAMA, "engine": "tgi"}, "engine"),
        ({"model": LLAMA, "gpu": "H1000"}, "gpu"),
        ({"model": "no/such-model"}, "model"),
        ({"model": LLAMA, "colour": "blue"}, "colour"),
        ({"model": LLAMA, "tensor_parallel_size": True}, "tensor_parallel_size"),
        ({"model": LLAMA, "context_tokens": "8192"}, "context_tokens"),
        ({"model": LLAMA, "gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
    ],
)
def test_bad_input_exits_2_naming_the_field(body: dict[str, Any], field: str) -> None:
    code, out, err = plan_json(body)
    assert code == 2 and out == ""
    problem = json.loads(err)
    assert problem["status"] in (400, 422)
    assert any(e["field"] == field for e in problem["errors"]), problem


@pytest.mark.parametrize(
    "text",
    [
        '{"model": "x", "kv_budget_bytes": NaN}',
        '{"model": "x", "kv_budget_bytes": Infinity}',
        '{"model": "x"} trailing',
        "",
        "{",
    ],
)
def test_malformed_json_exits_2(text: str) -> None:
    r = runner.invoke(app, ["plan", "--request", "-"], input=text)
    assert r.exit_code == 2 and r.stdout == ""
    assert json.loads(r.stderr)["status"] == 400


def test_convenience_flags_table_and_json() -> None:
    r = runner.invoke(
        app, ["plan", "--model", LLAMA, "--context", "8192", "--budget", "48GiB", "--dtype", "bf16"]
    )
    assert r.exit_code == 0 and "47 requests fit" in r.stdout and "48.00x" in r.stdout
    r = runner.invoke(
        app,
        [
            "plan",
            "--model",
            LLAMA,
            "--context",
            "8192",
            "--budget",
            "48GiB",
            "--dtype",
            "fp8",
            "--json",
        ],
    )
    assert json.loads(r.stdout)["capacity"]["max_requests"] == 95
    r = runner.invoke(app, ["plan", "--model", LLAMA, "--budget", "48 parsecs", "--json"])
    assert r.exit_code == 2 and json.loads(r.stderr)["errors"][0]["field"] == "kv_budget_bytes"


def test_models_and_gpus_list_the_catalog() -> None:
    r = runner.invoke(app, ["models", "--json"])
    ids = {m["id"] for m in json.loads(r.stdout)}
    assert {LLAMA, "deepseek-ai/DeepSeek-V3", "openai/gpt-oss-120b"} <= ids
    r = runner.invoke(app, ["gpus"])
    assert "H100-SXM-80GB" in r.stdout


def test_no_traceback_from_the_real_entry_point() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "planner", "plan", "-r", "-"],
        input="[1, 2]",
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    json.loads(out.stderr)


def test_context_takes_k_suffix_and_budget_needs_a_unit() -> None:
    # "8k" = 8 × 1024 tokens, the convention `kvplan recommend --mix 70%:2k,...` already uses.
    r = runner.invoke(
        app,
        [
            "plan",
            "--model",
            LLAMA,
            "--context",
            "8k",
            "--budget",
            "48GiB",
            "--dtype",
            "bf16",
            "--json",
        ],
    )
    assert r.exit_code == 0 and json.loads(r.stdout)["capacity"]["context_tokens"] == 8192
    # "--budget 48" would be 48 bytes (0 requests fit): a forgotten unit, refused by name.
    r = runner.invoke(app, ["plan", "--model", LLAMA, "--budget", "48", "--json"])
    assert r.exit_code == 2 and r.stdout == ""
    assert json.loads(r.stderr)["errors"][0]["field"] == "kv_budget_bytes"
    # A bare byte count is still bytes (the API's unit): 48 GiB written out.
    r = runner.invoke(
        app,
        [
            "plan",
            "--model",
            LLAMA,
            "--budget",
            str(48 << 30),
            "--context",
            "8192",
            "--dtype",
            "bf16",
        ],
    )
    assert r.exit_code == 0 and "47 requests fit" in r.stdout
    r = runner.invoke(app, ["plan", "--model", LLAMA, "--context", "8x", "--json"])
    assert r.exit_code == 2 and json.loads(r.stderr)["errors"][0]["field"] == "context_tokens"


def test_missing_config_file_names_the_model_flag() -> None:
    r = runner.invoke(app, ["plan", "--model", "/nonexistent/config.json", "--json"])
    assert r.exit_code == 2 and r.stdout == ""
    assert json.loads(r.stderr)["errors"][0]["field"] == "model"


def test_summary_says_what_is_missing_and_counts_agree() -> None:
    r = runner.invoke(app, ["plan", "--model", LLAMA])
    assert r.exit_code == 0
    assert "the model's maximum" in r.stdout and "give --budget" in r.stdout
    # Llama-3.1-70B TP 1 on one H100: the weights alone exceed the GPU, so nothing fits.
    r = runner.invoke(
        app,
        [
            "plan",
            "--model",
            "meta-llama/Llama-3.1-70B",
            "--gpu",
            "H100-SXM-80GB",
            "--context",
            "8192",
        ],
    )
    assert r.exit_code == 3 and "0 requests fit" in r.stdout  # 3: it will not start
    assert "a batch of 1 request " in r.stdout


def test_weights_and_reserve_flags_are_the_request_fields() -> None:
    # The note for a pasted MoE config says "set weights_bytes"; the flags set exactly that.
    flags = [
        "plan",
        "--model",
        LLAMA,
        "--gpu",
        "H100-SXM-80GB",
        "--context",
        "8192",
        "--weights",
        "0",
        "--reserve",
        "2GiB",
        "--json",
    ]
    r = runner.invoke(app, flags)
    code, out, _ = plan_json(
        {
            "model": LLAMA,
            "gpu": "H100-SXM-80GB",
            "context_tokens": 8192,
            "weights_bytes": 0,
            "reserve_bytes": 2 << 30,
        }
    )
    assert r.exit_code == 0 and code == 0
    assert json.loads(r.stdout) == json.loads(out)
    r = runner.invoke(app, ["plan", "--model", LLAMA, "--weights", "lots", "--json"])
    assert r.exit_code == 2 and json.loads(r.stderr)["errors"][0]["field"] == "weights_bytes"


def test_cli_error_contract_loads_without_fastapi() -> None:
    """The CLI builds its problems with planner.contract, never the web stack."""
    import subprocess
    import sys

    code = (
        "import sys; import planner.cli.output, planner.contract.strict_json; "
        "bad = [m for m in ('fastapi', 'starlette', 'planner.api') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_speculative_config_flag_declares_the_draft(tmp_path: Any) -> None:
    # vllm#19996: Llama-3.1-8B + a 1-layer EAGLE head, 51.63 GiB, 131,072 tokens: 3.13x.
    head = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": 1,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
    }
    path = tmp_path / "eagle.json"
    path.write_text(json.dumps(head))
    spec = json.dumps({"method": "eagle", "model": str(path), "num_speculative_tokens": 3})
    r = runner.invoke(
        app,
        [
            "plan",
            "--model",
            LLAMA,
            "--context",
            "131072",
            "--budget",
            "51.63GiB",
            "--block-size",
            "16",
            "--speculative-config",
            spec,
            "--json",
        ],
    )
    assert r.exit_code == 0, r.stderr
    cap = json.loads(r.stdout)["capacity"]
    assert (cap["num_blocks"], cap["engine_reported_concurrency"]) == (25633, 3.13)


def test_speculative_config_flag_errors_name_the_field() -> None:
    r = runner.invoke(
        app,
        [
            "plan",
            "--model",
            LLAMA,
            "--context",
            "8192",
            "--budget",
            "40GiB",
            "--speculative-config",
            '{"method": "eagle"',
        ],
    )
    assert r.exit_code == 2
    assert "speculative_config" in r.stderr + r.stdout
    no_draft = '{"method": "eagle", "num_speculative_tokens": 2}'
    r = runner.invoke(
        app,
        [
            "plan",
            "--model",
            LLAMA,
            "--context",
            "8192",
            "--budget",
            "40GiB",
            "--speculative-config",
            no_draft,
        ],
    )
    assert r.exit_code == 2
    assert "speculative_config.model" in r.stderr + r.stdout


def test_sglang_state_pool_flags_plan_as_the_request_does() -> None:
    # --mamba-full-memory-ratio, --max-mamba-cache-size, --mamba-ssm-dtype set the API's fields
    # of the same names: the CLI answers what --request answers.
    body = {
        "model": "Qwen/Qwen3.5-27B",
        "engine": "sglang",
        "gpu": "H200-141GB",
        "context_tokens": 32768,
        "mamba_full_memory_ratio": 0.5,
        "max_mamba_cache_size": 64,
        "mamba_ssm_dtype": "bfloat16",
    }
    code, out, _ = plan_json(body)
    assert code == 0
    flags = ["plan", "--model", "Qwen/Qwen3.5-27B", "--engine", "sglang", "--gpu", "H200-141GB",
             "--context", "32k", "--mamba-full-memory-ratio", "0.5",
             "--max-mamba-cache-size", "64", "--mamba-ssm-dtype", "bfloat16", "--json"]  # fmt: skip
    r = runner.invoke(app, flags)
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["capacity"] == json.loads(out)["capacity"]
    assert json.loads(r.stdout)["capacity"]["state_pool_slots"] == 64


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--mamba-full-memory-ratio", "0"),
        ("--max-mamba-cache-size", "0"),
        ("--mamba-ssm-dtype", "fp8"),
    ],
)
def test_a_bad_state_pool_flag_is_named_by_its_flag(flag: str, value: str) -> None:
    base = ["plan", "--model", "Qwen/Qwen3.5-27B", "--engine", "sglang", "--budget", "48GiB"]
    r = runner.invoke(app, [*base, flag, value])
    assert r.exit_code == 2
    assert r.stderr.startswith(f"kvplan plan: {flag}: ")
    # With vLLM the flag is refused by its name too (an SGLang setting).
    r = runner.invoke(app, ["plan", "--model", LLAMA, "--budget", "48GiB", flag, "1"])
    if flag != "--mamba-ssm-dtype":
        assert r.exit_code == 2 and f"{flag} is an SGLang setting" in r.stderr
