"""CPU backend (NumPy): streaming ceiling and a decode-attention analogue. CPU figures only.

Follows the probe protocol (README, "Probe and calibration"): T threads over disjoint contiguous
chunks (NumPy ufuncs release
the GIL), T from the affinity mask and the cgroup quota; every array first-touched by the thread
that will read it; arrays well above the last-level cache; a read-only reduction as the ceiling
(no write-allocate ambiguity); a copy counted as 2N logical bytes. The attention analogue runs at
q_len = 1 over a GQA shape in fp32 (NumPy has no bf16), rotating through enough KV buffers that
every call reads memory the previous calls evicted.
"""

from __future__ import annotations

import math
import os
import platform
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.core.units import GiB, MiB
from planner.probe.backend import BackendResult
from planner.probe.model import AttentionShape, EnvValue
from planner.probe.timing import Case, Deadline, SweepConfig, release, sweep

F32 = np.float32
F32_BYTES = 4
DEFAULT_LLC_BYTES = 32 * MiB
_ALIGN_ELEMS = 1024  # chunk boundaries on 4 KiB so no two threads share a page
Array = npt.NDArray[np.float32]
WorkerFn = Callable[[int, int], None]


# --- what the host offers -------------------------------------------------------------------


def _parse_cache_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)\s*i?B?\s*", text, re.IGNORECASE)
    if not m:
        return 0
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]


