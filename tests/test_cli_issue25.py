"""Issue 25's CLI answers, each pinned to its source (a log, the engine's code, arithmetic from a
rule); the budget-beside-a-GPU rule has its own file (tests/api/test_explicit_budget.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()
GiB = 1 << 30
ROOT = Path(__file__).resolve().parents[1]


def record(suffix: str) -> dict[str, Any]:
    for line in (ROOT / "tests/fixtures/budget_logs.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["id"].endswith(suffix):
            return dict(rec)
    raise KeyError(suffix)


def plan_json(*flags: str) -> Any:
    r = runner.invoke(app, ["plan", *flags, "--json"])
    assert r.exit_code in (0, 3), r.stderr
    return json.loads(r.stdout)


# -- item 3: gpt-oss-120b on one H100 ----------------------------------------------------------


def test_gpt_oss_120b_weights_on_one_h100_are_the_logged_load() -> None:
    # vllm#23278 (vLLM 0.10.1, one H100, defaults): "Model loading took 65.9651 GiB" and
    # "Available KV cache memory: -2.14 GiB", then "EngineCore failed to start".
    rec = record("vllm23278")
    logged_weights = float(rec["parsed"]["weights_gib"]) * GiB
    logged_available = float(rec["parsed"]["available_kv_gib"]) * GiB
    body = plan_json("--model", "openai/gpt-oss-120b", "--gpu", "H100-SXM-80GB",
                     "--engine-version", "0.10.1")  # fmt: skip
    cap = body["capacity"]
    weights = cap["budget"]["weights_bytes_per_rank"]
    assert abs(weights - logged_weights) / logged_weights < 0.005  # the checkpoint is 7.8 % less
    assert abs(cap["budget"]["engine_available_bytes"] - logged_available) < GiB // 4
    assert cap["engine_starts"] is False and rec["parsed"]["started"] is False
    assert "budget.mxfp4_loaded" in [n["code"] for n in body["notes_detail"]]


def test_gpt_oss_120b_on_one_h100_does_not_start_by_default() -> None:
    # The same weights at the default release: what README's "will it start" row says.
    cap = plan_json("--model", "openai/gpt-oss-120b", "--gpu", "H100-SXM-80GB")["capacity"]
    assert cap["engine_starts"] is False
    assert abs(cap["budget"]["weights_bytes_per_rank"] - 65.9651 * GiB) < 0.005 * 65.9651 * GiB


def test_given_weights_are_taken_as_given() -> None:
    cap = plan_json("--model", "openai/gpt-oss-120b", "--gpu", "H100-SXM-80GB", "--weights",
                    "60GiB")["capacity"]  # fmt: skip
    assert cap["budget"]["weights_bytes_per_rank"] == 60 * GiB


# -- item 5: labels that agree with the bytes -------------------------------------------------


def eagle_flags(tmp: Path) -> list[str]:
    from tests.core.test_reconcile_draft import EAGLE_HEAD

    path = tmp / "eagle.json"
    path.write_text(json.dumps(EAGLE_HEAD))
    spec = {"method": "eagle", "model": str(path), "num_speculative_tokens": 3}
    return ["--model", "meta-llama/Llama-3.1-8B", "--dtype", "bf16", "--context", "8k",
            "--gpu", "H100-SXM-80GB", "--budget", "40GiB",
            "--speculative-config", json.dumps(spec)]  # fmt: skip


def test_per_gpu_label_counts_the_draft_layer(tmp_path: Path) -> None:
    # The EAGLE head is one Llama layer with the target's 8 KV heads × 128: 33 layers' bytes,
    # 2 × 33 × 8 × 128 × 2 B = 135,168 B per token.
    flags = eagle_flags(tmp_path)
    body = plan_json(*flags)
    assert body["per_rank"]["kv_bytes_per_token"] == 2 * 33 * 8 * 128 * 2
    assert (body["per_rank"]["kv_layers"], body["per_rank"]["draft_kv_layers"]) == (33, 1)
    human = runner.invoke(app, ["plan", *flags]).stdout
    assert "per GPU          8 KV heads × 33 layers (32 + 1 draft) = 135,168 B/token" in human


def test_per_gpu_label_counts_the_attention_layers_of_a_hybrid() -> None:
    # Qwen3-Next: 48 layers, every 4th full attention (full_attention_interval 4) → 12 layers
    # with 2 KV heads × 256 per token; the 36 gated-delta-net layers hold a state per request.
    from planner.catalog import get_model

    config = get_model("Qwen/Qwen3-Next-80B-A3B-Thinking").config
    layers = config["num_hidden_layers"] // config["full_attention_interval"]
    assert layers == 12
    flags = ["--model", "Qwen/Qwen3-Next-80B-A3B-Thinking", "--context", "32k", "--budget",
             "40GiB"]  # fmt: skip
    body = plan_json(*flags)
    per_token = 2 * layers * config["num_key_value_heads"] * config["head_dim"] * 2
    assert body["per_rank"]["kv_bytes_per_token"] == per_token
    assert body["per_rank"]["kv_layers"] == layers
    human = runner.invoke(app, ["plan", *flags]).stdout
    assert f"2 KV heads × 12 layers (the 12 of the 48 model layers that hold KV per token) = " \
        f"{per_token:,} B/token" in human  # fmt: skip


def test_cli_decode_floor_is_the_speculative_step_of_the_json(tmp_path: Path) -> None:
    flags = eagle_flags(tmp_path)
    spec = plan_json(*flags)["bounds"]["speculative"]
    human = runner.invoke(app, ["plan", *flags]).stdout
    line = next(x for x in human.splitlines() if x.startswith("decode floor"))
    assert line.startswith(f"decode floor     {spec['step_seconds'] * 1e3:.3f} ms/step")
    assert f"3 draft steps {spec['draft_read_seconds'] * 1e3:.3f} ms" in line


# -- item 6: an exit status for "computed, but will not start" --------------------------------


def test_exit_status_tells_starts_bad_input_and_will_not_start_apart(tmp_path: Path) -> None:
    llama = ["plan", "--model", "meta-llama/Llama-3.1-8B", "--context", "8k"]
    assert runner.invoke(app, [*llama, "--budget", "20GiB"]).exit_code == 0
    assert runner.invoke(app, [*llama, "--budget", "20 parsecs"]).exit_code == 2
    # gpt-oss-120b on one H100 (vllm#23278: "EngineCore failed to start"): printed, then 3.
    r = runner.invoke(app, ["plan", "--model", "openai/gpt-oss-120b", "--gpu", "H100-SXM-80GB"])
    assert r.exit_code == 3 and "will it start    NO" in r.stdout
    r = runner.invoke(app, ["plan", "--model", "openai/gpt-oss-120b", "--gpu", "H100-SXM-80GB",
                            "--json"])  # fmt: skip
    assert r.exit_code == 3 and json.loads(r.stdout)["capacity"]["engine_starts"] is False
    # A --request list: 3 when any plan will not start.
    body = tmp_path / "body.json"
    body.write_text(json.dumps([
        {"model": "meta-llama/Llama-3.1-8B", "context_tokens": 8192, "kv_budget_bytes": 20 * GiB},
        {"model": "openai/gpt-oss-120b", "gpu": "H100-SXM-80GB"},
    ]))  # fmt: skip
    assert runner.invoke(app, ["plan", "--request", str(body)]).exit_code == 3
    body.write_text(json.dumps([{"model": "meta-llama/Llama-3.1-8B", "context_tokens": 8192,
                                 "kv_budget_bytes": 20 * GiB}]))  # fmt: skip
    assert runner.invoke(app, ["plan", "--request", str(body)]).exit_code == 0


def test_exit_status_is_documented() -> None:
    from planner.cli.output import EXIT_WONT_START

    help_text = " ".join(runner.invoke(app, ["plan", "--help"]).stdout.split())
    assert f"{EXIT_WONT_START} planned, but the engine will not start" in help_text
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"and {EXIT_WONT_START} when it planned but the engine will not start" in readme


# -- smaller: the --help example works as written ---------------------------------------------


def test_every_help_example_runs_as_written() -> None:
    import shlex

    help_text = runner.invoke(app, ["plan", "--help"]).stdout
    examples = [
        line.strip(" │").strip() for line in help_text.splitlines() if "kvplan plan --" in line
    ]
    assert len(examples) == 3
    for example in examples:
        args = shlex.split(example)[1:]  # as a shell splits it, without the program name
        if "./config.json" in args:
            continue  # needs a file of the reader's
        r = runner.invoke(app, [*args, "--json"])
        assert r.exit_code in (0, 3), (example, r.stderr)


# -- item 9: the CLI's own wording, and "did you mean" for model ids ---------------------------


def test_context_beyond_the_maximum_names_the_cli_flag_and_the_flag_works() -> None:
    # vLLM refuses max_model_len above the derived maximum unless VLLM_ALLOW_LONG_MAX_MODEL_LEN
    # (vllm/config/model.py `_get_and_verify_max_len`); the CLI has the flag that plans it.
    flags = ["plan", "--model", "meta-llama/Llama-3.1-8B", "--context", "2M", "--budget", "40GiB"]
    r = runner.invoke(app, flags)
    assert r.exit_code == 2
    assert "or set --allow-long-max-model-len" in r.stderr
    assert "allow_long_max_model_len" not in r.stderr
    r = runner.invoke(app, [*flags, "--allow-long-max-model-len", "--json"])
    assert r.exit_code in (0, 3), r.stderr
    assert json.loads(r.stdout)["capacity"]["context_tokens"] == 2 * 1024 * 1024


def test_an_unknown_model_is_told_the_cli_way(monkeypatch: Any) -> None:
    monkeypatch.setenv("KVPLAN_HUB_ENABLED", "false")
    r = runner.invoke(app, ["plan", "--model", "foo", "--budget", "4GiB"])
    assert r.exit_code == 2
    assert "--model ./config.json" in r.stderr and "as `model`" not in r.stderr
    assert "GET /api/v1/models" not in r.stderr
    # With --json it stays the API's problem document, word for word.
    r = runner.invoke(app, ["plan", "--model", "foo", "--budget", "4GiB", "--json"])
    assert "as `model`" in json.loads(r.stderr)["errors"][0]["msg"]


def test_model_suggestions_reach_the_cli_when_the_hub_cannot_answer(monkeypatch: Any) -> None:
    # A Hub-shaped id one character off a catalog id: with the Hub off, the catalog still says
    # what was probably meant (planner/catalog/suggest.py).
    monkeypatch.setenv("KVPLAN_HUB_ENABLED", "false")
    r = runner.invoke(app, ["plan", "--model", "meta-llama/Llama-3.1-8X", "--budget", "4GiB"])
    assert r.exit_code == 2
    assert "Did you mean: meta-llama/Llama-3.1-8B" in r.stderr


def test_one_token_blocks_read_in_the_singular() -> None:
    out = runner.invoke(app, ["plan", "--model", "meta-llama/Llama-3.1-8B", "--engine", "sglang",
                              "--budget", "40GiB", "--context", "8k"]).stdout  # fmt: skip
    assert "block_size 1 token," in out and "1 tokens" not in out


def test_sglang_budget_line_has_one_top_level_equals_and_adds_up() -> None:
    # SGLang's rule (model_runner.py profile_max_num_token): available = free after load −
    # free before load × (1 − mem_fraction_static); free after load = before − weights.
    body = plan_json("--model", "meta-llama/Llama-3.1-8B", "--engine", "sglang", "--gpu",
                     "H100-SXM-80GB", "--context", "8k")  # fmt: skip
    b = body["capacity"]["budget"]
    top = b["derivation"].split(" (reserve: ")[0]
    assert top.count("=") == 1 and top.startswith("free before load ")
    t = {x["name"]: x["bytes"] for x in b["terms"]}
    before = b["gpu_memory_bytes"] - t["non_torch_bytes"]  # the CUDA context is not free
    assert b["kv_budget_bytes"] == before - t["weights_bytes_per_rank"] - t["reserve_bytes"]


def test_models_lists_the_decoders_shape_of_multimodal_repos() -> None:
    # Llama-4 and Gemma-3 repos keep the decoder in text_config (their published config.json).
    from planner.catalog import get_model

    out = runner.invoke(app, ["models"]).stdout
    for model_id in ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "google/gemma-3-27b-it"):
        text = get_model(model_id).config["text_config"]
        line = next(x for x in out.splitlines() if x.startswith(model_id + " "))
        assert "?" not in line
        assert line.split()[-2:] == [
            str(text["num_hidden_layers"]),
            f"{text['max_position_embeddings']:,}",
        ]


def test_readme_says_what_the_tool_says_about_gpt_oss_120b_on_one_h100() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    cap = plan_json("--model", "openai/gpt-oss-120b", "--gpu", "H100-SXM-80GB")["capacity"]
    b = cap["budget"]
    assert f"{b['weights_bytes_per_rank'] / GiB:.2f} GiB of weights per GPU" in readme
    assert f"leaves {b['kv_budget_bytes'] / GiB:.2f} GiB for the KV cache" in readme
    assert f"longest `max_model_len` that starts ({cap['estimated_max_model_len']:,})" in readme
    old = plan_json("--model", "openai/gpt-oss-120b", "--gpu", "H100-SXM-80GB",
                    "--engine-version", "0.10.1")["capacity"]["budget"]  # fmt: skip
    assert f"the budget is −{-old['engine_available_bytes'] / GiB:.2f} GiB" in readme
    assert "gpt-oss-120b on one H100: no" in readme
