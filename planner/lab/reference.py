"""NumPy reference decoder: the cache is exact, so full == token-by-token == chunked.

A small multi-layer causal decoder with GQA and RoPE (seed 000's lab). Each layer keeps its own
K/V cache; a chunk of T tokens appended after P cached ones is given absolute positions P..P+T-1
and a bottom-right-aligned T × (P+T) boolean mask. The two classic bugs are switchable so a test
can prove they are caught: a top-left-aligned mask and a position offset left at zero.

float64 throughout: the correct paths then agree to ~1e-15 and any real bug is orders of
magnitude above the tolerance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]
Mask = NDArray[np.bool_]
Align = Literal["bottom_right", "top_left"]
Offset = Literal["cache", "zero"]
GQAPath = Literal["indexed", "repeat"]

# Scaled outputs of a correct run differ by rounding only; a wrong mask or position is >1e-3.
ATOL = 1e-9
RTOL = 1e-9
ROPE_BASE = 10000.0


@dataclass(frozen=True, slots=True)
class Shape:
    layers: int = 2
    q_heads: int = 4
    kv_heads: int = 2
    head_dim: int = 8
    model_dim: int = 32

    def __post_init__(self) -> None:
        if self.q_heads % self.kv_heads:
            raise ValueError("q_heads must be a multiple of kv_heads")
        if self.head_dim % 2:
            raise ValueError("head_dim must be even for RoPE")

    @property
    def group(self) -> int:
        """Query heads sharing one KV head (Hq=32, Hkv=8 -> 4)."""
        return self.q_heads // self.kv_heads


@dataclass(frozen=True, slots=True)
class LayerWeights:
    wq: Array  # (D, Hq·d)
    wk: Array  # (D, Hkv·d)
    wv: Array  # (D, Hkv·d)
    wo: Array  # (Hq·d, D)
    w1: Array  # (D, 2D)  position-wise MLP, so layer 2's K/V depend on layer 1's output
    w2: Array  # (2D, D)


@dataclass(frozen=True, slots=True)
class Model:
    shape: Shape
    layers: tuple[LayerWeights, ...]


# One (K, V) pair per layer, each (Hkv, cached_tokens, d); K is stored already rotated.
LayerCache = tuple[Array, Array]
Cache = tuple[LayerCache, ...]


def init_model(shape: Shape, seed: int = 0) -> Model:
    rng = np.random.default_rng(seed)
    D, d = shape.model_dim, shape.head_dim

    def w(rows: int, cols: int) -> Array:
        # Small weights keep softmax soft, so a wrong mask moves the output well above ATOL.
        out: Array = rng.standard_normal((rows, cols)) * (0.5 / float(np.sqrt(rows)))
        return out

    layers = tuple(
        LayerWeights(
            wq=w(D, shape.q_heads * d),
            wk=w(D, shape.kv_heads * d),
            wv=w(D, shape.kv_heads * d),
            wo=w(shape.q_heads * d, D),
            w1=w(D, 2 * D),
            w2=w(2 * D, D),
        )
        for _ in range(shape.layers)
    )
    return Model(shape, layers)


def random_tokens(shape: Shape, tokens: int, seed: int = 0) -> Array:
    """Stand-in token embeddings, (tokens, D)."""
    return np.random.default_rng(seed + 1).standard_normal((tokens, shape.model_dim))


def empty_cache(shape: Shape) -> Cache:
    z = np.zeros((shape.kv_heads, 0, shape.head_dim))
    return tuple((z, z) for _ in range(shape.layers))


def cache_tokens(cache: Cache) -> int:
    return int(cache[0][0].shape[1]) if cache else 0


def cache_elements(cache: Cache) -> int:
    """Stored K and V elements: depends on Hkv, never on Hq."""
    return sum(int(k.size + v.size) for k, v in cache)


# --- building blocks -------------------------------------------------------------------------


def causal_mask(cached_tokens: int, chunk_tokens: int, align: Align = "bottom_right") -> Mask:
    """T × (P+T) boolean mask: True where query row i may read key column j.

    Bottom-right: row i is absolute position P+i and sees columns 0..P+i. Top-left (the bug seed
    000 warns about): row i sees 0..i, so with P=3, T=2 query 3 sees only key 0.
    """
    rows = np.arange(chunk_tokens)[:, None]
    cols = np.arange(cached_tokens + chunk_tokens)[None, :]
    shift = cached_tokens if align == "bottom_right" else 0
    mask: Mask = cols <= rows + shift
    return mask


def window_mask(cached_tokens: int, chunk_tokens: int, window_tokens: int) -> Mask:
    """Bottom-right causal mask that also drops keys more than window-1 positions back."""
    rows = np.arange(chunk_tokens)[:, None] + cached_tokens
    cols = np.arange(cached_tokens + chunk_tokens)[None, :]
    mask: Mask = (cols <= rows) & (rows - cols < window_tokens)
    return mask


def rope(x: Array, positions: NDArray[np.int64]) -> Array:
    """Rotate-half RoPE on (heads, T, d) at absolute `positions` (length T)."""
    d = x.shape[-1]
    inv_freq = ROPE_BASE ** (-np.arange(0, d, 2) / d)
    angles = positions[:, None].astype(np.float64) * inv_freq[None, :]  # (T, d/2)
    cos = np.concatenate([np.cos(angles)] * 2, axis=-1)
    sin = np.concatenate([np.sin(angles)] * 2, axis=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    rotated = np.concatenate([-x2, x1], axis=-1)
    out: Array = x * cos + rotated * sin
    return out


def softmax(scores: Array) -> Array:
    shifted = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    out: Array = e / e.sum(axis=-1, keepdims=True)
    return out


def kv_head_for(query_head: int, shape: Shape) -> int:
    """GQA is an index map: query head h reads KV head h // group."""
    return query_head // shape.group


