"""The catalog: published model configs and GPU datasheet figures, validated at load.

Data lives in JSON next to this module (`models.json`, `gpus.json`); every entry says where its
numbers come from. Loading is pure (package data, read once) so core and shells share it.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from planner.core.errors import UnknownIdError
from planner.core.model import shape_from_config

T = TypeVar("T")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CatalogModel(_Frozen):
    id: str
    config: dict[str, Any]
    num_parameters: int = Field(gt=0)
    weights_bytes: int | None = Field(default=None, gt=0)
    notes: list[str] = []

    @property
    def resolved_weights_bytes(self) -> int:
        """Published checkpoint size if given, else parameters × bytes of the model dtype."""
        if self.weights_bytes is not None:
            return self.weights_bytes
        # 16-bit weights: engines serve fp32-published checkpoints (Gemma-2) in bf16 too.
        return self.num_parameters * 2


class GpuEntry(_Frozen):
    id: str
    name: str
    memory_bytes: int = Field(gt=0)
    visible_memory_bytes: int | None = Field(default=None, gt=0)
    bandwidth_bytes_per_s: float = Field(gt=0)
    bf16_dense_flops: float | None = Field(default=None, gt=0)
    fp8_dense_flops: float | None = Field(default=None, gt=0)
    l2_bytes: int | None = Field(default=None, gt=0)
    source: str

    @property
    def usable_memory_bytes(self) -> int:
        """What the driver reports as total (nvidia-smi), else the vendor figure."""
        return self.visible_memory_bytes or self.memory_bytes


def _load(name: str) -> Any:
    return json.loads(resources.files(__package__).joinpath(name).read_text("utf-8"))


@cache
def _models() -> dict[str, CatalogModel]:
    out: dict[str, CatalogModel] = {}
    for raw in _load("models.json")["models"]:
        entry = CatalogModel.model_validate(raw)
        shape_from_config(entry.config, model_id=entry.id)  # every config must resolve
        out[entry.id] = entry
    return out


@cache
def _gpus() -> dict[str, GpuEntry]:
    return {g.id: g for g in (GpuEntry.model_validate(raw) for raw in _load("gpus.json")["gpus"])}


def list_models() -> list[CatalogModel]:
    return list(_models().values())


def list_gpus() -> list[GpuEntry]:
    return list(_gpus().values())


def _lookup(table: dict[str, T], key: str, field: str, kind: str) -> T:
    if key in table:
        return table[key]
    folded = {k.lower(): v for k, v in table.items()}
    if key.lower() in folded:
        return folded[key.lower()]
    # Accept a bare name without the org prefix, e.g. "Llama-3.1-8B".
    tails = [v for k, v in table.items() if k.split("/")[-1].lower() == key.lower()]
    if len(tails) == 1:
        return tails[0]
    near = [k for k in table if key.lower().split("/")[-1][:6] in k.lower()][:5]
    hint = f" Did you mean: {', '.join(near)}?" if near else ""
    raise UnknownIdError(
        field,
        f"unknown {kind} {key!r}; list them with GET /api/v1/{kind}s or `kvplan {kind}s`." + hint,
    )


def get_model(model_id: str, *, field: str = "model") -> CatalogModel:
    return _lookup(_models(), model_id, field, "model")


def get_gpu(gpu_id: str, *, field: str = "gpu") -> GpuEntry:
    return _lookup(_gpus(), gpu_id, field, "gpu")


def ready() -> bool:
    """True once both data files load and validate (used by /readyz)."""
    return bool(_models()) and bool(_gpus())