def last_level_cache_bytes(sys_cpu: Path = Path("/sys/devices/system/cpu")) -> int:
    """Sum of the distinct highest-level cache instances (L3 slices shared by CPU sets).

    Read from sysfs; then `lscpu`; else 32 MiB, a common server L3 and a safe over-estimate
    for laptops.
    """
    instances: dict[tuple[int, str], int] = {}
    for index in sys_cpu.glob("cpu[0-9]*/cache/index[0-9]*"):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = _parse_cache_size((index / "size").read_text())
            shared = (index / "shared_cpu_list").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind != "Instruction" and size:
            instances[(level, shared)] = size
    if instances:
        top = max(level for level, _ in instances)
        return sum(size for (level, _), size in instances.items() if level == top)
    try:
        out = subprocess.run(
            ["lscpu", "--caches=NAME,ALL-SIZE", "--bytes", "--noheadings"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout
        sizes = {
            int(name[1]): int(size)
            for name, size in (line.split() for line in out.splitlines() if len(line.split()) == 2)
            if re.fullmatch(r"L\d[di]?", name) and size.isdigit()
        }
        if sizes:
            return sizes[max(sizes)]
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    return DEFAULT_LLC_BYTES


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def usable_cores() -> int:
    """Cores this process may use: the affinity mask, capped by a cgroup CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota: float | None = None
    try:
        text = Path("/sys/fs/cgroup/cpu.max").read_text().split()  # cgroup v2: "max 100000"
        if text and text[0] != "max":
            quota = int(text[0]) / int(text[1])
    except (OSError, ValueError, IndexError):
        q = _read_int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"))  # cgroup v1
        p = _read_int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))
        if q and p and q > 0:
            quota = q / p
    if quota:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


def available_memory_bytes() -> int:
    """MemAvailable, capped by a cgroup memory limit when one is set."""
    avail = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    if not avail:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            avail = 4 * GiB
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
        ),
    ):
        limit, usage = _read_int(Path(limit_file)), _read_int(Path(usage_file))
        if limit and usage is not None and limit < (1 << 60):
            avail = min(avail, max(0, limit - usage))
    return avail


def cpu_model_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


# --- threads ----------------------------------------------------------------------------------


class _Team:
    """Persistent worker threads that start a timed loop together (a barrier) over own chunks."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kvplan-probe")

    def run(self, fns: Sequence[Callable[[], None]]) -> None:
        for fut in [self._pool.submit(fn) for fn in fns]:
            fut.result()

    def timed(self, fns: Sequence[WorkerFn], start: int, n: int) -> float:
        """Seconds from the first worker's start to the last worker's end of n calls."""
        barrier = threading.Barrier(len(fns))

        def one(fn: WorkerFn) -> tuple[float, float]:
            barrier.wait(timeout=60)
            t_start = time.perf_counter()
            fn(start, n)
            return t_start, time.perf_counter()

        spans = [fut.result() for fut in [self._pool.submit(one, fn) for fn in fns]]
        return max(end for _, end in spans) - min(start for start, _ in spans)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _ranges(total: int, parts: int, align: int = 1) -> list[tuple[int, int]]:
    """Split [0, total) into up to `parts` contiguous ranges with aligned boundaries."""
    parts = max(1, min(parts, total))
    step = -(-total // parts)
    step = -(-step // align) * align
    return [(lo, min(total, lo + step)) for lo in range(0, total, step)]


def _touched_pool(team: _Team, n_elems: int, value: float) -> Array:
    """An fp32 array whose pages each worker touched first (NUMA placement, no page faults)."""
    pool = np.empty(n_elems, dtype=F32)

    def fill(lo: int, hi: int) -> Callable[[], None]:
        return lambda: pool[lo:hi].fill(value)

    team.run([fill(lo, hi) for lo, hi in _ranges(n_elems, team.threads, _ALIGN_ELEMS)])
    return pool


# --- cases ------------------------------------------------------------------------------------


def _read_case(team: _Team, pool: Array, n_bytes: int) -> Case:
    arr = pool[: n_bytes // F32_BYTES]
    chunks = [arr[lo:hi] for lo, hi in _ranges(arr.size, team.threads, _ALIGN_ELEMS)]

    def worker(chunk: Array) -> WorkerFn:
        def fn(_start: int, n: int) -> None:
            for _ in range(n):
                np.add.reduce(chunk)

        return fn

    fns = [worker(c) for c in chunks]
    return Case("read", arr.nbytes, arr.nbytes, lambda n: team.timed(fns, 0, n))


def _copy_case(team: _Team, pool: Array, n_bytes: int) -> Case:
    half = n_bytes // F32_BYTES // 2
    src, dst = pool[:half], pool[half : 2 * half]
    spans = _ranges(half, team.threads, _ALIGN_ELEMS)

    def worker(lo: int, hi: int) -> WorkerFn:
        s, d = src[lo:hi], dst[lo:hi]

        def fn(_start: int, n: int) -> None:
            for _ in range(n):
                np.copyto(d, s)

        return fn

    fns = [worker(lo, hi) for lo, hi in spans]
    # STREAM/BabelStream convention: a copy moves 2N logical bytes (read + write).
    return Case("copy", 2 * src.nbytes, 2 * src.nbytes, lambda n: team.timed(fns, 0, n))


@dataclass(slots=True)
class DecodeAnalogue:
    """q_len = 1 attention over R rotating KV buffers: softmax(q K^T / sqrt(d)) V per KV head."""

    shape: AttentionShape
    batch: int
    context_tokens: int
    buffers: list[tuple[Array, Array]]  # (K, V), each (batch * kv_heads, ctx, head_dim)
    q: Array  # (batch * kv_heads, group, head_dim), pre-scaled by 1/sqrt(d)
    out: Array  # (batch * kv_heads, group, head_dim)
    cursor: int = 0
    fns: list[WorkerFn] = field(default_factory=list)

    @property
    def bytes_per_call(self) -> int:
        # Logical KV bytes: K and V of every token of every KV head, read once per call.
        k, v = self.buffers[0]
        return k.nbytes + v.nbytes

    def worker(self, lo: int, hi: int) -> WorkerFn:
        rows, group, ctx = hi - lo, self.shape.group_size, self.context_tokens
        qs, o = self.q[lo:hi], self.out[lo:hi]
        scores = np.empty((rows, group, ctx), dtype=F32)
        peak = np.empty((rows, group, 1), dtype=F32)
        total = np.empty((rows, group, 1), dtype=F32)
        buffers = self.buffers

        def fn(start: int, n: int) -> None:
            for i in range(start, start + n):
                k, v = buffers[i % len(buffers)]
                np.matmul(qs, k[lo:hi].transpose(0, 2, 1), out=scores)
                np.max(scores, axis=-1, keepdims=True, out=peak)
                np.subtract(scores, peak, out=scores)
                np.exp(scores, out=scores)
                np.sum(scores, axis=-1, keepdims=True, out=total)
                np.divide(scores, total, out=scores)
                np.matmul(scores, v[lo:hi], out=o)

        return fn

    def time_calls(self, team: _Team, n: int) -> float:
        # The cursor carries over between samples so short samples never re-read warm buffers.
        elapsed = team.timed(self.fns, self.cursor, n)
        self.cursor += n
        return elapsed


def make_decode_analogue(
    team: _Team,
    pool: Array,
    shape: AttentionShape,
    batch: int,
    context_tokens: int,
    rotations: int,
    rng: np.random.Generator,
) -> DecodeAnalogue:
    rows, d = batch * shape.num_kv_heads, shape.head_dim
    per = rows * context_tokens * d
    if 2 * per * rotations > pool.size:
        raise ValueError("decode case does not fit the buffer pool")
    buffers = [
        (
            pool[(2 * j) * per : (2 * j + 1) * per].reshape(rows, context_tokens, d),
            pool[(2 * j + 1) * per : (2 * j + 2) * per].reshape(rows, context_tokens, d),
        )
        for j in range(rotations)
    ]
    q = (rng.standard_normal((rows, shape.group_size, d)) / math.sqrt(d)).astype(F32)
    out = np.empty_like(q)
    case = DecodeAnalogue(shape, batch, context_tokens, buffers, q, out)
    case.fns = [case.worker(lo, hi) for lo, hi in _ranges(rows, team.threads)]
    return case


def decode_grid(
    shape: AttentionShape,
    *,
    min_bytes: int,
    max_bytes: int,
    itemsize: int,
    batches: Sequence[int] = (1, 4, 16),
) -> list[tuple[int, int]]:
    """(batch, context) pairs whose KV bytes double from min to max, cycling the batch size.

    Mixing batch sizes at one byte count tests the premise that bytes, not batch or context,
    decide the time (the FlashInfer observation).
    """
    per_token = 2 * shape.num_kv_heads * shape.head_dim * itemsize
    out: list[tuple[int, int]] = []
    target, i = min_bytes, 0
    while target <= max_bytes:
        for k in range(len(batches)):
            batch = batches[(i + k) % len(batches)]
            ctx = target // (per_token * batch)
            if ctx >= 16:
                out.append((batch, ctx))
                break
        target *= 2
        i += 1
    return out


# --- the backend ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CpuConfig:
    """Sizes and timing of the CPU probe. Defaults follow the probe protocol; tests shrink them."""

    threads: int | None = None
    # Largest read array; None: max(4 x LLC, 256 MiB) (STREAM's rule), within the memory cap.
    read_max_bytes: int | None = None
    read_sizes: int = 3
    decode_min_bytes: int = 1 * MiB
    decode_max_bytes: int = 64 * MiB
    # Working set of one rotation; None: 4 x LLC.
    rotation_bytes: int | None = None
    min_fit_bytes: int = 4 * MiB
    batches: tuple[int, ...] = (1, 4, 16)
    copy_share: float = 0.35
    sweep: SweepConfig = field(
        default_factory=lambda: SweepConfig(
            passes=3,
            min_sample_seconds=0.005,
            min_samples=3,
            max_samples=15,
            warmup_seconds=0.01,
            min_warmup_calls=2,
        )
    )
    llc_bytes: int | None = None


def _blas_single_thread() -> tuple[AbstractContextManager[Any], str]:
    """Limit BLAS to one thread while our own threads split the work (no oversubscription)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return nullcontext(), "unlimited (threadpoolctl not installed)"
    return threadpool_limits(limits=1, user_api="blas"), "1 per worker (threadpoolctl)"


def _geometric(max_bytes: int, count: int, floor: int = 1 * MiB) -> list[int]:
    sizes = {max(floor, max_bytes >> k) // 4096 * 4096 for k in range(count)}
    return sorted(s for s in sizes if s > 0)


def probe_cpu(
    shape: AttentionShape,
    deadline: Deadline,
    *,
    max_memory_bytes: int | None = None,
    config: CpuConfig | None = None,
) -> BackendResult:
    cfg = config or CpuConfig()
    threads = cfg.threads or usable_cores()
    llc = cfg.llc_bytes or last_level_cache_bytes()
    avail = available_memory_bytes()
    cap = min(avail // 4, 2 * GiB)
    notes: list[str] = []
    if max_memory_bytes is not None:
        if max_memory_bytes > cap:
            notes.append(
                f"memory cap lowered from {max_memory_bytes} to {cap} bytes "
                "(25% of available memory, at most 2 GiB)"
            )
        cap = min(cap, max_memory_bytes)
    read_max = cfg.read_max_bytes or max(4 * llc, 256 * MiB)
    read_max = max(MiB, min(read_max, cap))
    rotation = cfg.rotation_bytes or 4 * llc
    env: dict[str, EnvValue] = {
        "cpu_model": cpu_model_name(),
        "threads": threads,
        "logical_cpus": os.cpu_count() or 0,
        "last_level_cache_bytes": llc,
        "available_memory_bytes": avail,
        "memory_cap_bytes": cap,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(terse=True),
    }
    team = _Team(threads)
    try:
        copy_deadline = deadline.sub(cfg.copy_share)
        pool = _touched_pool(team, read_max // F32_BYTES, 1.0)
        read_cases = [_read_case(team, pool, s) for s in _geometric(read_max, cfg.read_sizes)]
        copy_cases = [_copy_case(team, pool, read_max)]
        truncated = sweep([*read_cases, *copy_cases], cfg.sweep, copy_deadline)
        release([*read_cases, *copy_cases])  # the closures hold views of the pool
        single = _Team(1)
        try:
            one = _read_case(single, pool, read_max)
            env["single_thread_read_bytes_per_s"] = read_max / min(
                one.time_calls(1) for _ in range(3)
            )
        finally:
            single.close()
        del pool, one

        max_call = min(cfg.decode_max_bytes, cap // 2)
        grid = decode_grid(
            shape,
            min_bytes=cfg.decode_min_bytes,
            max_bytes=max_call,
            itemsize=F32_BYTES,
            batches=cfg.batches,
        )
        per_token = 2 * shape.num_kv_heads * shape.head_dim * F32_BYTES
        need = [(b, c, max(2, -(-rotation // (per_token * b * c)))) for b, c in grid]
        pool_bytes = min(cap, max(per_token * b * c * r for b, c, r in need))
        pool = _touched_pool(team, pool_bytes // F32_BYTES, 0.01)
        rng = np.random.default_rng(0)
        decode_cases: list[Case] = []
        limiter, blas_note = _blas_single_thread()
        env["blas_threads"] = blas_note
        for batch, ctx, want in need:
            fit_r = pool.size * F32_BYTES // (per_token * batch * ctx)
            rotations = min(want, fit_r)
            if rotations < 1:
                continue
            analogue = make_decode_analogue(team, pool, shape, batch, ctx, rotations, rng)
            decode_cases.append(
                Case(
                    "decode",
                    analogue.bytes_per_call,
                    analogue.bytes_per_call * rotations,
                    _bind(analogue, team),
                    batch=batch,
                    context_tokens=ctx,
                )
            )
        with limiter:
            truncated = sweep(decode_cases, cfg.sweep, deadline) or truncated
        release(decode_cases)
        del pool
    finally:
        team.close()
    return BackendResult(
        device_kind="cpu",
        device_name=f"CPU: {env['cpu_model']} ({threads} threads)",
        backend="numpy-cpu",
        dtype="fp32",
        shape=shape,
        read_cases=read_cases,
        copy_cases=copy_cases,
        decode_cases=decode_cases,
        cache_bytes=llc,
        asymptotic_bytes=4 * llc,
        resident_factor=4,
        min_fit_bytes=cfg.min_fit_bytes,
        copy_byte_convention=(
            "read-only reduction counts N bytes (the ceiling); copy counts 2N (STREAM)"
        ),
        environment=env,
        flags=["cpu_figures", *(["smoke_only"] if os.environ.get("CI") else [])],
        notes=[
            "CPU figures: NumPy fp32 decode-attention analogue, meaningful only for CPU decoding",
            *notes,
        ],
        truncated=truncated,
    )


def _bind(analogue: DecodeAnalogue, team: _Team) -> Callable[[int], float]:
    return lambda n: analogue.time_calls(team, n)


def reference_attention(q: Array, k: Array, v: Array) -> Array:
    """Plain softmax(q K^T) V per row, for checking the analogue (q already scaled)."""
    s = np.einsum("rgd,rtd->rgt", q.astype(np.float64), k.astype(np.float64))
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    out: Array = np.einsum("rgt,rtd->rgd", s, v.astype(np.float64)).astype(F32)
    return out


def iter_chunks(total: int, parts: int) -> Iterator[tuple[int, int]]:
    """Public for tests: the disjoint chunk ranges the workers use."""
    yield from _ranges(total, parts, _ALIGN_ELEMS)
