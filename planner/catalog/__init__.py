"""The catalog: published model configs and GPU datasheet figures, validated at load.

Data lives in JSON next to this module (`models.json`, `gpus.json`); every entry says where its
numbers come from. `models.json` is built from the saved configs and indexes in the repo's
`catalog/sources/` by `scripts/catalog_build.py`, not edited by hand. Loading is pure (package
data, read once) so core and shells share it.

Models are found by id, by an alias (the spellings people type: `-Instruct`, `-it`,
`Meta-Llama-3.1-…`; aliases are data, each pointing at an entry's config, with the published
fields where that repo differs), in any case, with or without the org prefix when that is
unambiguous. An entry the planner cannot size yet carries `refused` and is refused by name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.core.errors import ModelConfigError, UnknownIdError, did_you_mean
from planner.core.model import shape_from_config
from planner.core.modelopt import with_hf_quant_config
from planner.core.params import parameter_counts, weight_bytes

T = TypeVar("T")

_PREFIXES = ("https://huggingface.co/", "http://huggingface.co/", "hf://", "huggingface.co/")
# A published parameter count and the count from the config must agree this closely.
_PARAM_TOLERANCE = 0.02


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CatalogAlias(_Frozen):
    """Another repo id served with an entry's config (fields that differ are overridden)."""

    id: str
    config_overrides: dict[str, Any] = {}
    source: str | None = None  # where the differing published values come from
    notes: list[str] = []