def attention(q: Array, k: Array, v: Array, mask: Mask, path: GQAPath = "indexed") -> Array:
    """q (Hq, T, d), k/v (Hkv, S, d), mask (T, S) -> (Hq, T, d).

    `repeat` copies each KV head `group` times (repeat_interleave; the reference). `indexed`
    views q as (Hkv, group, T, d) and broadcasts the shared head, copying no K/V.
    """
    hq, t, d = q.shape
    hkv = k.shape[0]
    scale = 1.0 / np.sqrt(d)
    if path == "repeat":
        group = hq // hkv
        k_rep, v_rep = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
        scores = q @ k_rep.transpose(0, 2, 1) * scale
        scores = np.where(mask[None], scores, -np.inf)
        out: Array = softmax(scores) @ v_rep
        return out
    qg = q.reshape(hkv, hq // hkv, t, d)
    scores = np.einsum("hgtd,hsd->hgts", qg, k) * scale
    scores = np.where(mask[None, None], scores, -np.inf)
    out = np.einsum("hgts,hsd->hgtd", softmax(scores), v).reshape(hq, t, d)
    return out


def rms_norm(x: Array) -> Array:
    out: Array = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)
    return out


def split_heads(x: Array, heads: int, d: int) -> Array:
    """(T, heads·d) -> (heads, T, d)."""
    return x.reshape(x.shape[0], heads, d).transpose(1, 0, 2)


def quantize(x: Array, bits: int) -> Array:
    """Symmetric round-to-nearest, absmax scale per (head, token): what a lossy write does."""
    levels = 2 ** (bits - 1) - 1
    amax = np.abs(x).max(axis=-1, keepdims=True)
    scale = np.where(amax > 0, amax / levels, 1.0)
    out: Array = np.round(x / scale) * scale
    return out


# --- the decoder -----------------------------------------------------------------------------


def project(
    w: LayerWeights, s: Shape, h: Array, positions: NDArray[np.int64]
) -> tuple[Array, Array, Array]:
    """One layer's q (Hq, T, d), rotated k and v (Hkv, T, d) for inputs h (T, D)."""
    hn = rms_norm(h)
    q = rope(split_heads(hn @ w.wq, s.q_heads, s.head_dim), positions)
    k = rope(split_heads(hn @ w.wk, s.kv_heads, s.head_dim), positions)
    v = split_heads(hn @ w.wv, s.kv_heads, s.head_dim)
    return q, k, v


def finish_layer(w: LayerWeights, h: Array, y: Array) -> Array:
    """Residual after attention output y (Hq, T, d), then the position-wise MLP."""
    t = h.shape[0]
    h = h + y.transpose(1, 0, 2).reshape(t, -1) @ w.wo
    out: Array = h + np.tanh(rms_norm(h) @ w.w1) @ w.w2
    return out


@dataclass(frozen=True, slots=True)
class Options:
    """Switches for the bugs a lab must catch, and the lossy write it must measure."""

    align: Align = "bottom_right"
    offset: Offset = "cache"
    gqa: GQAPath = "indexed"
    quant_bits: int | None = None
    window_tokens: int | None = None


