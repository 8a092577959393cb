"""Weight bytes as stored, from a Hugging Face `config.json` object (pure).

Quantized linears are sized as their `quantization_config` stores them (fp8 with block or
tensor scales, fbgemm_fp8, AWQ/GPTQ int4 with group scales and zeros, MXFP4, ModelOpt
NVFP4/FP8, compressed-tensors); what a scheme leaves unquantized (`modules_to_not_convert`,
`ignore`, `exclude_modules`, routers, embeddings, norms, vision towers) is sized at the model
dtype: as stored by default (a float32 checkpoint at 4 bytes), or at the element size of the
dtype the engine serves it in (`dtype_bytes`; `planner.core.resolved.served_model`). An unknown
scheme is refused, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from planner.core.errors import ModelConfigError
from planner.core.layout import Linear, LinearKind, decoder, vision_parameters
from planner.core.model import text_config

# Unquantized element size as stored; the dtype served is the engine's (Engine.model_dtype).
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}


@dataclass(frozen=True, slots=True)
class WeightBytes:
    """Weight bytes, split the way a decode step reads them."""

    total: int
    embedding: int  # input table bytes (indexed, not streamed, unless tied)
    dense: int  # everything but routed experts, embedding table included
    expert: int  # one routed expert of one MoE layer
    num_experts: int
    top_k: int
    moe_layers: int
    tied_embeddings: bool
    vision: int = 0  # vision encoder bytes (in total and dense; not read by a text decode step)

    @property
    def dense_read(self) -> int:
        """Dense bytes one decode step streams: the input table is only indexed and the vision
        encoder does not run."""
        return self.dense - self.vision - (0 if self.tied_embeddings else self.embedding)

    @property
    def active(self) -> int:
        """Bytes one token reads: dense part plus top-k experts in every MoE layer."""
        return self.dense_read + self.moe_layers * min(self.top_k, self.num_experts) * self.expert

    @property
    def all_experts(self) -> int:
        """Bytes a step reads when every expert is touched (large batches)."""
        return self.dense_read + self.moe_layers * self.num_experts * self.expert

    def scaled_to(self, total_bytes: int) -> WeightBytes:
        """This split scaled to a measured total (e.g. a safetensors index's total_size)."""
        if self.total <= 0 or total_bytes == self.total:
            return self
        r = total_bytes / self.total
        return WeightBytes(
            total=total_bytes,
            embedding=round(self.embedding * r),
            dense=round(self.dense * r),
            expert=round(self.expert * r),
            num_experts=self.num_experts,
            top_k=self.top_k,
            moe_layers=self.moe_layers,
            tied_embeddings=self.tied_embeddings,
            vision=round(self.vision * r),
        )


@dataclass(frozen=True, slots=True)
class _Scheme:
    """How one linear's weight is stored: bits per element plus scale/zero bytes."""

    bits: int
    group: int | None  # elements along in_features sharing a scale; None: per output channel
    scale_bytes: float
    zero_bytes: float = 0.0  # per group (asymmetric int schemes)
    block: tuple[int, int] | None = None  # 2-D block scales (out, in), DeepSeek fp8
    per_tensor_bytes: int = 0  # global scales (NVFP4 weight_scale_2 etc.)
    per_in_feature_bytes: int = 0  # GPTQ g_idx

    def linear_bytes(self, lin: Linear) -> float:
        n_in, n_out = lin.in_features, lin.out_features
        weight = n_in * n_out * self.bits / 8
        if self.block is not None:
            bo, bi = self.block
            scales = -(-n_out // bo) * -(-n_in // bi) * self.scale_bytes
        elif self.group is None:
            scales = n_out * (self.scale_bytes + self.zero_bytes)
        elif self.group <= 0:
            scales = self.scale_bytes + self.zero_bytes  # one per tensor
        else:
            groups = -(-n_in // self.group) * n_out
            scales = groups * (self.scale_bytes + self.zero_bytes)
        return lin.count * (
            weight + scales + self.per_tensor_bytes + self.per_in_feature_bytes * n_in
        )


def _matches(name: str, kind: LinearKind, patterns: Sequence[str]) -> bool:
    for raw in patterns:
        p = str(raw)
        if p.startswith("re:"):
            if re.match(p[3:], name):
                return True
            continue
        if p == "Linear":
            continue
        if p.endswith("Attention") and kind == "attention":
            return True  # a class name (Llama4TextAttention)
        if any(ch in p for ch in "*?["):
            if fnmatchcase(name, p) or fnmatchcase(name, p + ".*"):
                return True
            continue
        # transformers' modules_to_not_convert: a name fragment matched on dotted boundaries.
        if (
            name == p
            or name.endswith("." + p)
            or f".{p}." in f".{name}."
            or name.startswith(p + ".")
        ):
            return True
    return False


def _compressed_scheme(group_cfg: Mapping[str, Any], fmt: str, model_bytes: int) -> _Scheme | None:
    w = group_cfg.get("weights")
    if not isinstance(w, Mapping):
        return None
    bits = int(w.get("num_bits") or 16)
    strategy = str(w.get("strategy") or "tensor")
    kind = str(w.get("type") or "int")
    group_size = w.get("group_size")
    zero = 0.0 if w.get("symmetric", True) else bits / 8
    if "nvfp4" in fmt or (kind == "float" and bits == 4):
        return _Scheme(4, int(group_size or 16), 1.0, per_tensor_bytes=4)
    if strategy == "block":
        bs = w.get("block_structure") or [128, 128]
        return _Scheme(bits, None, model_bytes, block=(int(bs[0]), int(bs[1])))
    if strategy in ("group", "tensor_group"):
        return _Scheme(bits, int(group_size or 128), model_bytes, zero_bytes=zero)
    if strategy == "channel":
        return _Scheme(bits, None, model_bytes, zero_bytes=zero)
    return _Scheme(bits, 0, 4.0)


def _schemes(
    cfg: Mapping[str, Any], model_bytes: int
) -> Iterator[tuple[Sequence[str] | None, _Scheme | None, Sequence[str], set[LinearKind]]]:
    """(targets or None for all, scheme, ignore patterns, kinds quantized) per scheme group."""
    q = cfg.get("quantization_config")
    if q is None:
        return
    if not isinstance(q, Mapping):
        raise ModelConfigError(("model", "quantization_config"), "model.not_object")
    method = str(q.get("quant_method") or "").lower()
    skip = list(q.get("modules_to_not_convert") or q.get("ignored_layers") or [])
    body: set[LinearKind] = {"attention", "mlp", "expert", "shared_expert"}
    if method == "fp8":
        block = q.get("weight_block_size")
        if block:
            scheme = _Scheme(8, None, 4.0, block=(int(block[0]), int(block[1])))
        else:
            scheme = _Scheme(8, 0, 4.0)
        yield None, scheme, skip, body
    elif method == "fbgemm_fp8":
        yield None, _Scheme(8, None, 4.0), skip, body
    elif method in ("awq", "gptq"):
        bits = int(q.get("bits") or q.get("w_bit") or 4)
        group = int(q.get("group_size") or q.get("q_group_size") or 128)
        g = None if group == -1 else group
        if method == "awq":
            scheme = _Scheme(bits, g, 2.0, zero_bytes=bits / 8 if q.get("zero_point", True) else 0)
        else:
            scheme = _Scheme(bits, g, 2.0, zero_bytes=bits / 8, per_in_feature_bytes=4)
        yield None, scheme, skip, body
    elif method == "mxfp4":
        # transformers/vLLM MXFP4: only the routed experts; e8m0 scale per 32 elements.
        yield None, _Scheme(4, 32, 1.0), skip, {"expert"}
    elif method == "modelopt":
        algo = str(q.get("quant_algo") or "").upper()
        excl = list(q.get("exclude_modules") or q.get("ignore") or skip)
        if algo == "NVFP4":
            yield (
                None,
                _Scheme(4, int(q.get("group_size") or 16), 1.0, per_tensor_bytes=8),
                excl,
                body,
            )
        elif algo == "FP8":
            yield None, _Scheme(8, 0, 4.0, per_tensor_bytes=4), excl, body
        else:
            raise ModelConfigError(
                ("model", "quantization_config", "quant_algo"),
                "model.modelopt_algo_unsized",
                algo=algo or "missing",
            )
    elif method == "compressed-tensors":
        fmt = str(q.get("format") or "")
        ignore = list(q.get("ignore") or [])
        groups = q.get("config_groups") or {}
        if not isinstance(groups, Mapping) or not groups:
            raise ModelConfigError(
                ("model", "quantization_config", "config_groups"),
                "model.compressed_tensors_without_groups",
            )
        for group_cfg in groups.values():
            if not isinstance(group_cfg, Mapping):
                continue
            targets = [str(t) for t in group_cfg.get("targets") or ["Linear"]]
            ct_scheme = _compressed_scheme(group_cfg, fmt, model_bytes)
            all_linear: set[LinearKind] = {*body, "lm_head", "router"}
            yield (None if "Linear" in targets else targets), ct_scheme, ignore, all_linear
    else:
        raise ModelConfigError(
            ("model", "quantization_config", "quant_method"),
            "model.quantization_unsized",
            method=method or "without quant_method",
        )


def _model_dtype_bytes(cfg: Mapping[str, Any]) -> int:
    raw = cfg.get("torch_dtype", cfg.get("dtype"))
    if raw is None:
        return 2
    return _DTYPE_BYTES.get(str(raw).removeprefix("torch.").lower(), 2)


def weight_bytes(config: Mapping[str, Any], dtype_bytes: int | None = None) -> WeightBytes:
    """Weight bytes: quantized linears as stored, the rest at `dtype_bytes` per element (the
    dtype served), by default at the checkpoint's own dtype."""
    dec = decoder(config)
    inner = text_config(config)
    model_bytes = dtype_bytes or _model_dtype_bytes(inner)
    # quantization_config sits at the top level of multimodal configs.
    qcfg = config if "quantization_config" in config else inner
    schemes = list(_schemes(qcfg, model_bytes))

    def linear_bytes(lin: Linear) -> float:
        for targets, scheme, ignore, kinds in schemes:
            if scheme is None or lin.kind not in kinds:
                continue
            if targets is not None and not _matches(lin.name, lin.kind, targets):
                continue
            if _matches(lin.name, lin.kind, ignore):
                continue
            bias = lin.count * lin.out_features * model_bytes if lin.bias else 0
            return scheme.linear_bytes(lin) + bias
        return float(lin.parameters * model_bytes)

    sizes = [(lin, linear_bytes(lin)) for lin in dec.linears]
    embedding = dec.embedding_parameters * model_bytes
    vision = vision_parameters(config) * model_bytes  # encoders stay unquantized
    total = embedding + vision + dec.other_parameters * model_bytes + sum(b for _, b in sizes)
    moe_layers = len(dec.moe_layer_indices)
    expert = 0.0
    if moe_layers:
        first = dec.moe_layer_indices[0]
        expert = sum(
            b / lin.count for lin, b in sizes if lin.kind == "expert" and lin.layer == first
        )
    routed = sum(b for lin, b in sizes if lin.kind == "expert")
    return WeightBytes(
        total=round(total),
        embedding=embedding,
        dense=round(total - routed),
        expert=round(expert),
        num_experts=dec.num_experts,
        top_k=dec.top_k,
        moe_layers=moe_layers,
        tied_embeddings=dec.tied_embeddings,
        vision=vision,
    )


__all__ = ["WeightBytes", "weight_bytes"]
