"""kv_cache_dtype auto on a checkpoint that declares its KV cache quantization, per engine and
release (planner.core.kv_declared, planner.core.engines.{vllm,sglang}.kv_checkpoint).

Sources, read in the engines' wheels (pip download --no-deps, every release of
tests/oracle/versions.txt and versions-sglang.txt):
- vLLM 0.14.1–0.33.0 `utils/torch_utils.py` get_kv_cache_quant_algo_string /
  resolve_kv_cache_dtype_string, called by `engine/arg_utils.py` create_engine_config for
  CacheConfig.cache_dtype: quant_method modelopt*, kv_cache_scheme {type float, num_bits 8,
  dynamic false} or kv_cache_quant_algo "fp8" → fp8_e4m3; MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP
  holds "nvfp4" (and a 4-bit float scheme maps to it) from 0.20.2, not in 0.19.1; anything else
  → auto. 0.9.2–0.13.0 have neither function.
- vLLM Attention.__init__ (0.15.1 `attention/layer.py`, 0.16.0–0.33.0
  `model_executor/layers/attention/attention.py`): a quant_config with a kv_cache_scheme
  (compressed-tensors) sets kv_cache_dtype "fp8"; until 0.21.0 unconditionally, from 0.22.1 only
  for auto. MLAAttention has no such rule; 0.9.2–0.14.1 none at all.
  CompressedTensorsKVCacheMethod.validate_kv_cache_scheme loads float 8-bit schemes only.
- SGLang 0.5.19–0.5.23 `srt/mem_cache/kv_cache_dtype.py` configure_kv_cache_dtype: auto with
  quant_config.kv_cache_quant_algo "FP8" → float8_e4m3fn ("fp8_e4m3"); `modelopt_quant.py`
  from_config (scheme float/8 → FP8, dynamic not read; else kv_cache_quant_algo);
  `compressed_tensors.py` kv_cache_quant_algo (FP8 for a static symmetric "tensor" float 8-bit
  scheme, is_supported_scheme).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from planner.core import schema as s
from planner.core.engines.sglang.kv_checkpoint import checkpoint_kv_dtype as sglang_kv
from planner.core.engines.vllm.kv_checkpoint import UNSUPPORTED
from planner.core.engines.vllm.kv_checkpoint import checkpoint_kv_dtype as vllm_kv
from planner.core.errors import FieldError
from planner.core.kv_declared import kv_declared
from planner.core.model import ModelShape, shape_from_config
from planner.service import plan
from tests.core.test_modelopt import TINY  # the same two-layer Llama config

FP8_SCHEME = {"type": "float", "num_bits": 8, "dynamic": False}
CT_SCHEME = {**FP8_SCHEME, "strategy": "tensor", "symmetric": True}


def _shape(q: dict[str, object]) -> ModelShape:
    return shape_from_config({**TINY, "quantization_config": q})


def _modelopt(**kv: object) -> dict[str, object]:
    return {"quant_method": "modelopt", "quant_algo": "NVFP4", **kv}


def _ct(scheme: object) -> dict[str, object]:
    return {"quant_method": "compressed-tensors", "config_groups": {}, "kv_cache_scheme": scheme}


def test_declaration_read_from_config_json() -> None:
    d = kv_declared({"quantization_config": _modelopt(kv_cache_scheme=FP8_SCHEME)})
    assert d is not None and d.method == "modelopt" and d.field("num_bits") == 8
    nested = {"quant_method": "modelopt", "quantization": {"kv_cache_quant_algo": "FP8"}}
    assert kv_declared({"quantization_config": nested}).algo == "FP8"  # type: ignore[union-attr]
    assert kv_declared({"quantization_config": {"quant_method": "fp8"}}) is None
    assert kv_declared({"text_config": {"quantization_config": _ct(CT_SCHEME)}}) is None


@pytest.mark.parametrize(
    ("version", "kv", "expected"),
    [
        ((0, 13, 0), {"kv_cache_quant_algo": "FP8"}, None),  # no resolution before 0.14
        ((0, 14, 1), {"kv_cache_quant_algo": "FP8"}, "fp8_e4m3"),
        ((0, 14, 1), {"kv_cache_scheme": FP8_SCHEME}, "fp8_e4m3"),
        ((0, 33, 0), {"kv_cache_scheme": {"type": "float", "num_bits": 8}}, None),  # no dynamic
        ((0, 19, 1), {"kv_cache_quant_algo": "NVFP4"}, None),  # not in the 0.19 map: auto
        ((0, 20, 2), {"kv_cache_quant_algo": "NVFP4"}, "nvfp4"),
        ((0, 19, 1), {"kv_cache_scheme": {"type": "float", "num_bits": 4}}, None),
        ((0, 33, 0), {"kv_cache_scheme": {"type": "float", "num_bits": 4}}, "nvfp4"),
        ((0, 33, 0), {"kv_cache_quant_algo": "int8"}, None),  # unknown: auto
    ],
)
def test_vllm_modelopt_auto(
    version: tuple[int, ...], kv: dict[str, object], expected: str | None
) -> None:
    shape = _shape(_modelopt(**kv))
    assert vllm_kv(version, shape, False) == expected
    assert vllm_kv(version, shape, True) is None  # an explicit dtype wins


@pytest.mark.parametrize(
    ("version", "auto", "explicit"),
    [
        ((0, 14, 1), None, None),
        ((0, 15, 1), "fp8", "fp8"),
        ((0, 21, 0), "fp8", "fp8"),
        ((0, 22, 1), "fp8", None),
        ((0, 33, 0), "fp8", None),
    ],
)
def test_vllm_compressed_tensors_scheme(
    version: tuple[int, ...], auto: str | None, explicit: str | None
) -> None:
    shape = _shape(_ct(CT_SCHEME))
    assert (vllm_kv(version, shape, False), vllm_kv(version, shape, True)) == (auto, explicit)
    unloaded = vllm_kv(version, _shape(_ct({"type": "int", "num_bits": 8})), False)
    assert unloaded == (UNSUPPORTED if auto else None)
    mla = replace(shape, is_mla=True)  # MLAAttention has no kv_cache_scheme rule
    assert vllm_kv(version, mla, False) is None


def test_sglang_rules() -> None:
    v = (0, 5, 23)
    no_dynamic = _modelopt(kv_cache_scheme={"type": "float", "num_bits": 8})
    assert sglang_kv(v, _shape(no_dynamic), False) == "fp8_e4m3"
    assert sglang_kv(v, _shape(_modelopt(kv_cache_quant_algo="FP8")), True) is None
    assert sglang_kv(v, _shape(_ct(CT_SCHEME)), False) == "fp8_e4m3"
    assert sglang_kv(v, _shape(_ct({**CT_SCHEME, "strategy": "attn_head"})), False) is None
    assert sglang_kv(v, _shape(_ct({**CT_SCHEME, "dynamic": True})), False) is None


def _plan(engine: str, version: str, kv: str = "auto") -> s.Plan:
    return plan(
        s.PlanRequest(
            model="nvidia/Llama-3.1-70B-Instruct-FP8",
            gpu="H200-141GB",
            engine=engine,
            engine_version=version,
            context_tokens=8192,
            kv_cache_dtype=kv,
        )
    )


@pytest.mark.parametrize(
    ("engine", "version", "kv", "per_token"),
    [
        # 2 × 80 layers × 8 KV heads × 128 × bytes: hf_quant_config.json kv_cache_quant_algo FP8.
        ("vllm", "0.33.0", "auto", 163_840),
        ("vllm", "0.14.1", "auto", 163_840),
        ("vllm", "0.13.0", "auto", 327_680),
        ("vllm", "0.33.0", "bfloat16", 327_680),
        ("sglang", "0.5.23", "auto", 163_840),
        ("sglang", "0.5.19", "bfloat16", 327_680),
    ],
)
def test_catalog_fp8_checkpoint(engine: str, version: str, kv: str, per_token: int) -> None:
    p = _plan(engine, version, kv)
    assert p.kv_bytes_per_token == per_token
    used = any("uses the checkpoint's KV cache dtype fp8_e4m3" in n for n in p.notes)
    assert used == (per_token == 163_840)


def test_nvfp4_kv_cache_refused_by_name() -> None:
    shape_cfg = _modelopt(kv_cache_quant_algo="NVFP4")
    assert vllm_kv((0, 33, 0), _shape(shape_cfg), False) == "nvfp4"
    with pytest.raises(FieldError) as err:
        plan(
            s.PlanRequest(
                model={**TINY, "quantization_config": {**shape_cfg, "group_size": 16}},
                gpu="H200-141GB",
                engine="vllm",
                engine_version="0.33.0",
                context_tokens=1024,
            )
        )
    assert [pr.code for pr in err.value.problems] == ["model.checkpoint_kv_unmodelled"]