class CatalogModel(_Frozen):
    id: str
    # config.json as published; a ModelOpt hf_quant_config.json saved beside it is read into
    # its quantization_config as vLLM reads it (planner.core.modelopt), models.json keeping both.
    config: dict[str, Any]
    hf_quant_config: dict[str, Any] | None = None
    hf_quant_config_source: str | None = None  # the published hf_quant_config.json (URL)
    num_parameters: int = Field(gt=0)
    # "published: <url>" or "config: counted from the config (planner.core.params)".
    num_parameters_source: str | None = None
    # Bytes of the published safetensors (model.safetensors.index.json metadata.total_size).
    weights_bytes: int | None = Field(default=None, gt=0)
    weights_bytes_source: str | None = None
    config_source: str | None = None  # the published config.json (URL)
    copied_from: str | None = None  # where this copy of it was taken from, if not the Hub
    aliases: list[CatalogAlias] = []
    alias_of: str | None = None  # set on the entry get_model returns for an alias
    refused: str | None = None  # why the planner cannot size this model yet
    notes: list[str] = []

    @model_validator(mode="before")
    @classmethod
    def _read_hf_quant_config(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and isinstance(data.get("config"), Mapping):
            hf_quant = data.get("hf_quant_config")
            if hf_quant is not None:
                return {**data, "config": with_hf_quant_config(data["config"], hf_quant)}
        return data

    @property
    def resolved_weights_bytes(self) -> int:
        """Published checkpoint bytes if known, else the stored bytes counted from the config
        (quantized checkpoints as stored), else parameters × their stored width (2 bytes, 4 for
        float32)."""
        return self.weights()[0]

    def weights(self) -> tuple[int, Literal["safetensors", "parameter_count"], str]:
        """(bytes, kind, where from) of the checkpoint's weights as stored; the engine's dtype
        decides what it holds (planner.core.resolved.served_model)."""
        if self.weights_bytes is not None:
            source = self.weights_bytes_source or "published checkpoint size"
            # Only a safetensors total_size is "safetensors"; a model-card figure is not.
            kind: Literal["safetensors", "parameter_count"] = (
                "safetensors" if "total_size" in source else "parameter_count"
            )
            return self.weights_bytes, kind, source
        cfg = self.config
        quantized = "quantization_config" in cfg or "quantization_config" in (
            cfg.get("text_config") or {}
        )
        if quantized:
            return (
                weight_bytes(cfg).total,
                "parameter_count",
                "counted from the config with its quantization_config (as stored)",
            )
        # As stored: a float32 checkpoint (Gemma-2, OLMo-2) at 4 bytes; the core takes it to the
        # dtype the engine serves (planner.core.resolved.served_model: 16-bit in vLLM).
        inner = cfg.get("text_config") or cfg
        dtype = str(inner.get("torch_dtype", inner.get("dtype", cfg.get("torch_dtype", ""))))
        if dtype.removeprefix("torch.").lower() in ("float32", "float"):
            return self.num_parameters * 4, "parameter_count", "parameters × 4 bytes (float32)"
        return self.num_parameters * 2, "parameter_count", "parameters × 2 bytes (16-bit)"


class GpuEntry(_Frozen):
    id: str
    name: str
    memory_bytes: int = Field(gt=0)
    visible_memory_bytes: int | None = Field(default=None, gt=0)
    # Where usable_memory_bytes comes from (the rule: torch's total as vLLM sees it, README
    # "GPUs"): a vLLM log printing it; the driver's total (nvidia-smi), a few hundred MiB above
    # torch's; the same memory on a sibling board with a vLLM log; else the vendor's capacity.
    memory_basis: Literal["vllm_log", "nvidia_smi", "same_memory", "vendor"] = "vendor"
    bandwidth_bytes_per_s: float = Field(gt=0)
    bf16_dense_flops: float | None = Field(default=None, gt=0)
    fp8_dense_flops: float | None = Field(default=None, gt=0)
    l2_bytes: int | None = Field(default=None, gt=0)
    # CUDA compute capability, major × 10 + minor (NVIDIA's CUDA GPUs table); None off CUDA.
    compute_capability: int | None = Field(default=None, ge=10, le=200)
    source: str
    # Figures not taken from a vendor datasheet (e.g. a cut-down export part) say so here.
    estimated: list[str] = []
    # The link tensor parallelism talks over: its name, bytes/s one way per GPU, one hop's
    # latency (NCCL's tuning model), and where the figures come from.
    link: str | None = None
    link_bandwidth_bytes_per_s: float | None = Field(default=None, gt=0)
    link_latency_seconds: float | None = Field(default=None, gt=0)
    link_source: str | None = None

    @property
    def usable_memory_bytes(self) -> int:
        """The memory plans use: torch's total as vLLM sees it where a log gives it, else the
        closest published figure (`memory_basis` says which)."""
        return self.visible_memory_bytes or self.memory_bytes


def _load(name: str) -> Any:
    return json.loads(resources.files(__package__).joinpath(name).read_text("utf-8"))


def _merged(config: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Config with overrides applied; a `text_config` override merges into the inner config."""
    out = dict(config)
    for key, value in overrides.items():
        if key == "text_config" and isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def _validate(entry: CatalogModel) -> None:
    if entry.refused:
        return
    shape_from_config(entry.config, model_id=entry.id)  # every config must resolve
    counted = parameter_counts(entry.config).total
    source = entry.num_parameters_source or ""
    if source.startswith("published") and abs(counted - entry.num_parameters) > (
        _PARAM_TOLERANCE * entry.num_parameters
    ):
        raise ValueError(
            f"catalog {entry.id}: config counts {counted:,} parameters, published "
            f"{entry.num_parameters:,}"
        )
    for alias in entry.aliases:
        shape_from_config(_merged(entry.config, alias.config_overrides), model_id=alias.id)


_CHECKED: set[str] = set()


def _checked(entry: CatalogModel) -> CatalogModel:
    """The entry, its config resolved and its parameter count checked: once per entry, when
    it is first used (a command planning one model does not size all sixty)."""
    if entry.id not in _CHECKED:
        _validate(entry)
        _CHECKED.add(entry.id)
    return entry


@cache
def _models() -> dict[str, CatalogModel]:
    out: dict[str, CatalogModel] = {}
    for raw in _load("models.json")["models"]:
        entry = CatalogModel.model_validate(raw)
        if entry.id in out:
            raise ValueError(f"catalog: duplicate model id {entry.id}")
        out[entry.id] = entry
    return out


@cache
def _index() -> dict[str, tuple[CatalogModel, CatalogAlias | None]]:
    """Every id and alias, lower-cased, to its entry (and alias)."""
    index: dict[str, tuple[CatalogModel, CatalogAlias | None]] = {}
    for entry in _models().values():
        for key, alias in [(entry.id, None), *((a.id, a) for a in entry.aliases)]:
            folded = key.lower()
            if folded in index:
                raise ValueError(f"catalog: {key} is listed twice (ids and aliases are unique)")
            index[folded] = (entry, alias)
    return index


@cache
def _tails() -> dict[str, list[str]]:
    """Bare names (no org) to the full ids and aliases that end in them."""
    tails: dict[str, list[str]] = {}
    for key in _index():
        tails.setdefault(key.rsplit("/", 1)[-1], []).append(key)
    return tails


@cache
def _gpus() -> dict[str, GpuEntry]:
    return {g.id: g for g in (GpuEntry.model_validate(raw) for raw in _load("gpus.json")["gpus"])}


def list_models() -> list[CatalogModel]:
    """Entries the planner can size (refused ones are listed by `list_refused`)."""
    return [_checked(m) for m in _models().values() if not m.refused]


def list_refused() -> list[CatalogModel]:
    """Bundled models the planner refuses by name, each with its reason."""
    return [m for m in _models().values() if m.refused]


def list_gpus() -> list[GpuEntry]:
    return list(_gpus().values())


def _normalise(text: str) -> str:
    key = text.strip()
    for prefix in _PREFIXES:
        if key.lower().startswith(prefix):
            key = key[len(prefix) :]
            break
    return key.strip("/").lower()


def find_model(text: str) -> tuple[CatalogModel, CatalogAlias | None] | None:
    """The entry (and alias) a typed id names, or None. Any case; the org may be left out
    when only one entry has that name."""
    key = _normalise(text)
    index = _index()
    if key not in index and "/" not in key:
        full = _tails().get(key, [])
        key = full[0] if len(full) == 1 else key
    if key not in index:
        return None
    entry, alias = index[key]
    return _checked(entry), alias


def _refuse(entry: CatalogModel, field: str, typed: str) -> ModelConfigError:
    """The refusal names the id or alias the user typed, not the entry it is served from."""
    return ModelConfigError(field, "catalog.refused", typed=typed, reason=entry.refused)


def _as_alias(entry: CatalogModel, alias: CatalogAlias) -> CatalogModel:
    return entry.model_copy(
        update={
            "id": alias.id,
            "config": _merged(entry.config, alias.config_overrides),
            "aliases": [],
            "alias_of": entry.id,
            "notes": [*entry.notes, *alias.notes],
        }
    )


def get_model(model_id: str, *, field: str = "model") -> CatalogModel:
    """The catalog entry for an id or alias (an alias comes back as its own entry, with the
    overrides applied and `alias_of` set). Refused entries raise ModelConfigError."""
    hit = find_model(model_id)
    if hit is None:
        from planner.catalog.suggest import suggest_models

        near = suggest_models(model_id)
        raise UnknownIdError(
            field, "catalog.unknown_model", tuple(near), model_id=model_id, hint=did_you_mean(near)
        )
    entry, alias = hit
    if entry.refused:
        raise _refuse(entry, field, alias.id if alias is not None else entry.id)
    return _as_alias(entry, alias) if alias is not None else entry


def _lookup(table: dict[str, T], key: str, field: str, kind: str) -> T:
    if key in table:
        return table[key]
    folded = {k.lower(): v for k, v in table.items()}
    if key.lower() in folded:
        return folded[key.lower()]
    near = [k for k in table if key.lower()[:4] in k.lower()][:5]
    raise UnknownIdError(
        field, "catalog.unknown_id", tuple(near), key=key, kind=kind, hint=did_you_mean(near)
    )


def get_gpu(gpu_id: str, *, field: str = "gpu") -> GpuEntry:
    return _lookup(_gpus(), gpu_id, field, "gpu")


def ready() -> bool:
    """True once both data files load and validate (used by /readyz)."""
    return bool(list_models()) and bool(_index()) and bool(_gpus())
