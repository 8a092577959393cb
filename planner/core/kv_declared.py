"""What a checkpoint's config.json declares of its KV cache quantization (pure).

ModelOpt writes `kv_cache_quant_algo` ("FP8") or, since its config.json exports, a
`kv_cache_scheme` ({"type": "float", "num_bits": 8, "dynamic": false}) in quantization_config
(nested under "quantization" in an hf_quant_config.json read as one); compressed-tensors
(llm-compressor) writes `kv_cache_scheme` ({"type": "float", "num_bits": 8, "strategy":
"tensor", "symmetric": true, "dynamic": false}). Only config.json's own quantization_config is
read, as vLLM's `resolve_kv_cache_dtype_string` (hf_config.quantization_config) and
`CompressedTensorsConfig.from_config` do. What each engine makes of it for `--kv-cache-dtype
auto` is the engine's rule (planner.core.engines.<engine>.kv_checkpoint).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Scalar = str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class KVDeclared:
    """A checkpoint's KV cache declaration: the quantization method (lower-cased), the
    kv_cache_scheme's scalar fields (None: no scheme; a ModelOpt scheme given as a string is
    kept as `algo`) and kv_cache_quant_algo as written."""

    method: str
    scheme: tuple[tuple[str, Scalar], ...] | None
    algo: str | None

    def field(self, key: str, default: Scalar = None) -> Scalar:
        """One field of the kv_cache_scheme (`default` where absent or no scheme)."""
        return dict(self.scheme or ()).get(key, default)

    @property
    def text(self) -> str:
        """The declaration as the checkpoint writes it, for notes and errors."""
        if self.scheme is not None:
            inner = ", ".join(f"{k}={v}" for k, v in self.scheme)
            return f"kv_cache_scheme {{{inner}}}"
        return f"kv_cache_quant_algo {self.algo}"


def kv_declared(config: Mapping[str, Any]) -> KVDeclared | None:
    """The KV cache declaration of config.json's quantization_config, None where it has none."""
    q = config.get("quantization_config")
    if not isinstance(q, Mapping):
        return None
    inner = q.get("quantization", q)  # vLLM get_kv_cache_quant_algo_string's quantization_inner
    inner = inner if isinstance(inner, Mapping) else q
    scheme_raw = inner.get("kv_cache_scheme") or q.get("kv_cache_scheme")
    algo_raw = inner.get("kv_cache_quant_algo") or q.get("kv_cache_quant_algo")
    if isinstance(scheme_raw, str) and not algo_raw:
        algo_raw, scheme_raw = scheme_raw, None
    scheme = None
    if isinstance(scheme_raw, Mapping):
        scheme = tuple(
            sorted(
                (str(k), v)
                for k, v in scheme_raw.items()
                if v is None or isinstance(v, str | int | float | bool)
            )
        )
    algo = algo_raw if isinstance(algo_raw, str) and algo_raw else None
    if scheme is None and algo is None:
        return None
    return KVDeclared(str(q.get("quant_method") or "").lower(), scheme, algo)


__all__ = ["KVDeclared", "kv_declared"]