def forward(model: Model, x: Array, cache: Cache, opts: Options = Options()) -> tuple[Array, Cache]:
    """Run a chunk x (T, D) after `cache`; return outputs (T, D) and the grown cache.

    Append first, then attend: the chunk's own keys are in the cache it reads (seed 000).
    """
    s = model.shape
    p, t = cache_tokens(cache), x.shape[0]
    start = p if opts.offset == "cache" else 0
    positions = np.arange(start, start + t, dtype=np.int64)
    if opts.window_tokens is not None:
        mask = window_mask(p, t, opts.window_tokens)
    else:
        mask = causal_mask(p, t, opts.align)
    new_cache: list[LayerCache] = []
    h = x
    for w, (k_cache, v_cache) in zip(model.layers, cache, strict=True):
        q, k_new, v_new = project(w, s, h, positions)
        if opts.quant_bits is not None:
            k_new, v_new = quantize(k_new, opts.quant_bits), quantize(v_new, opts.quant_bits)
        k = np.concatenate([k_cache, k_new], axis=1)
        v = np.concatenate([v_cache, v_new], axis=1)
        new_cache.append((k, v))
        h = finish_layer(w, h, attention(q, k, v, mask, opts.gqa))
    return h, tuple(new_cache)


def run_full(model: Model, x: Array, opts: Options = Options()) -> Array:
    y, _ = forward(model, x, empty_cache(model.shape), opts)
    return y


def run_chunks(
    model: Model, x: Array, chunks: Sequence[int], opts: Options = Options()
) -> tuple[Array, Cache]:
    """Feed x in consecutive chunks of the given lengths, carrying the per-layer cache."""
    if sum(chunks) != x.shape[0] or any(c < 1 for c in chunks):
        raise ValueError("chunks must be positive and sum to the number of tokens")
    cache = empty_cache(model.shape)
    outs: list[Array] = []
    pos = 0
    for c in chunks:
        y, cache = forward(model, x[pos : pos + c], cache, opts)
        outs.append(y)
        pos += c
    return np.concatenate(outs, axis=0), cache


def run_tokens(model: Model, x: Array, opts: Options = Options()) -> tuple[Array, Cache]:
    return run_chunks(model, x, [1] * x.shape[0], opts)


def first_mismatch(a: Array, b: Array, atol: float = ATOL, rtol: float = RTOL) -> int | None:
    """Index of the first position (row) where a and b differ beyond tolerance, else None."""
    bad = ~np.isclose(a, b, atol=atol, rtol=rtol).reshape(a.shape[0], -1).all(axis=1)
    idx = np.flatnonzero(bad)
    return int(idx[0]) if idx.size else None


def max_abs_diff(a: Array, b: Array) -> float:
    return float(np.max(np.abs(a - b))) if a.size else 0.0


# --- the seed's hand-worked pieces -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SoftmaxExample:
    """Seed 000: scaled logits [0, ln2, ln3] -> exp [1,2,3] -> /6; V = [2,4,8] -> 34/6."""

    logits: tuple[float, ...]
    exp_exact: tuple[Fraction, ...]
    weights_exact: tuple[Fraction, ...]
    output_exact: Fraction
    weights_float: tuple[float, ...]
    output_float: float


def softmax_example() -> SoftmaxExample:
    ratios = (1, 2, 3)  # exp(ln k) = k exactly; the float path below is the real softmax
    values = (2, 4, 8)
    logits = tuple(float(np.log(r)) for r in ratios)
    exp_exact = tuple(Fraction(r) for r in ratios)
    total = sum(exp_exact, Fraction(0))
    weights_exact = tuple(e / total for e in exp_exact)
    output_exact = sum((w * v for w, v in zip(weights_exact, values, strict=True)), Fraction(0))
    weights = softmax(np.array(logits))
    output = float(weights @ np.array(values, dtype=np.float64))
    return SoftmaxExample(
        logits=logits,
        exp_exact=exp_exact,
        weights_exact=weights_exact,
        output_exact=output_exact,
        weights_float=tuple(float(w) for w in weights),
        output_float=output,
    )


@dataclass(frozen=True, slots=True)
class MaskRow:
    query_position: int
    visible_correct: tuple[int, ...]
    visible_wrong: tuple[int, ...]


def mask_rows(cached_tokens: int, chunk_tokens: int) -> tuple[MaskRow, ...]:
    """For each chunk query, the key columns it sees: bottom-right (correct) vs top-left."""
    good = causal_mask(cached_tokens, chunk_tokens, "bottom_right")
    bad = causal_mask(cached_tokens, chunk_tokens, "top_left")
    return tuple(
        MaskRow(
            query_position=cached_tokens + i,
            visible_correct=tuple(int(j) for j in np.flatnonzero(good[i])),
            visible_wrong=tuple(int(j) for j in np.flatnonzero(bad[i])),
        )
        for i in range(chunk_tokens)
    )
