"""CUDA/ROCm backend (torch): environment record, copy ceiling, decode attention at q_len = 1.

torch is imported lazily (`importlib`), so `planner.probe` imports and the CPU probe runs on hosts
without it. Protocol: README, "Probe and calibration".

- Copy ceiling: a read-only reduction (N bytes) and a device copy (2N bytes, STREAM's convention)
  on buffers up to max(16 x L2, 2 GiB); only sizes >= 8 x L2 count toward the ceiling.
- Decode: SDPA pinned to one kernel with `torch.nn.attention.sdpa_kernel` (FLASH, then EFFICIENT,
  then cuDNN, then MATH, which is flagged), or a matmul reference that reads K and V once per KV
  head. It rotates through R KV buffers with R x bytes >= 4 x L2, so every call reads memory the
  previous calls evicted, and times R calls between one pair of CUDA events (inside a CUDA graph
  when capture works, so host launch gaps stay out of the figure).
- Logical bytes only: `2 * batch * ctx * kv_heads * head_dim * itemsize`; GQA expansion or
  split-KV traffic shows up as a lower BW_eff, never as more bytes (pitfall 11).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from planner.core.units import GiB, MiB
from planner.probe.backend import BackendResult, ProbeUnavailable
from planner.probe.cpu import decode_grid
from planner.probe.datasheet import lookup
from planner.probe.model import AttentionShape, EnvValue
from planner.probe.timing import Case, Deadline, SweepConfig, release, sweep

# NVML clock-event reasons that mean the clocks were held down (power, thermal, slowdown).
_THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
_SDPA_ORDER = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")
_BACKEND_NAMES = {
    "FLASH_ATTENTION": "sdpa-flash",
    "EFFICIENT_ATTENTION": "sdpa-efficient",
    "CUDNN_ATTENTION": "sdpa-cudnn",
    "MATH": "sdpa-math",
}
MAX_ROTATIONS = 256


def import_torch() -> Any:
    """torch, or ProbeUnavailable saying how to get it."""
    try:
        return importlib.import_module("torch")
    except ImportError as exc:
        raise ProbeUnavailable(
            "the CUDA probe needs torch with CUDA (pip install 'kvplan[crosscheck]' or the GPU "
            "image); use device 'cpu' for CPU figures"
        ) from exc


def cuda_available() -> bool:
    try:
        return bool(import_torch().cuda.is_available())
    except ProbeUnavailable:
        return False


# --- environment ------------------------------------------------------------------------------


def _nvml_snapshot(props: Any, index: int) -> dict[str, EnvValue]:
    """Clocks, clock-event reasons, power limit, ECC, MIG, driver: whatever NVML will tell."""
    try:
        nvml: Any = importlib.import_module("pynvml")
        nvml.nvmlInit()
    except Exception:
        return {"nvml": "unavailable"}
    out: dict[str, EnvValue] = {"nvml": "ok"}
    handle = None
    uuid = str(getattr(props, "uuid", "") or "")
    for name in (f"GPU-{uuid}", uuid):
        try:
            handle = nvml.nvmlDeviceGetHandleByUUID(name)
            break
        except Exception:  # noqa: S112
            continue
    if handle is None:
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:
            return {"nvml": "no handle"}

    def put(key: str, fn: Callable[[], Any]) -> None:
        try:
            value = fn()
            out[key] = value.decode() if isinstance(value, bytes) else value
        except Exception:
            out[key] = None

    put("driver_version", nvml.nvmlSystemGetDriverVersion)
    put("sm_clock_mhz", lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
    put("memory_clock_mhz", lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM))
    put("max_sm_clock_mhz", lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))
    put("max_memory_clock_mhz", lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM))
    reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    if reasons is not None:
        put("clock_event_reasons", lambda: int(reasons(handle)))
    put("power_limit_w", lambda: nvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000)
    put("temperature_c", lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))
    put("ecc_enabled", lambda: bool(nvml.nvmlDeviceGetEccMode(handle)[0]))
    put("mig_enabled", lambda: bool(nvml.nvmlDeviceGetMigMode(handle)[0]))
    return out


def environment(torch: Any, index: int) -> dict[str, EnvValue]:
    props = torch.cuda.get_device_properties(index)
    free, total = torch.cuda.mem_get_info(index)
    env: dict[str, EnvValue] = {
        "device_index": index,
        "device_name": str(props.name),
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": int(props.multi_processor_count),
        "l2_cache_bytes": int(getattr(props, "L2_cache_size", 0) or 0),
        "total_memory_bytes": int(total),
        "free_memory_bytes": int(free),
        "torch_version": str(torch.__version__),
        "cuda_version": str(torch.version.cuda) if torch.version.cuda else None,
        "hip_version": str(torch.version.hip) if getattr(torch.version, "hip", None) else None,
        "gcn_arch": str(getattr(props, "gcnArchName", "") or "") or None,
    }
    try:
        env["cudnn_version"] = int(torch.backends.cudnn.version() or 0) or None
    except Exception:
        env["cudnn_version"] = None
    clock_khz = int(getattr(props, "memory_clock_rate", 0) or 0)
    bus_bits = int(getattr(props, "memory_bus_width", 0) or 0)
    if clock_khz and bus_bits:
        # Cross-check only (BabelStream's PEAK): double data rate x bus width. Reporting of the
        # memory clock varies by generation and driver, so the datasheet row stays the reference.
        env["memory_clock_khz"] = clock_khz
        env["memory_bus_width_bits"] = bus_bits
        env["theoretical_bandwidth_bytes_per_s"] = 2.0 * clock_khz * 1e3 * bus_bits / 8
    for key, value in _nvml_snapshot(props, index).items():
        env[f"nvml_{key}_before" if key in _DRIFTING else f"nvml_{key}"] = value
    return env


_DRIFTING = {"sm_clock_mhz", "memory_clock_mhz", "clock_event_reasons", "temperature_c"}


# --- kernels ----------------------------------------------------------------------------------


def reference_decode(torch: Any, q: Any, k: Any, v: Any) -> Any:
    """softmax(q K^T / sqrt(d)) V for q (B, Hq, 1, d), K/V (B, Hkv, S, d); K/V read once each.

    The query heads of a group are folded into the row dimension, so no K/V copy is made.
    """
    b, hq, _, d = q.shape
    hkv = k.shape[1]
    qg = q.reshape(b, hkv, hq // hkv, d)
    kk, vv = k, v
    if kk.dtype != qg.dtype:  # fp8 storage: dequantise on read (a naive path, flagged)
        kk, vv = kk.to(qg.dtype), vv.to(qg.dtype)
    scores = torch.matmul(qg, kk.transpose(-1, -2)).float() * (1.0 / math.sqrt(d))
    probs = torch.softmax(scores, dim=-1).to(qg.dtype)
    return torch.matmul(probs, vv).reshape(b, hq, 1, d)


def sdpa_decode(torch: Any, q: Any, k: Any, v: Any) -> Any:
    """SDPA at q_len = 1 with GQA; K/V are (B, Hkv, S, d) views of (B, S, Hkv, d) storage."""
    gqa = q.shape[1] != k.shape[1]
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)


@dataclass(frozen=True, slots=True)
class Choice:
    name: str  # "sdpa-flash", ..., "matmul-reference"
    sdpa_backend: Any  # an SDPBackend member, or None for the reference
    layout: str  # "bshd" (SDPA storage) or "bhsd" (reference storage)
    flags: tuple[str, ...]
    notes: tuple[str, ...]


def choose_backend(
    torch: Any, device: Any, shape: AttentionShape, dtype: Any, prefer: Sequence[str] = ()
) -> Choice:
    """The first SDPA kernel that runs this shape and matches the reference, else the reference.

    Each candidate is pinned alone with `sdpa_kernel`, so the name recorded is the kernel that
    ran, not the one dispatch might have picked.
    """
    attention = importlib.import_module("torch.nn.attention")
    gen = torch.Generator(device=device).manual_seed(0)
    b, s, d = 2, 256, shape.head_dim
    mk = {"device": device, "dtype": torch.float32, "generator": gen}
    q = torch.randn(b, shape.num_q_heads, 1, d, **mk)
    k = torch.randn(b, s, shape.num_kv_heads, d, **mk).transpose(1, 2)
    v = torch.randn(b, s, shape.num_kv_heads, d, **mk).transpose(1, 2)
    want = reference_decode(torch, q, k, v)
    notes: list[str] = []
    is_fp8 = "float8" in str(dtype)
    order = [n for n in (prefer or _SDPA_ORDER) if n in _SDPA_ORDER]
    if is_fp8:
        notes.append("fp8 KV: torch SDPA cannot read fp8 K/V; the matmul reference upcasts it")
        order = []
    for name in order:
        member = getattr(attention.SDPBackend, name, None)
        if member is None:
            continue
        try:
            with attention.sdpa_kernel([member]):
                got = sdpa_decode(torch, q.to(dtype), k.to(dtype), v.to(dtype))
            if not torch.allclose(got.float(), want, atol=5e-2, rtol=5e-2):
                notes.append(f"{_BACKEND_NAMES[name]} disagreed with the reference; skipped")
                continue
        except (RuntimeError, TypeError, ValueError) as exc:
            notes.append(f"{_BACKEND_NAMES[name]} unavailable: {str(exc).splitlines()[0][:160]}")
            continue
        flags: tuple[str, ...] = ()
        if name == "MATH":
            flags = ("math_fallback", "fallback", "not_representative")
            notes.append(
                "sdpa-math materialises attention and expands GQA K/V: much slower than the "
                "fused kernels a server uses"
            )
        return Choice(_BACKEND_NAMES[name], member, "bshd", flags, tuple(notes))
    flags = ("fallback",) + (("not_representative",) if is_fp8 else ())
    notes.append("no fused SDPA kernel ran this shape: matmul reference (two batched GEMVs)")
    return Choice("matmul-reference", None, "bhsd", flags, tuple(notes))


# --- cases ------------------------------------------------------------------------------------


def _event_timer(torch: Any, run: Callable[[int], None]) -> Callable[[int], float]:
    def time_calls(n: int) -> float:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        run(n)
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3

    return time_calls


def _read_case(torch: Any, pool: Any, n_bytes: int) -> Case:
    x = pool[: n_bytes // 4]
    out = torch.empty((), device=pool.device, dtype=torch.float32)

    def run(n: int) -> None:
        for _ in range(n):
            torch.sum(x, 0, out=out)

    return Case("read", x.numel() * 4, x.numel() * 4, _event_timer(torch, run))


def _copy_case(torch: Any, pool: Any, n_bytes: int) -> Case:
    half = n_bytes // 4 // 2
    src, dst = pool[:half], pool[half : 2 * half]

    def run(n: int) -> None:
        for _ in range(n):
            dst.copy_(src)

    nbytes = 2 * half * 4  # read + write: STREAM/BabelStream count a copy as 2N
    return Case("copy", nbytes, nbytes, _event_timer(torch, run))


def capture_graph(torch: Any, call_all: Callable[[], None]) -> Callable[[], None] | None:
    """`call_all` (one rotation of R calls, or one model step) captured in a CUDA graph after
    two warm-up runs on a side stream; None when capture is not possible."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                call_all()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call_all()
        torch.cuda.synchronize()
        replay: Callable[[], None] = graph.replay
        return replay
    except Exception:
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: S110 - the eager path reports its own errors
            pass
        return None


