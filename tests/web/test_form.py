"""The form layer: strings to a PlanRequest, errors keyed by the form field that caused them."""

from __future__ import annotations

import pytest

from planner.core.schema import MAMBA_SSM_DTYPES
from planner.web import form

GiB = 1 << 30


def _(text: str) -> str:
    return text


def test_question_parses_to_the_api_request() -> None:
    state = form.parse(
        {
            "model": "meta-llama/Llama-3.1-8B",
            "kv_cache_dtype": "bf16",
            "context_tokens": "8,192",
            "kv_budget_gib": "48",
            "tensor_parallel_size": "2",
        },
        _,
    )
    assert state.errors == {}
    assert state.request is not None
    body = state.request.model_dump(exclude_defaults=True)
    assert body == {
        "model": "meta-llama/Llama-3.1-8B",
        "kv_cache_dtype": "bf16",
        "context_tokens": 8192,
        "kv_budget_bytes": 48 * GiB,
        "tensor_parallel_size": 2,
    }


def test_units_convert_exactly() -> None:
    state = form.parse(
        {
            "model": "m",
            "kv_budget_gib": "0.5",
            "weights_gib": "0",
            "bandwidth_tbps": "3.35",
            "gpu_memory_utilization": "0.9",
        },
        _,
    )
    assert state.request is not None
    assert state.request.kv_budget_bytes == GiB // 2  # GiB = 2^30 B
    assert state.request.weights_bytes == 0
    assert state.request.bandwidth_bytes_per_s == pytest.approx(3.35e12)  # TB/s = 10^12 B/s
    assert state.request.gpu_memory_utilization == 0.9


@pytest.mark.parametrize(
    ("text", "mix"),
    [
        ("8192x10, 2048x30", [(8192, 10), (2048, 30)]),
        ("8192 × 10; 4096", [(8192, 10), (4096, 1)]),
        ("8 192*2\n1024X3", [(8192, 2), (1024, 3)]),
    ],
)
def test_request_mix(text: str, mix: list[tuple[int, int]]) -> None:
    state = form.parse({"model": "m", "requests": text}, _)
    assert state.request is not None and state.request.requests is not None
    assert [(r.context_tokens, r.count) for r in state.request.requests] == mix


@pytest.mark.parametrize("text", ["8192x", "x10", "8192x0", "0x1", "8192x10x2", "a"])
def test_bad_request_mix(text: str) -> None:
    state = form.parse({"model": "m", "requests": text}, _)
    assert state.request is None and "requests" in state.errors


def test_every_bad_field_is_reported_at_once() -> None:
    state = form.parse(
        {
            "model": "m",
            "context_tokens": "x",
            "block_size": "0",
            "weights_gib": "nan",
            "bandwidth_tbps": "0",
            "gpu_memory_utilization": "1.5",
        },
        _,
    )
    assert set(state.errors) == {
        "context_tokens",
        "block_size",
        "weights_gib",
        "bandwidth_tbps",
        "gpu_memory_utilization",
    }


def test_config_wins_over_the_catalog_model() -> None:
    state = form.parse({"model": "meta-llama/Llama-3.1-8B", "model_config": '{"a": 1}'}, _)
    assert state.request is not None and state.request.model == {"a": 1}
    assert form.form_field(("model", "num_hidden_layers"), has_config=True) == "model_config"
    assert form.form_field(("model",), has_config=False) == "model"


def test_oversized_config_is_refused_before_parsing() -> None:
    text = '{"x": "' + "a" * form.MAX_CONFIG_CHARS + '"}'
    state = form.parse({"model_config": text}, _)
    assert "model_config" in state.errors


def test_api_locations_map_to_form_fields() -> None:
    assert form.form_field(("kv_budget_bytes",), has_config=False) == "kv_budget_gib"
    assert form.form_field(("bandwidth_bytes_per_s",), has_config=False) == "bandwidth_tbps"
    assert form.form_field(("requests", 3, "count"), has_config=False) == "requests"
    assert form.form_field(("something_else",), has_config=False) == ""
    assert form.form_field((), has_config=False) == ""


def test_canonical_query_keeps_order_drops_empties_and_config() -> None:
    query = form.canonical_query(
        {
            "kv_budget_gib": "48",
            "model": "meta-llama/Llama-3.1-8B",
            "gpu": " ",
            "model_config": "{}",
            "engine": "sglang",
        }
    )
    assert query == "model=meta-llama/Llama-3.1-8B&engine=sglang&kv_budget_gib=48"


