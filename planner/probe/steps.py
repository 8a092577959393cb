"""Time a real model's decode step: transformers on torch, random weights, a filled StaticCache.

Imports torch and transformers lazily (`kvplan probe --validate` only). One step is what a
serving loop does per token: the forward pass of one new token per sequence over a static cache
holding `context_tokens` positions, plus greedy sampling (argmax of the last logits).

How it times (research protocol: warm-up, synchronisation, medians over repeats, passes):
- The cache is allocated at exactly `context_tokens` positions and filled with random K/V (the
  values do not change the bytes read; a real prefill of 8k tokens x batch would cost minutes on
  a CPU). With q_len = 1, SDPA reads every position of the static cache, so a step reads
  `context_tokens` tokens of KV per sequence: the figure the planner is asked about.
- Every timed step decodes at the same position: the cache's write counter is reset before each
  step (inside the captured graph on CUDA), so the step does not drift in length while timed.
- Steps run back to back, as in a serving loop. On CUDA the 16 GB of weights and the GiB-sized KV
  are far beyond the 50-60 MB L2, so every step reads DRAM; no extra flush is needed.
- CUDA: the step is captured in a CUDA graph when capture works (the way serving engines run
  decode), timed with CUDA events around `repeats` replays after a synchronise; otherwise eager
  with events, flagged, because then host launch gaps are part of the figure.
- CPU: `time.perf_counter` around each step; torch's intra-op threads set to `threads`.
- Points run in `passes` shuffled passes (drift shows as pass spread); each pass re-allocates the
  point's cache, outside the timed region.
"""

from __future__ import annotations

import importlib
import inspect
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from planner.probe.backend import ProbeUnavailable
from planner.probe.cuda import capture_graph


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A Llama-shaped decoder (HF config.json keys) and the dtype it runs in."""

    label: str
    config: dict[str, Any]
    dtype: str  # "fp32" | "bf16" | "fp16"

    @property
    def layers(self) -> int:
        return int(self.config["num_hidden_layers"])

    @property
    def kv_heads(self) -> int:
        return int(self.config["num_key_value_heads"])

    @property
    def head_dim(self) -> int:
        return int(self.config["head_dim"])

    @property
    def itemsize(self) -> int:
        return {"fp32": 4, "bf16": 2, "fp16": 2}[self.dtype]

    def kv_bytes(self, batch: int, context_tokens: int) -> int:
        """K and V of every layer, KV head and position: what one step reads."""
        return (
            2
            * self.layers
            * self.kv_heads
            * self.head_dim
            * self.itemsize
            * batch
            * (context_tokens)
        )


@dataclass(frozen=True, slots=True)
class StepTiming:
    batch: int
    context_tokens: int
    per_step_seconds: list[float]
    pass_medians: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.per_step_seconds)

    @property
    def best(self) -> float:
        return min(self.per_step_seconds)

    @property
    def coefficient_of_variation(self) -> float:
        mean = statistics.fmean(self.per_step_seconds)
        return statistics.pstdev(self.per_step_seconds) / mean if mean > 0 else 0.0

    @property
    def pass_spread(self) -> float:
        if len(self.pass_medians) < 2 or self.median <= 0:
            return 0.0
        return (max(self.pass_medians) - min(self.pass_medians)) / self.median


@dataclass(slots=True)
class StepRun:
    """What the timing produced, and what ran."""

    timings: list[StepTiming]
    parameters: int
    weights_read_bytes: int
    framework: str
    launch_mode: str
    device: str
    threads: int | None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class StepConfig:
    """`passes` shuffled rounds over the points, `repeats` timed steps per point per round.

    `interleave` keeps every point's cache alive and cycles through the points in short rounds,
    so a neighbour's burst of load on a shared host lands on all points alike instead of
    swallowing one; without it (CUDA, where the caches of all points would not fit together)
    each pass allocates one point's cache at a time.
    """

    warmup_steps: int = 2
    repeats: int = 9
    passes: int = 2
    seed: int = 0
    interleave: bool = False


_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ProbeUnavailable(
            f"--validate needs {name} (pip install 'kvplan[crosscheck]', or torch and "
            "transformers on the GPU host)"
        ) from exc


def _cache_kwarg(model: Any) -> str:
    """transformers renamed `past_key_values` to `cache` during 5.x: use what this one takes."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


ATTENTION = "kvplan_decode_sdpa"


