"""A ModelOpt `hf_quant_config.json` read beside a `config.json` (pure), the way vLLM reads it.

ModelOpt 0.29 and earlier export the quantization to a separate `hf_quant_config.json`
({"producer": {"name": "modelopt"}, "quantization": {"quant_algo", "kv_cache_quant_algo",
"group_size", "exclude_modules"}}); later exports put it in config.json's quantization_config.
vLLM (0.11–0.33 `transformers_utils/config.py` get_config) reads the file only when config.json
has no quantization_config, and `ModelOptQuantConfigBase.from_config` takes quant_algo,
kv_cache_quant_algo, group_size and exclude_modules from its "quantization" object, quant_algo
and kv_cache_quant_algo upper-cased. The planner takes the file as that flat quantization_config
({"quant_method": "modelopt", ...}), which `planner.core.quant` sizes (FP8: one byte per weight
plus a float32 weight and input scale per tensor; NVFP4: half a byte plus an FP8 scale per group
of 16 and two float32 global scales, excluded modules at the model dtype). Its kv_cache_quant_algo
is kept: what each engine makes of it is planner.core.kv_declared, engines/<engine>/kv_checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.core.errors import ModelConfigError

FILE_NAME = "hf_quant_config.json"
SIZED_ALGOS = ("FP8", "NVFP4")
_FIELD = ("model", "hf_quant_config")


def _has_quantization(config: Mapping[str, Any]) -> bool:
    inner = config.get("text_config")
    return "quantization_config" in config or (
        isinstance(inner, Mapping) and "quantization_config" in inner
    )


def quantization_from_file(hf_quant: Any) -> dict[str, Any]:
    """The flat ModelOpt quantization_config an `hf_quant_config.json` object means; what the
    planner does not size (MIXED_PRECISION, W4A8_AWQ, ...) is refused by name."""
    if not isinstance(hf_quant, Mapping):
        raise ModelConfigError(_FIELD, "model.not_object")
    producer = hf_quant.get("producer")
    name = producer.get("name") if isinstance(producer, Mapping) else None
    if str(name or "").lower() != "modelopt":
        raise ModelConfigError(
            (*_FIELD, "producer", "name"), "model.hf_quant_config_producer", producer=str(name)
        )
    quant = hf_quant.get("quantization")
    if not isinstance(quant, Mapping):
        raise ModelConfigError((*_FIELD, "quantization"), "model.not_object")
    algo = str(quant.get("quant_algo") or "").upper()
    if algo not in SIZED_ALGOS:
        raise ModelConfigError(
            (*_FIELD, "quantization", "quant_algo"),
            "model.modelopt_algo_unsized",
            algo=algo or "missing",
        )
    exclude = quant.get("exclude_modules") or []
    if not isinstance(exclude, list) or not all(isinstance(m, str) for m in exclude):
        raise ModelConfigError(
            (*_FIELD, "quantization", "exclude_modules"), "model.hf_quant_config_exclude"
        )
    out: dict[str, Any] = {"quant_method": "modelopt", "quant_algo": algo}
    group = quant.get("group_size")
    if group is not None:
        if isinstance(group, bool) or not isinstance(group, int) or group <= 0:
            raise ModelConfigError(
                (*_FIELD, "quantization", "group_size"), "model.hf_quant_config_group"
            )
        out["group_size"] = group
    kv = quant.get("kv_cache_quant_algo")
    if kv is not None:
        out["kv_cache_quant_algo"] = str(kv).upper()
    out["exclude_modules"] = list(exclude)
    return out


def with_hf_quant_config(config: Mapping[str, Any], hf_quant: Any) -> dict[str, Any]:
    """config.json with its `hf_quant_config.json` as quantization_config, unless config.json
    already has one (vLLM then never reads the file)."""
    out = dict(config)
    if hf_quant is None or _has_quantization(config):
        return out
    out["quantization_config"] = quantization_from_file(hf_quant)
    return out


__all__ = [
    "FILE_NAME",
    "quantization_from_file",
    "with_hf_quant_config",
]