def _decode_case(
    torch: Any,
    pool: Any,
    choice: Choice,
    shape: AttentionShape,
    dtype: Any,
    size: tuple[int, int, int],
    use_graph: bool,
) -> tuple[Case, bool]:
    """One (batch, context, rotations) size; True when its rotation runs as a CUDA graph."""
    batch, ctx, rotations = size
    d, hkv, hq = shape.head_dim, shape.num_kv_heads, shape.num_q_heads
    per = batch * ctx * hkv * d
    views = []
    for j in range(rotations):
        kv = []
        for half in (0, 1):
            flat = pool[(2 * j + half) * per : (2 * j + half + 1) * per]
            if choice.layout == "bshd":
                kv.append(flat.view(batch, ctx, hkv, d).transpose(1, 2))
            else:
                kv.append(flat.view(batch, hkv, ctx, d))
        views.append((kv[0], kv[1]))
    q = torch.randn(batch, hq, 1, d, device=pool.device, dtype=torch.float32)
    q = q.to(torch.bfloat16 if "float8" in str(dtype) else dtype)

    def one(j: int) -> None:
        k, v = views[j % rotations]
        if choice.sdpa_backend is None:
            reference_decode(torch, q, k, v)
        else:
            sdpa_decode(torch, q, k, v)

    def call_all() -> None:
        for j in range(rotations):
            one(j)

    replay = capture_graph(torch, call_all) if use_graph else None
    cursor = [0]

    def run_eager(n: int) -> None:
        for i in range(cursor[0], cursor[0] + n):
            one(i)
        cursor[0] += n

    if replay is not None:
        graph_replay = replay

        def time_graph(n: int) -> float:
            # One replay is R calls; report time for n calls at the measured per-call rate.
            reps = max(1, round(n / rotations))
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                graph_replay()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) / 1e3 * n / (reps * rotations)

        timer: Callable[[int], float] = time_graph
    else:
        timer = _event_timer(torch, run_eager)
    itemsize = int(pool.element_size())
    n_bytes = 2 * per * itemsize
    case = Case("decode", n_bytes, n_bytes * rotations, timer, batch=batch, context_tokens=ctx)
    return case, replay is not None


