"""`kvplan plan / recommend / reconcile` as people type them: errors name the flag (problem+json
with --json), units are read one way everywhere, and the workload flags build `requests`.

Expected numbers are worked by hand from Llama-3.1-8B's shape (seed 004: L=32, Hkv=8, d=128,
bf16 → 2·32·8·128·2 B = 128 KiB per token; vLLM blocks of 16 tokens = 2 MiB each).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()
LLAMA = "meta-llama/Llama-3.1-8B"
GiB = 1 << 30
TOKEN_BYTES = 2 * 32 * 8 * 128 * 2  # 131,072 B
BLOCK_BYTES = 16 * TOKEN_BYTES  # 2 MiB


def plan(*flags: str) -> Any:
    r = runner.invoke(app, ["plan", "--model", LLAMA, "--dtype", "bf16", *flags, "--json"])
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize(
    ("flags", "flag", "api_name"),
    [
        (["--tp", "3"], "--tp", "tensor_parallel_size"),
        (["--budget", "48 parsecs"], "--budget", "kv_budget_bytes"),
        (["--weights", "lots"], "--weights", "weights_bytes"),
        (["--context", "1,5"], "--context", "context_tokens"),
        (["--util", "1.5"], "--util", "gpu_memory_utilization"),
        (["--gpu", "H1000"], "--gpu", None),
        (["--mix", "8192x"], "--mix", None),
    ],
)
def test_errors_name_the_flag_not_the_api_field(
    flags: list[str], flag: str, api_name: str | None
) -> None:
    r = runner.invoke(app, ["plan", "--model", LLAMA, *flags])
    assert r.exit_code == 2 and r.stdout == ""
    first = r.stderr.splitlines()[0]
    assert first.startswith(f"kvplan plan: {flag}: "), r.stderr
    if api_name:
        assert api_name not in r.stderr
    assert "Traceback" not in r.stderr and not r.stderr.lstrip().startswith("{")
    # --json: the same problem as the API's, naming the API field.
    r = runner.invoke(app, ["plan", "--model", LLAMA, *flags, "--json"])
    assert r.exit_code == 2 and r.stdout == ""
    problem = json.loads(r.stderr)
    assert problem["status"] in (400, 422) and problem["errors"]
    if api_name:
        assert problem["errors"][0]["field"] == api_name


def test_a_config_error_names_the_flag_and_the_config_field(tmp_path: Any) -> None:
    config = tmp_path / "config.json"
    # No model_type: no config class whose defaults fill the field (LlamaConfig has 32 layers).
    config.write_text('{"hidden_size": 4096}')
    r = runner.invoke(app, ["plan", "--model", str(config)])
    assert r.exit_code == 2
    assert r.stderr.startswith("kvplan plan: --model num_hidden_layers: is required")


def test_tp_message_speaks_in_flags() -> None:
    r = runner.invoke(app, ["plan", "--model", LLAMA, "--tp", "3"])
    assert "divisible by --tp (3)" in r.stderr
    assert "sizes that work: [1, 2, 4, 8, 16, 32]" in r.stderr


@pytest.mark.parametrize("text", ["48GiB", "48 GiB", "48G", "48gib", str(48 * GiB)])
def test_budget_units(text: str) -> None:
    # 48 GiB / 2 MiB = 24,576 blocks; block 0 is vLLM's null block: (24,576 − 1) // 512 = 47.
    body = plan("--context", "8192", "--budget", text)
    assert body["capacity"]["kv_budget_bytes"] == 48 * GiB
    assert body["capacity"]["max_requests"] == 47


def test_decimal_gigabytes_are_decimal() -> None:
    assert plan("--context", "8k", "--budget", "80GB")["capacity"]["kv_budget_bytes"] == 80 * 10**9


def test_context_grouping_and_k() -> None:
    assert plan("--context", "8,192", "--budget", "48G")["capacity"]["context_tokens"] == 8192
    assert plan("--context", "8k", "--budget", "48G")["capacity"]["context_tokens"] == 8192


def test_budget_above_the_gpus_memory_is_refused() -> None:
    r = runner.invoke(
        app, ["plan", "--model", LLAMA, "--gpu", "H100-SXM-80GB", "--budget", "200GiB"]
    )
    assert r.exit_code == 2
    assert r.stderr.startswith("kvplan plan: --budget: 200.000 GiB is more than the H100-SXM-80GB")
    # Within the GPU it is the budget (the GPU still gives the bandwidth).
    body = plan("--gpu", "H100-SXM-80GB", "--budget", "48GiB", "--context", "8192")
    assert body["capacity"]["kv_budget_bytes"] == 48 * GiB and body["bounds"] is not None


def test_mix_builds_the_workload() -> None:
    # 10 × 8192 tokens = 10 × 512 blocks, 30 × 2048 = 30 × 128: 8,960 blocks = 17.5 GiB paged.
    body = plan("--mix", "8192x10, 2k x 30", "--budget", "48GiB")
    assert [(r["context_tokens"], r["count"]) for r in body["requests"]] == [(8192, 10), (2048, 30)]
    assert body["totals"]["paged_kv_bytes"] == 8960 * BLOCK_BYTES
    assert body["capacity"]["workload_fits"] is True
    # 16 GiB holds 8,192 blocks, one of them the null block: 8,191 < 8,960.
    assert (
        plan("--mix", "8192x10,2048x30", "--budget", "16GiB")["capacity"]["workload_fits"] is False
    )
    r = runner.invoke(
        app,
        [
            "plan",
            "--model",
            LLAMA,
            "--mix",
            "8192x10,2048x30",
            "--budget",
            "48GiB",
            "--dtype",
            "bf16",
        ],
    )
    assert r.exit_code == 0
    assert "workload         40 requests, 17.500 GiB paged → fits" in r.stdout
    assert "(the model's maximum; set --context)" not in r.stdout


def test_batch_is_n_requests_of_the_context() -> None:
    assert (
        plan("--context", "8192", "--batch", "47", "--budget", "48GiB")["capacity"]["workload_fits"]
        is True
    )
    assert (
        plan("--context", "8192", "--batch", "48", "--budget", "48GiB")["capacity"]["workload_fits"]
        is False
    )
    r = runner.invoke(app, ["plan", "--model", LLAMA, "--batch", "4"])
    assert r.exit_code == 2 and r.stderr.startswith("kvplan plan: --mix: --batch N needs --context")


def test_shared_prefix_is_stored_once() -> None:
    # vLLM shares whole blocks: a 4,096-token prefix (256 blocks) is stored once for 10
    # requests, so 9 copies of 4,096 tokens × 128 KiB are saved.
    body = plan("--context", "8192", "--batch", "10", "--prefix", "4k", "--budget", "48GiB")
    assert all(r["prefix_tokens"] == 4096 for r in body["requests"])
    assert body["totals"]["prefix_shared_bytes_saved"] == 9 * 4096 * TOKEN_BYTES
    r = runner.invoke(app, ["plan", "--model", LLAMA, "--context", "8k", "--prefix", "1k"])
    assert r.exit_code == 2 and "--prefix needs --batch or --mix" in r.stderr


def test_running_cap_is_said_beside_the_memory_figure() -> None:
    # H200 at 512 tokens: memory holds more than vLLM's default max_num_seqs (1,024) runs.
    r = runner.invoke(app, ["plan", "--model", LLAMA, "--gpu", "H200-141GB", "--context", "512"])
    assert r.exit_code == 0
    assert "fit in memory" in r.stdout
    assert "running          1,024 requests at once" in r.stdout


RECOMMEND = [
    "recommend",
    "--model",
    LLAMA,
    "--gpu",
    "H100-SXM-80GB",
    "--mix",
    "100%:2k",
    "--concurrency",
    "8",
]


def test_tpot_needs_a_unit() -> None:
    r = runner.invoke(app, [*RECOMMEND, "--tpot", "50"])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("kvplan recommend: --tpot: '50' has no unit")
    r = runner.invoke(app, [*RECOMMEND, "--tpot", "50", "--json"])
    assert json.loads(r.stderr)["errors"][0]["field"] == "tpot_seconds"
    r = runner.invoke(app, [*RECOMMEND, "--tpot", "50ms", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["tpot_seconds"] == pytest.approx(0.05)


def test_max_model_len_takes_k() -> None:
    with_k = runner.invoke(app, [*RECOMMEND, "--max-model-len", "32k", "--json"])
    plain = runner.invoke(app, [*RECOMMEND, "--max-model-len", "32768", "--json"])
    assert with_k.exit_code == 0 and with_k.stdout == plain.stdout
    assert json.loads(with_k.stdout)["settings"]["max_model_len"] == 32768
    r = runner.invoke(app, [*RECOMMEND, "--max-model-len", "lots"])
    assert r.exit_code == 2 and r.stderr.startswith("kvplan recommend: --max-model-len: ")


def test_reconcile_errors_name_its_flags(tmp_path: Any) -> None:
    log = tmp_path / "empty.log"
    log.write_text("")
    r = runner.invoke(app, ["reconcile", str(log)])
    assert r.exit_code == 2 and r.stderr.startswith("kvplan reconcile: LOGFILE: ")
    r = runner.invoke(app, ["reconcile", str(log), "--max-model-len", "32x"])
    assert r.exit_code == 2 and r.stderr.startswith("kvplan reconcile: --max-model-len: ")


def test_engine_version_flag_is_the_request_field() -> None:
    old = plan("--context", "8192", "--budget", "48GiB", "--engine-version", "0.19")
    assert old["engine_version"] == "0.19"
    r = runner.invoke(app, ["plan", "--model", LLAMA, "--engine-version", "0.0.1"])
    assert r.exit_code == 2 and r.stderr.startswith("kvplan plan: --engine-version: ")