def _decode_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """SDPA at q_len = 1 over the whole static cache, GQA without copying K/V, no mask.

    Every timed step decodes at the cache's last position, so the causal mask is all ones and
    dropping it is exact. Without a mask SDPA can use its fused kernels, and each KV head is read
    once: where transformers' own path builds a mask for a static cache and, in some 5.x
    releases, repeats K/V per query head. The GQA form follows the probe's kernel: on CUDA
    SDPA's `enable_gqa` (as the probe times it); on CPU the query heads of a group are folded
    into the query length (as the probe's NumPy analogue does), because CPU SDPA with
    `enable_gqa` falls back to a slow path.
    """
    torch = importlib.import_module("torch")
    b, hq, q_len, d = query.shape
    hkv = key.shape[1]
    if q_len != 1:
        raise ValueError("the validation attention only decodes (q_len = 1)")
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if query.is_cuda or hq == hkv:
        out = sdpa(query, key, value, scale=scaling, enable_gqa=hq != hkv)
    else:
        folded = query.reshape(b, hkv, hq // hkv, d)
        out = sdpa(folded, key, value, scale=scaling).reshape(b, hq, 1, d)
    return out.transpose(1, 2).contiguous(), None


def _no_mask(*args: Any, **kwargs: Any) -> None:
    return None


def _register_attention(transformers: Any) -> None:
    transformers.AttentionInterface.register(ATTENTION, _decode_attention)
    transformers.AttentionMaskInterface.register(ATTENTION, _no_mask)


def build_model(spec: ModelSpec, device: str, seed: int) -> tuple[Any, Any, Any]:
    """(torch, model, config): random weights, eval mode, on `device`, in `spec.dtype`."""
    torch = _import("torch")
    transformers = _import("transformers")
    dtype = getattr(torch, _DTYPES[spec.dtype])
    _register_attention(transformers)
    config = transformers.LlamaConfig(**spec.config)
    config._attn_implementation = ATTENTION
    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    try:
        # Build in the target dtype on the target device: an 8B model built in fp32 on the host
        # first would need 32 GB of host memory and a slow copy.
        torch.set_default_dtype(dtype)
        with torch.device(device):
            model = transformers.LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model = model.to(dtype=dtype).eval()
    return torch, model, config


def weights_read_bytes(model: Any) -> tuple[int, int]:
    """(parameters, bytes a step reads): every parameter except an untied input embedding.

    The embedding lookup gathers one row per sequence; with tied embeddings the same table is
    read in full as the LM head, so it counts once.
    """
    params = {id(p): p for p in model.parameters()}
    total = sum(p.numel() for p in params.values())
    read = sum(p.numel() * p.element_size() for p in params.values())
    embed = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    if head is None or head.weight.data_ptr() != embed.data_ptr():
        read -= embed.numel() * embed.element_size()
    return int(total), int(read)


class _Point:
    """One batch x context: a filled static cache and a callable that runs one step."""

    def __init__(
        self, torch: Any, model: Any, config: Any, spec: ModelSpec, batch: int, ctx: int
    ) -> None:
        transformers = importlib.import_module("transformers")
        device = next(model.parameters()).device
        dtype = next(model.parameters()).dtype
        self.torch = torch
        self.cache = transformers.StaticCache(config=config, max_cache_len=ctx)
        self.cache.early_initialization(
            batch_size=batch,
            num_heads=spec.kv_heads,
            head_dim=spec.head_dim,
            dtype=dtype,
            device=device,
        )
        for layer in self.cache.layers:
            layer.keys.normal_()
            layer.values.normal_()
        self.position = ctx - 1
        gen = torch.Generator(device="cpu").manual_seed(batch * 1_000_003 + ctx)
        vocab = int(spec.config["vocab_size"])
        self.ids = torch.randint(0, vocab, (batch, 1), generator=gen).to(device)
        self.position_ids = torch.full((batch, 1), self.position, dtype=torch.long, device=device)
        self.kwargs: dict[str, Any] = {
            _cache_kwarg(model): self.cache,
            "use_cache": True,
            "logits_to_keep": 1,
            "position_ids": self.position_ids,
        }
        if "cache_position" in inspect.signature(model.forward).parameters:
            self.kwargs["cache_position"] = torch.tensor([self.position], device=device)
        self.model = model
        self.next_tokens: Any = None

    def step(self) -> None:
        # Decode at the same position every time: the write counter goes back one slot.
        for layer in self.cache.layers:
            counter = getattr(layer, "cumulative_length", None)
            if counter is not None and hasattr(counter, "fill_"):
                counter.fill_(self.position)
        out = self.model(input_ids=self.ids, **self.kwargs)
        self.next_tokens = out.logits[:, -1].argmax(dim=-1)  # greedy sampling


def _time_cpu(point: _Point, cfg: StepConfig) -> list[float]:
    for _ in range(cfg.warmup_steps):
        point.step()
    out = []
    for _ in range(cfg.repeats):
        start = time.perf_counter()
        point.step()
        out.append(time.perf_counter() - start)
    return out


def _time_cuda(
    torch: Any, point: _Point, cfg: StepConfig, use_graph: bool
) -> tuple[list[float], bool]:
    run = capture_graph(torch, point.step) if use_graph else None
    call = run if run is not None else point.step
    for _ in range(max(cfg.warmup_steps, 3)):
        call()
    torch.cuda.synchronize()
    out = []
    for _ in range(cfg.repeats):
        # One pair of events per step; each step is milliseconds, far above the ~0.5 us
        # resolution, and the synchronise keeps queued work of the last step out of the next.
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        out.append(float(start.elapsed_time(end)) / 1e3)
    return out, run is not None


def _pinned(torch: Any, device: str, backend: str | None, notes: list[str]) -> Any:
    """SDPA pinned to the probe's kernel on CUDA, so the model runs what was calibrated."""
    from contextlib import nullcontext

    from planner.probe.cuda import _BACKEND_NAMES

    member_name = {v: k for k, v in _BACKEND_NAMES.items()}.get(backend or "")
    if device != "cuda" or member_name is None:
        return nullcontext()
    attention = importlib.import_module("torch.nn.attention")
    notes.append(f"sdpa_pinned: the model's SDPA runs {backend}, the kernel the probe timed")
    return attention.sdpa_kernel([getattr(attention.SDPBackend, member_name)])


def time_steps(
    spec: ModelSpec,
    points: Sequence[tuple[int, int]],
    *,
    device: str,
    threads: int | None = None,
    config: StepConfig | None = None,
    use_graphs: bool = True,
    sdpa_backend: str | None = None,
) -> StepRun:
    """Median decode-step time at each (batch, context) point, in shuffled passes.

    `sdpa_backend` (the probe's `backend`, e.g. "sdpa-flash") pins the model's SDPA to the
    kernel the probe timed, on CUDA; other values leave SDPA's own dispatch.
    """
    cfg = config or StepConfig()
    torch = _import("torch")
    transformers = _import("transformers")
    notes: list[str] = []
    if device == "cuda" and not torch.cuda.is_available():
        raise ProbeUnavailable("no CUDA device is visible to torch; validate on device 'cpu'")
    old_threads = torch.get_num_threads()
    if threads is not None and device == "cpu":
        torch.set_num_threads(threads)
    try:
        _torch, model, hf_config = build_model(spec, device, cfg.seed)
        parameters, read = weights_read_bytes(model)
        samples: dict[tuple[int, int], list[float]] = {p: [] for p in points}
        medians: dict[tuple[int, int], list[float]] = {p: [] for p in points}
        graphed = eager = 0
        rng = random.Random(cfg.seed)
        resident: dict[tuple[int, int], _Point] = {}
        with torch.inference_mode(), _pinned(torch, device, sdpa_backend, notes):
            if cfg.interleave:
                resident = {(b, c): _Point(torch, model, hf_config, spec, b, c) for b, c in points}
            for _ in range(cfg.passes):
                order = list(points)
                rng.shuffle(order)
                for batch, ctx in order:
                    point = resident.get((batch, ctx)) or _Point(
                        torch, model, hf_config, spec, batch, ctx
                    )
                    if device == "cuda":
                        times, was_graphed = _time_cuda(torch, point, cfg, use_graphs)
                        graphed += was_graphed
                        eager += not was_graphed
                    else:
                        times = _time_cpu(point, cfg)
                        eager += 1
                    samples[(batch, ctx)].extend(times)
                    medians[(batch, ctx)].append(statistics.median(times))
                    del point
                    if device == "cuda" and not resident:
                        torch.cuda.empty_cache()
            resident.clear()
    except torch.cuda.OutOfMemoryError as exc:
        # The up-front memory check leaves 25 % headroom; a fragmented or shared device can
        # still refuse. Say so instead of a traceback, and free what was taken.
        torch.cuda.empty_cache()
        first = str(exc).splitlines()[0][:200] if str(exc) else "out of memory"
        raise ProbeUnavailable(f"the device ran out of memory during validation: {first}") from None
    finally:
        torch.set_num_threads(old_threads)
    mode = "cuda_graph" if graphed and not eager else "eager" if not graphed else "mixed"
    if device == "cuda" and mode != "cuda_graph":
        notes.append(
            "host_launch_included: the step could not be captured in a CUDA graph for every "
            "point; eager steps include host launch gaps"
        )
    framework = (
        f"transformers {transformers.__version__} / torch {torch.__version__}, SDPA decode "
        "(GQA, no mask)"
    )
    return StepRun(
        timings=[StepTiming(b, c, samples[(b, c)], medians[(b, c)]) for b, c in points],
        parameters=parameters,
        weights_read_bytes=read,
        framework=framework,
        launch_mode=mode,
        device=device,
        threads=threads if device == "cpu" else None,
        notes=notes,
    )
