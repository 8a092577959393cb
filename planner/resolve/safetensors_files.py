"""Weight bytes from safetensors files on disk: the index's total_size, else the headers.

A safetensors file starts with a little-endian u64 N and N bytes of JSON naming every tensor's
byte range; the weights are the sum of those ranges. Only the header is read.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

# A header is JSON describing tensors; real ones are kilobytes to a few megabytes.
MAX_HEADER_BYTES = 100 << 20
INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"


class SafetensorsError(ValueError):
    """A safetensors file or index that cannot be read as one."""


def index_total_size(index: Any) -> int | None:
    """`metadata.total_size` of a parsed model.safetensors.index.json, if it is a positive int."""
    if not isinstance(index, dict):
        return None
    meta = index.get("metadata")
    if not isinstance(meta, dict):
        return None
    total = meta.get("total_size")
    if isinstance(total, bool) or not isinstance(total, (int, float)) or total <= 0:
        return None
    return int(total)


def header_data_bytes(header: Any) -> int:
    """Bytes of tensor data a parsed safetensors header describes."""
    if not isinstance(header, dict):
        raise SafetensorsError("header is not a JSON object")
    total = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2):
            raise SafetensorsError(f"tensor {name!r} has no data_offsets")
        start, end = offsets
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end):
            raise SafetensorsError(f"tensor {name!r} has bad data_offsets {offsets!r}")
        total += end - start
    return total


def read_header(path: Path) -> dict[str, Any]:
    with path.open("rb") as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise SafetensorsError(f"{path.name} is shorter than a safetensors header")
        (size,) = struct.unpack("<Q", raw)
        if size > MAX_HEADER_BYTES:
            raise SafetensorsError(f"{path.name} declares a {size}-byte header")
        body = fh.read(size)
    try:
        header = json.loads(body)
    except ValueError as exc:
        raise SafetensorsError(f"{path.name} header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path.name} header is not a JSON object")
    return header


def local_weights_bytes(directory: Path) -> tuple[int, str] | None:
    """(bytes, how) for a model directory: the index's total_size, else the headers' sum."""
    index_path = directory / INDEX_NAME
    if index_path.is_file():
        try:
            total = index_total_size(json.loads(index_path.read_text("utf-8")))
        except ValueError:
            total = None
        if total is not None:
            return total, f"{INDEX_NAME} metadata.total_size"
    shards = sorted(directory.glob("*.safetensors"))
    if not shards:
        return None
    total = sum(header_data_bytes(read_header(p)) for p in shards)
    return total, f"safetensors headers of {len(shards)} file(s)"