@dataclass(frozen=True, slots=True)
class CudaConfig:
    index: int = 0
    read_max_bytes: int | None = None  # None: max(16 x L2, 2 GiB) within the memory cap
    decode_min_bytes: int = 1 * MiB
    decode_max_bytes: int = 1 * GiB
    min_fit_bytes: int = 4 * MiB
    batches: tuple[int, ...] = (1, 4, 16, 64)
    copy_share: float = 0.3
    use_graphs: bool = True
    prefer: tuple[str, ...] = ()
    sweep: SweepConfig = field(
        default_factory=lambda: SweepConfig(
            passes=3, min_sample_seconds=1e-3, min_samples=5, max_samples=30, warmup_seconds=0.025
        )
    )


def _torch_dtype(torch: Any, name: str) -> Any:
    table = {"bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn"}
    if name not in table or not hasattr(torch, table[name]):
        raise ProbeUnavailable(f"dtype {name!r} is not available in this torch; use bf16 or fp16")
    return getattr(torch, table[name])


def probe_cuda(
    shape: AttentionShape,
    deadline: Deadline,
    *,
    dtype: str = "bf16",
    max_memory_bytes: int | None = None,
    config: CudaConfig | None = None,
) -> BackendResult:
    torch = import_torch()
    if not torch.cuda.is_available():
        raise ProbeUnavailable("no CUDA/ROCm device is visible to torch; use device 'cpu'")
    cfg = config or CudaConfig()
    torch.cuda.set_device(cfg.index)
    device = torch.device("cuda", cfg.index)
    env = environment(torch, cfg.index)
    props = torch.cuda.get_device_properties(cfg.index)
    name = str(props.name)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0) or 50 * MiB  # unknown: Hopper's 50 MB
    free, _total = torch.cuda.mem_get_info(cfg.index)
    notes: list[str] = []
    cap = int(free) // 4
    if max_memory_bytes is not None:
        if max_memory_bytes > cap:
            notes.append(f"memory cap lowered to 25% of free device memory ({cap} bytes)")
        cap = min(cap, max_memory_bytes)
    kv_dtype = _torch_dtype(torch, dtype)
    choice = choose_backend(torch, device, shape, kv_dtype, cfg.prefer)
    notes.extend(choice.notes)
    flags = ["gpu_figures", *choice.flags]

    # Copy ceiling: geometric sizes up to max(16 x L2, 2 GiB); >= 8 x L2 is the asymptote.
    read_max = cfg.read_max_bytes or max(16 * l2, 2 * GiB)
    read_max = min(read_max, cap) // MiB * MiB
    if read_max < 8 * l2:
        notes.append("memory cap keeps copy buffers under 8 x L2: ceiling may be cache-inflated")
    pool = torch.empty(read_max // 4, device=device, dtype=torch.float32).normal_()
    sizes = sorted({max(MiB, read_max >> k) for k in (0, 1, 3, 5)})
    read_cases = [_read_case(torch, pool, s) for s in sizes]
    copy_cases = [_copy_case(torch, pool, read_max)]
    read_cases[-1].time_calls(8)  # wake the clocks before the first timed size
    truncated = sweep([*read_cases, *copy_cases], cfg.sweep, deadline.sub(cfg.copy_share))
    release([*read_cases, *copy_cases])  # the closures hold views of the pool
    del pool
    torch.cuda.empty_cache()

    # Decode attention: rotating KV buffers, R x bytes >= 4 x L2.
    itemsize = int(torch.empty((), dtype=kv_dtype).element_size())
    grid = decode_grid(
        shape,
        min_bytes=cfg.decode_min_bytes,
        max_bytes=min(cfg.decode_max_bytes, cap // 2),
        itemsize=itemsize,
        batches=cfg.batches,
    )
    per_token = 2 * shape.num_kv_heads * shape.head_dim * itemsize
    plan = [(b, c, min(MAX_ROTATIONS, max(2, -(-4 * l2 // (per_token * b * c))))) for b, c in grid]
    pool_bytes = min(cap, max((per_token * b * c * r for b, c, r in plan), default=0))
    kv_pool = torch.empty(pool_bytes // itemsize, device=device, dtype=kv_dtype)
    if itemsize == 1:  # fp8 has no normal_(): small positive values from random bytes
        kv_pool.view(torch.uint8).random_(0, 0x40)
    else:
        kv_pool.normal_()
    attention = importlib.import_module("torch.nn.attention")
    decode_cases: list[Case] = []
    graphs = 0
    with ExitStack() as stack:
        if choice.sdpa_backend is not None:
            stack.enter_context(attention.sdpa_kernel([choice.sdpa_backend]))
        elements_per_token = 2 * shape.num_kv_heads * shape.head_dim
        for batch, ctx, want in plan:
            rotations = min(want, kv_pool.numel() // (elements_per_token * batch * ctx))
            if rotations < 1:
                continue
            case, graphed = _decode_case(
                torch, kv_pool, choice, shape, kv_dtype, (batch, ctx, rotations), cfg.use_graphs
            )
            decode_cases.append(case)
            graphs += graphed
        truncated = sweep(decode_cases, cfg.sweep, deadline) or truncated
    release(decode_cases)  # graphs and views hold the KV pool
    del kv_pool
    torch.cuda.synchronize()
    torch.cuda.empty_cache()

    mode = "cuda_graph" if graphs == len(decode_cases) else "eager" if graphs == 0 else "mixed"
    env["launch_mode"] = mode
    if mode != "cuda_graph":
        flags.append("host_launch_included")
        notes.append("CUDA graph capture failed for some sizes: host launch gaps are in t0")
    after = _nvml_snapshot(props, cfg.index)
    for key in sorted(_DRIFTING):
        if key in after:
            env[f"nvml_{key}_after"] = after[key]
    reasons = after.get("clock_event_reasons")
    if isinstance(reasons, int) and reasons & _THROTTLE_MASK:
        flags.append("throttled")
        notes.append(f"throttled: NVML clock-event reasons 0x{reasons:x} after the probe")
    datasheet = lookup(
        name, memory_bytes=int(props.total_memory), sm_count=int(props.multi_processor_count)
    )
    return BackendResult(
        device_kind="rocm" if env.get("hip_version") else "cuda",
        device_name=name,
        backend=choice.name,
        dtype=dtype,
        shape=shape,
        read_cases=read_cases,
        copy_cases=copy_cases,
        decode_cases=decode_cases,
        cache_bytes=l2,
        asymptotic_bytes=8 * l2,
        resident_factor=4,
        min_fit_bytes=cfg.min_fit_bytes,
        copy_byte_convention=(
            "read-only reduction counts N bytes (the ceiling); device copy counts 2N (STREAM)"
        ),
        environment=env,
        flags=flags,
        notes=notes,
        datasheet_bandwidth_bytes_per_s=datasheet[0] if datasheet else None,
        datasheet_source=datasheet[1] if datasheet else None,
        truncated=truncated,
    )
