"""`--validate`: the step-term fit, the decode attention, and a tiny end-to-end run.

Times are never asserted. The end-to-end test recomputes every estimate from the stored
calibrations' figures with the formulas written out here, and checks KV bytes against the
model's own cache tensors.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from planner.cli.probe import in_process_link  # noqa: E402
from planner.probe import CalibrationIn, ProbeUnavailable, run_probe  # noqa: E402
from planner.probe.cpu import CpuConfig  # noqa: E402
from planner.probe.steps import (  # noqa: E402
    ATTENTION,
    ModelSpec,
    StepConfig,
    _cache_kwarg,
    _Point,
    build_model,
    weights_read_bytes,
)
from planner.probe.timing import SweepConfig  # noqa: E402
from planner.probe.validate import (  # noqa: E402
    CUDA_VALIDATION,
    ValidationPlan,
    ValidationResult,
    _llama,
    check_resources,
    fit_step_terms,
    plan_body,
    validate,
)

KiB, MiB = 1 << 10, 1 << 20
TINY_SPEC = ModelSpec(
    "tiny Llama (2 layers, 4/2 heads, d 16) fp32",
    {**_llama(64, 128, 2, 4, 2, 16, 256), "torch_dtype": "float32"},
    "fp32",
)
TINY_PROBE = CpuConfig(
    threads=1,
    read_max_bytes=8 * MiB,
    read_sizes=2,
    decode_min_bytes=64 * KiB,
    decode_max_bytes=1 * MiB,
    rotation_bytes=2 * MiB,
    min_fit_bytes=64 * KiB,
    llc_bytes=MiB,
    sweep=SweepConfig(
        passes=1,
        min_sample_seconds=5e-4,
        min_samples=2,
        max_samples=3,
        warmup_seconds=0.001,
        min_warmup_calls=1,
    ),
)
TINY_PLAN = ValidationPlan(
    spec=TINY_SPEC,
    training=((1, 32), (4, 32), (1, 128)),
    held_out=((2, 64), (4, 128)),
    steps=StepConfig(warmup_steps=1, repeats=2, passes=2, interleave=True),
    cpu_probe=TINY_PROBE,
    probe_memory_bytes=64 * MiB,
)


# --- the fit ------------------------------------------------------------------------------------


def _true_step(e: float, w: float, b: int, *, layers: int, n: int, p: float, f: float) -> float:
    """The step law, written out independently of the implementation."""
    return e + layers * p + max(0.0, 2 * n * b / f - w)


def test_fit_recovers_known_terms() -> None:
    layers, n, p, f = 32, 8_000_000_000, 40e-6, 400e12
    w = 16e9 / 4.3e12  # 16 GB of weights at 4.3 TB/s: matmul-bound above batch ~100
    pts = [
        (b, _true_step(e, w, b, layers=layers, n=n, p=p, f=f), e, w)
        for b, e in ((1, 3.8e-3), (64, 6.0e-3), (128, 9.0e-3), (256, 12.0e-3), (512, 20.0e-3))
    ]
    fit = fit_step_terms(layers, n, pts)
    assert fit.matmul_flops_per_s == pytest.approx(f, rel=0.03)  # the grid steps 2.3 %
    assert fit.per_layer_overhead_seconds == pytest.approx(p, rel=0.05)
    assert fit.clamped == ()


def test_fit_drops_a_rate_no_training_point_can_see() -> None:
    # Every point memory-bound: any F above the data fits as well as none, so none is reported.
    layers, n, w = 8, 100_000_000, 0.05
    pts = [(b, e + layers * 1e-3, e, w) for b, e in ((1, 0.06), (2, 0.07), (4, 0.09))]
    fit = fit_step_terms(layers, n, pts)
    assert fit.matmul_flops_per_s is None
    assert fit.per_layer_overhead_seconds == pytest.approx(1e-3)


def test_fit_clamps_a_negative_overhead() -> None:
    # Faster than the bytes-only estimate at every point: no cost can be negative.
    pts = [(1, 0.9 * e, e, 0.5 * e) for e in (0.01, 0.02, 0.04)]
    fit = fit_step_terms(4, 1_000_000, pts)
    assert fit.per_layer_overhead_seconds == 0.0
    assert fit.clamped == ("per_layer",)


def test_fit_needs_points() -> None:
    with pytest.raises(Exception, match="no training points"):
        fit_step_terms(4, 1, [])


# --- the model pieces ---------------------------------------------------------------------------


def _filled_cache(model: Any, config: Any, batch: int, ctx: int, seed: int) -> Any:
    gen = torch.Generator().manual_seed(seed)
    cache = transformers.StaticCache(config=config, max_cache_len=ctx)
    cache.early_initialization(
        batch_size=batch, num_heads=2, head_dim=16, dtype=torch.float32, device=torch.device("cpu")
    )
    for layer in cache.layers:
        layer.keys.copy_(torch.randn(layer.keys.shape, generator=gen))
        layer.values.copy_(torch.randn(layer.values.shape, generator=gen))
        layer.cumulative_length.fill_(ctx - 1)
    return cache


def test_decode_attention_matches_transformers_sdpa() -> None:
    # Oracle: the same weights and cache through transformers' own SDPA path.
    _torch, ours, config = build_model(TINY_SPEC, "cpu", seed=3)
    assert config._attn_implementation == ATTENTION
    ref_config = transformers.LlamaConfig(**TINY_SPEC.config)
    ref_config._attn_implementation = "sdpa"
    ref = transformers.LlamaForCausalLM(ref_config).eval()
    ref.load_state_dict(ours.state_dict())
    batch, ctx = 3, 40
    ids = torch.randint(0, 256, (batch, 1), generator=torch.Generator().manual_seed(1))
    pos = torch.full((batch, 1), ctx - 1)
    outs = []
    with torch.inference_mode():
        for model in (ours, ref):
            cache = _filled_cache(model, config, batch, ctx, seed=7)
            kw = {_cache_kwarg(model): cache, "use_cache": True, "position_ids": pos}
            outs.append(model(input_ids=ids, **kw).logits)
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-4, atol=1e-5)


def test_weights_read_bytes_counts_the_lm_head_once() -> None:
    _torch, model, _config = build_model(TINY_SPEC, "cpu", seed=0)
    params, read = weights_read_bytes(model)
    everything = sum(p.numel() for p in model.parameters())
    assert params == everything
    embed = model.get_input_embeddings().weight
    assert read == 4 * everything - embed.numel() * 4  # untied: the lookup reads one row
    tied = ModelSpec("tied", {**TINY_SPEC.config, "tie_word_embeddings": True}, "fp32")
    _torch, model, _config = build_model(tied, "cpu", seed=0)
    params, read = weights_read_bytes(model)
    assert read == 4 * sum(p.numel() for p in model.parameters())  # the head reads the table


def test_a_point_decodes_at_the_same_position_every_step() -> None:
    _torch, model, config = build_model(TINY_SPEC, "cpu", seed=0)
    point = _Point(torch, model, config, TINY_SPEC, 2, 48)
    # KV bytes of the cache tensors themselves, against the spec's formula.
    held = sum(layer.keys.nbytes + layer.values.nbytes for layer in point.cache.layers)
    assert held == TINY_SPEC.kv_bytes(2, 48)
    with torch.inference_mode():
        point.step()
        point.step()
    for layer in point.cache.layers:
        assert int(layer.cumulative_length) == 48  # reset to 47, then one token written
    assert tuple(point.next_tokens.shape) == (2,)


class _NewModel:
    def forward(self, input_ids: Any = None, cache: Any = None) -> None: ...


class _OldModel:
    def forward(self, input_ids: Any = None, past_key_values: Any = None) -> None: ...


def test_cache_keyword_follows_the_transformers_release() -> None:
    assert _cache_kwarg(_NewModel()) == "cache"  # 5.2x
    assert _cache_kwarg(_OldModel()) == "past_key_values"  # 5.17 (the GPU image)


def test_plan_body_is_what_a_user_sends() -> None:
    body = plan_body(
        TINY_SPEC,
        (4, 128),
        weights_bytes=123,
        calibration_id="abc",
        bandwidth_bytes_per_s=None,
    )
    assert body["requests"] == [{"context_tokens": 128, "count": 4}]
    assert body["kv_cache_dtype"] == "fp32" and body["weights_bytes"] == 123
    assert "bandwidth_bytes_per_s" not in body  # the floor then uses the probe's ceiling
    with_ds = plan_body(
        TINY_SPEC, (1, 16), weights_bytes=1, calibration_id="a", bandwidth_bytes_per_s=4.8e12
    )
    assert with_ds["bandwidth_bytes_per_s"] == 4.8e12


def test_the_8b_plan_fits_an_h200_and_is_refused_on_less(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = CUDA_VALIDATION.spec
    # Llama-3.1-8B: 128 KiB of bf16 KV per token (32 layers x 8 KV heads x 128 x 2 x 2 bytes).
    assert spec.kv_bytes(1, 1) == 128 * KiB
    assert not set(CUDA_VALIDATION.training) & set(CUDA_VALIDATION.held_out)
    weights = 16_060_522_496  # the 8B checkpoint's bf16 parameters, 8,030,261,248 x 2
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (139 * 2**30, 141 * 2**30))
    check_resources(CUDA_VALIDATION, device="cuda", parameters_bytes=weights)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (60 * 2**30, 80 * 2**30))
    with pytest.raises(ProbeUnavailable, match="GiB"):
        check_resources(CUDA_VALIDATION, device="cuda", parameters_bytes=weights)


# --- end to end, tiny ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def result() -> Iterator[tuple[ValidationResult, dict[str, Any], dict[str, Any]]]:
    probe = run_probe("cpu", 10.0, shape=TINY_PLAN.shape, cpu_config=TINY_PROBE)
    with in_process_link() as link:
        # Keep the plan responses and the stored records as the service returns them.
        plans: dict[tuple[int, int], Any] = {}
        plan = link.plan

        def spy(body: dict[str, Any]) -> dict[str, Any]:
            out = plan(body)
            mix = body["requests"][0]
            plans[(mix["count"], mix["context_tokens"])] = out
            return out

        spied = type(link)(link.add, spy, link.path)
        res = validate(probe, spied, device="cpu", plan=TINY_PLAN, threads=1)
        yield res, plans, {"probe": res.probe, "validated": res.calibration}


def test_report_structure(result: Any) -> None:
    res, _plans, _ = result
    v = res.calibration.validation
    assert v is not None
    roles = {(p.batch, p.context_tokens): p.role for p in v.points}
    assert roles == {
        **dict.fromkeys(TINY_PLAN.training, "training"),
        **dict.fromkeys(TINY_PLAN.held_out, "held_out"),
    }
    assert v.plan_calibration_id == res.probe.id != res.calibration.id
    assert v.plan_path.startswith("POST /api/v1/plan")
    assert v.device == "cpu" and v.threads == 1 and v.launch_mode == "eager"
    assert "measured copy ceiling" in v.floor_label
    assert "validated" in res.calibration.flags
    assert res.calibration.step_terms is not None
    assert res.calibration.step_terms.training_points == len(TINY_PLAN.training)
    for p in v.points:
        assert p.samples == TINY_PLAN.steps.repeats * TINY_PLAN.steps.passes
        assert p.measured_best_seconds <= p.measured_seconds
        assert p.non_kv_share == pytest.approx(max(0.0, 1 - p.kv_share))


def test_every_estimate_comes_from_the_stored_calibration(result: Any) -> None:
    res, plans, _ = result
    probe, cal = res.probe, res.calibration
    v = cal.validation
    assert v is not None
    # The validated record keeps the probe's figures and adds the terms.
    for name in ("copy_bandwidth_bytes_per_s", "decode_bandwidth_bytes_per_s"):
        assert getattr(cal, name) == getattr(probe, name)
    assert cal.fixed_overhead_seconds == probe.fixed_overhead_seconds
    layers = TINY_SPEC.layers
    c = TINY_SPEC.config
    for p in v.points:
        kv = 2 * layers * c["num_key_value_heads"] * c["head_dim"] * 4 * p.batch * p.context_tokens
        assert p.kv_read_bytes == kv
        w = p.weights_read_bytes / probe.copy_bandwidth_bytes_per_s
        bytes_only = (
            layers * probe.fixed_overhead_seconds + kv / probe.decode_bandwidth_bytes_per_s + w
        )
        assert p.bytes_only_seconds == pytest.approx(bytes_only, rel=1e-9)
        got = plans[(p.batch, p.context_tokens)]["bounds"]
        assert got["calibrated"]["calibration_id"] == probe.id
        assert p.bytes_only_seconds == got["calibrated"]["decode_step_seconds"]
        assert p.floor_seconds == got["decode_step_seconds"]
        assert p.floor_seconds == pytest.approx(
            (kv + p.weights_read_bytes) / probe.copy_bandwidth_bytes_per_s, rel=1e-9
        )
        compute = (
            2 * v.parameters * p.batch / cal.matmul_flops_per_s if cal.matmul_flops_per_s else 0
        )
        calibrated = (
            bytes_only + layers * (cal.per_layer_overhead_seconds or 0) + max(0.0, compute - w)
        )
        assert p.calibrated_seconds == pytest.approx(calibrated, rel=1e-9)
        assert p.calibrated_error == pytest.approx(
            (p.calibrated_seconds - p.measured_seconds) / p.measured_seconds
        )
    held = [abs(p.calibrated_error) for p in v.points if p.role == "held_out"]
    assert v.median_abs_error == pytest.approx(statistics.median(held))
    assert v.max_abs_error == pytest.approx(max(held))


def test_the_terms_are_fitted_on_training_points_only(result: Any) -> None:
    res, _plans, _ = result
    v = res.calibration.validation
    assert v is not None
    train = [p for p in v.points if p.role == "training"]
    refit = fit_step_terms(
        v.layers,
        v.parameters,
        [
            (
                p.batch,
                p.measured_seconds,
                p.bytes_only_seconds,
                p.weights_read_bytes / res.probe.copy_bandwidth_bytes_per_s,
            )
            for p in train
        ],
    )
    assert res.calibration.per_layer_overhead_seconds == refit.per_layer_overhead_seconds
    assert res.calibration.matmul_flops_per_s == refit.matmul_flops_per_s


def test_validated_record_round_trips_through_the_ingest_contract(result: Any) -> None:
    res, _plans, _ = result
    body = res.calibration.model_dump(mode="json", exclude={"id"})
    again = CalibrationIn.model_validate(body)
    assert again.validation == res.calibration.validation


def test_refused_before_building_when_memory_is_short(monkeypatch: pytest.MonkeyPatch) -> None:
    import planner.probe.cpu as cpu

    monkeypatch.setattr(cpu, "available_memory_bytes", lambda: 1024)
    added: list[Any] = []

    def no_plan(body: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("nothing is planned on refusal")

    link = type("L", (), {})()
    link.add, link.plan, link.path = added.append, no_plan, "test"
    probe = CalibrationIn(
        device_name="CPU: test",
        backend="numpy-cpu",
        copy_bandwidth_bytes_per_s=1e10,
        decode_bandwidth_bytes_per_s=5e9,
        fixed_overhead_seconds=0.0,
    )
    with pytest.raises(ProbeUnavailable, match="available host memory"):
        validate(probe, link, device="cpu", plan=TINY_PLAN)
    assert added == []


def test_training_and_held_out_must_differ() -> None:
    bad = ValidationPlan(spec=TINY_SPEC, training=((1, 32),), held_out=((1, 32),))
    with pytest.raises(ValueError, match="both training and held-out"):
        validate(
            CalibrationIn(
                device_name="x",
                backend="y",
                copy_bandwidth_bytes_per_s=1.0,
                decode_bandwidth_bytes_per_s=1.0,
                fixed_overhead_seconds=0.0,
            ),
            None,
            device="cpu",
            plan=bad,
        )  # type: ignore[arg-type]


# --- paths that matter on a GPU host, run here without one --------------------------------------


def test_cuda_steps_refused_without_a_device() -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    from planner.probe.steps import time_steps

    with pytest.raises(ProbeUnavailable, match="no CUDA device"):
        time_steps(TINY_SPEC, [(1, 16)], device="cuda")


class _FakeEvent:
    clock = 0.0

    def __init__(self, enable_timing: bool = False) -> None:
        self.t = 0.0

    def record(self) -> None:
        _FakeEvent.clock += 0.001  # each record is 1 ms after the last: a step of 1 ms
        self.t = _FakeEvent.clock

    def synchronize(self) -> None: ...

    def elapsed_time(self, other: _FakeEvent) -> float:
        return (other.t - self.t) * 1e3  # milliseconds, as CUDA events report


class _FakeCuda:
    Event = _FakeEvent

    def __init__(self, capture_works: bool) -> None:
        self.capture_works = capture_works
        self.synced = 0

    def Stream(self) -> Any:
        if not self.capture_works:
            raise RuntimeError("operation not permitted when stream is capturing")
        raise AssertionError("not reached in this test")

    def synchronize(self) -> None:
        self.synced += 1


class _CountingPoint:
    def __init__(self) -> None:
        self.steps = 0

    def step(self) -> None:
        self.steps += 1


def test_cuda_timing_falls_back_to_eager_when_capture_fails() -> None:
    from planner.probe.steps import _time_cuda

    fake = type("T", (), {"cuda": _FakeCuda(capture_works=False)})()
    point = _CountingPoint()
    cfg = StepConfig(warmup_steps=1, repeats=4, passes=1)
    times, graphed = _time_cuda(fake, point, cfg, use_graph=True)
    assert graphed is False
    assert point.steps == 3 + 4  # at least 3 warm-up steps, then the timed ones
    assert times == pytest.approx([0.001] * 4)  # event pairs, converted from ms to s
    assert fake.cuda.synced >= 1  # synchronised before the first timed step


def test_without_the_web_stack_points_are_planned_by_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    probe = CalibrationIn(
        device_name="CPU: test",
        backend="numpy-cpu",
        copy_bandwidth_bytes_per_s=1e10,
        decode_bandwidth_bytes_per_s=5e9,
        fixed_overhead_seconds=1e-5,
    )
    body = plan_body(
        TINY_SPEC, (2, 64), weights_bytes=10**6, calibration_id="", bandwidth_bytes_per_s=None
    )
    answers = []
    for blocked in (False, True):
        if blocked:  # a GPU image with torch but no FastAPI/Starlette
            monkeypatch.setitem(sys.modules, "starlette.testclient", None)
            monkeypatch.setitem(sys.modules, "planner.app", None)
        with in_process_link() as link:
            stored = link.add(probe)
            answers.append((link.path, link.plan({**body, "calibration_id": stored.id})))
    (http_path, http), (core_path, core) = answers
    assert http_path.startswith("POST /api/v1/plan") and "no web stack" in core_path
    for key in ("decode_step_seconds", "kv_read_seconds", "weights_read_seconds"):
        assert core["bounds"][key] == http["bounds"][key]
    drop = {"calibration_id", "measured_at"}
    assert {k: v for k, v in core["bounds"]["calibrated"].items() if k not in drop} == {
        k: v for k, v in http["bounds"]["calibrated"].items() if k not in drop
    }


def test_the_model_runs_the_kernel_the_probe_timed() -> None:
    from planner.probe.steps import _pinned

    notes: list[str] = []
    assert type(_pinned(torch, "cpu", "sdpa-flash", notes)).__name__ == "nullcontext"
    assert type(_pinned(torch, "cuda", "matmul-reference", notes)).__name__ == "nullcontext"
    assert notes == []
    pinned = _pinned(torch, "cuda", "sdpa-flash", notes)
    assert type(pinned).__name__ != "nullcontext"
    assert notes == ["sdpa_pinned: the model's SDPA runs sdpa-flash, the kernel the probe timed"]