def test_raw_values_take_known_strings_only() -> None:
    values = form.raw_values(
        {"model": " m ", "unknown": "x", "model_config": " {} ", "gpu": 3}, allow_config=True
    )
    assert values == {"model": "m", "model_config": " {} "}
    assert "model_config" not in form.raw_values({"model_config": "{}"}, allow_config=False)


def test_defaults_are_not_a_question_and_not_in_the_url() -> None:
    assert not form.is_question({"engine": "vllm", "kv_cache_dtype": "auto", "gpu": ""})
    assert form.is_question({"engine": "sglang"})
    assert form.canonical_query({"model": "m", "engine": "vllm", "kv_cache_dtype": "auto"}) == (
        "model=m"
    )


@pytest.mark.parametrize(
    ("text", "budget"),
    [
        ("48GiB", 48 * GiB),
        ("48 GiB", 48 * GiB),
        ("48G", 48 * GiB),
        ("80GB", 80 * 10**9),
        ("48", 48 * GiB),
        ("0.5", GiB // 2),
    ],
)
def test_budget_takes_the_units_the_cli_takes(text: str, budget: int) -> None:
    state = form.parse({"model": "m", "kv_budget_gib": text}, _)
    assert state.errors == {} and state.request is not None
    assert state.request.kv_budget_bytes == budget


def test_a_decimal_comma_is_refused_not_read_as_fifteen() -> None:
    state = form.parse({"model": "m", "kv_budget_gib": "1,5"}, _)
    assert state.request is None
    assert "ambiguous" in state.errors["kv_budget_gib"][0].text
    assert "1.5" in state.errors["kv_budget_gib"][0].text


@pytest.mark.parametrize(("text", "tokens"), [("8k", 8192), ("8,192", 8192), ("1M", 1 << 20)])
def test_context_takes_k_as_the_chart_ticks_print_it(text: str, tokens: int) -> None:
    state = form.parse({"model": "m", "context_tokens": text, "max_num_batched_tokens": "2k"}, _)
    assert state.request is not None and state.request.context_tokens == tokens
    assert state.request.max_num_batched_tokens == 2048


def test_mix_entries_take_k() -> None:
    state = form.parse({"model": "m", "requests": "8k x 10, 2k"}, _)
    assert state.request is not None and state.request.requests is not None
    assert [(r.context_tokens, r.count) for r in state.request.requests] == [(8192, 10), (2048, 1)]


def test_with_a_mistake_the_usable_fields_still_make_a_partial_request() -> None:
    state = form.parse(
        {"model": "meta-llama/Llama-3.1-8B", "context_tokens": "8x", "tensor_parallel_size": "3"},
        _,
    )
    assert state.request is None and set(state.errors) == {"context_tokens"}
    assert state.partial is not None and state.partial.tensor_parallel_size == 3


def test_budget_above_the_gpu_is_left_to_the_core() -> None:
    # One rule for API, CLI and page: the core refuses it (tests/api/test_explicit_budget.py);
    # the form only reads the number.
    state = form.parse({"model": "m", "gpu": "H100-SXM-80GB", "kv_budget_gib": "200"}, _)
    assert state.request is not None and state.request.kv_budget_bytes == 200 * (1 << 30)


LLAMA = "meta-llama/Llama-3.1-8B"


def test_the_shared_prefix_goes_into_every_entry_of_the_mix() -> None:
    # The CLI's `--mix 8192x10,2048x30 --prefix 1k`: each entry shares 1,024 leading tokens.
    state = form.parse({"model": LLAMA, "requests": "8192x10, 2048x30", "prefix_tokens": "1k"}, _)
    assert state.errors == {} and state.request is not None and state.request.requests
    # One prefix across the mix's entries, as the CLI's --prefix sends it.
    assert [(m.context_tokens, m.count) for m in state.request.requests] == [(8192, 10), (2048, 30)]
    assert state.request.shared_prefix_tokens == 1024
    alone = form.parse({"model": LLAMA, "context_tokens": "8k", "prefix_tokens": "1k"}, _)
    assert list(alone.errors) == ["prefix_tokens"] and alone.request is None
    # The core's own check of the prefix (longer than a request, …) is shown at the field.
    assert form.form_field(("shared_prefix_tokens",), has_config=False) == "prefix_tokens"


def test_the_speculative_fields_make_the_speculative_config() -> None:
    state = form.parse(
        {
            "model": LLAMA,
            "speculative_method": "draft_model",
            "speculative_model": "meta-llama/Llama-3.2-1B",
            "speculative_tokens": "3",
        },
        _,
    )
    assert state.errors == {} and state.request is not None
    spec = state.request.speculative_config
    assert spec is not None and spec.method == "draft_model"
    assert spec.model == "meta-llama/Llama-3.2-1B" and spec.num_speculative_tokens == 3
    # A draft without a method, or a method vLLM does not have, is said next to the method.
    assert list(form.parse({"model": LLAMA, "speculative_tokens": "3"}, _).errors) == [
        "speculative_method"
    ]
    assert list(form.parse({"model": LLAMA, "speculative_method": "medusa"}, _).errors) == [
        "speculative_method"
    ]
    assert form.form_field(("speculative_config", "model"), has_config=False) == (
        "speculative_model"
    )
    assert form.form_field(("speculative_config", "num_speculative_tokens"), has_config=False) == (
        "speculative_tokens"
    )


def test_sglang_flags_and_the_release_reach_the_request() -> None:
    state = form.parse(
        {
            "model": LLAMA,
            "engine": "sglang",
            "engine_version": "0.5.23",
            "context_length": "32k",
            "chunked_prefill_size": "8k",
            "cuda_graph_max_bs": "256",
            "max_total_tokens": "400k",
            "swa_full_tokens_ratio": "0.5",
            "data_parallel_size": "2",
            "enable_dp_attention": "true",
        },
        _,
    )
    assert state.errors == {} and state.request is not None
    r = state.request
    assert (r.engine, r.engine_version, r.context_length) == ("sglang", "0.5.23", 32768)
    assert (r.chunked_prefill_size, r.cuda_graph_max_bs, r.max_total_tokens) == (8192, 256, 409600)
    assert (r.swa_full_tokens_ratio, r.data_parallel_size, r.enable_dp_attention) == (0.5, 2, True)
    bad = form.parse({"model": LLAMA, "enable_dp_attention": "maybe"}, _)
    assert list(bad.errors) == ["enable_dp_attention"]


def test_sglang_state_pool_flags_reach_the_request() -> None:
    # --mamba-full-memory-ratio, --max-mamba-cache-size, --mamba-ssm-dtype: the API's fields.
    state = form.parse(
        {
            "model": LLAMA,
            "engine": "sglang",
            "mamba_full_memory_ratio": "1.5",
            "max_mamba_cache_size": "64",
            "mamba_ssm_dtype": "bfloat16",
        },
        _,
    )
    assert state.errors == {} and state.request is not None
    r = state.request
    assert (r.mamba_full_memory_ratio, r.max_mamba_cache_size, r.mamba_ssm_dtype) == (
        1.5,
        64,
        "bfloat16",
    )
    assert MAMBA_SSM_DTYPES == ("float32", "bfloat16", "float16")
    # The API's bounds: a ratio above 0 and at most 1,000, 1 to 2^24 slots, SGLang's dtypes.
    for name, text in (
        ("mamba_full_memory_ratio", "0"),
        ("mamba_full_memory_ratio", "1001"),
        ("mamba_full_memory_ratio", "90%"),
        ("mamba_full_memory_ratio", "lots"),
        ("max_mamba_cache_size", "0"),
        ("max_mamba_cache_size", "2.5"),
        ("max_mamba_cache_size", str((1 << 24) + 1)),
        ("mamba_ssm_dtype", "fp8"),
    ):
        bad = form.parse({"model": LLAMA, "engine": "sglang", name: text}, _)
        assert list(bad.errors) == [name], (name, text)
        assert bad.request is None and bad.partial is not None  # the other fields still asked
    assert form.parse({"model": LLAMA, "mamba_full_memory_ratio": "1000"}, _).errors == {}
    # Shared links carry them, in the form's order.
    query = form.canonical_query(
        {"model": LLAMA, "mamba_ssm_dtype": "float16", "max_mamba_cache_size": "8"}
    )
    assert query == f"model={LLAMA}&max_mamba_cache_size=8&mamba_ssm_dtype=float16"


def test_unknown_parameters_are_named_and_last_is_kept_apart() -> None:
    assert form.unknown_params(["model", "launch", "last", "engine_versoin", "utm"]) == [
        "engine_versoin",
        "utm",
    ]
    values = form.raw_values(
        {"model": LLAMA, "context_tokens": "32kk", "last": "model=x&context_tokens=8192"},
        allow_config=False,
    )
    # `last` travels with a redirect, never into the answer's own link.
    assert "last=" in form.canonical_query(values, with_last=True)
    assert "last=" not in form.canonical_query(values)
    assert form.last_values(values) == {"model": "x", "context_tokens": "8192"}
    assert form.last_values({"last": "launch=1"}) is None  # not a question
