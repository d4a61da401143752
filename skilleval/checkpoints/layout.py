"""The on-disk layout of a checkpoint: how it is registered, its shards and their headers.

A checkpoint may be registered as a Hugging Face directory, its
``model.safetensors.index.json`` or a single ``.safetensors`` file. Headers are parsed
here rather than through safetensors' loaders so that every dtype real checkpoints
use (bf16, fp8) is described without a framework, and so that a truncated shard or an
index naming a tensor its shard lacks is reported by name. No numpy: parse-time code
uses this module.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from skilleval.errors import CheckpointError

INDEX_SUFFIX = ".safetensors.index.json"
HEADER_LENGTH_BYTES = 8
# Header sizes beyond this are corrupt length fields, not real headers (safetensors caps at 100 MB).
MAX_HEADER_BYTES = 100 * 1024 * 1024
DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of a shard: its dtype, shape and absolute byte range in the file."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int

    @property
    def elements(self) -> int:
        return math.prod(self.shape)


def is_index(path: Path) -> bool:
    return path.name.endswith(INDEX_SUFFIX)


def resolve_weights(path: str | Path) -> Path:
    """The file a checkpoint is known by: its index file, or its only shard."""
    path = Path(path)
    if not path.is_dir():
        return path
    for name in ("model" + INDEX_SUFFIX, "model.safetensors"):
        if (path / name).exists():
            return path / name
    candidates = sorted(path.glob("*" + INDEX_SUFFIX)) or sorted(path.glob("*.safetensors"))
    if len(candidates) == 1:
        return candidates[0]
    found = ", ".join(p.name for p in candidates) or "no .safetensors files"
    raise CheckpointError(
        f"{path}: cannot tell which file is the checkpoint ({found}); register the "
        f"directory's {INDEX_SUFFIX.lstrip('.')} file or a single .safetensors file instead"
    )


def model_dir(weights: str | Path) -> Path:
    """The directory a model server loads: the checkpoint directory itself."""
    path = Path(weights)
    return path if path.is_dir() else path.parent


def read_index(index: Path) -> dict[str, str]:
    """Tensor name -> shard file name, from an HF index file."""
    try:
        weight_map = json.loads(index.read_text()).get("weight_map")
    except (OSError, ValueError, AttributeError) as error:
        raise CheckpointError(f"{index}: index file does not parse: {error}") from error
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError(f"{index}: index file has no weight_map of tensor -> shard file")
    return weight_map


def shard_paths(weights: str | Path) -> list[Path]:
    """The safetensors files of a checkpoint, however it is registered."""
    resolved = resolve_weights(weights)
    if is_index(resolved) and resolved.exists():
        return [resolved.parent / name for name in sorted(set(read_index(resolved).values()))]
    return [resolved]


def read_header(shard: Path) -> dict[str, TensorEntry]:
    """Every tensor a shard holds, checked against the file's size and the dtype's width."""
    size = shard.stat().st_size
    with open(shard, "rb") as handle:
        prefix = handle.read(HEADER_LENGTH_BYTES)
        if len(prefix) < HEADER_LENGTH_BYTES:
            raise CheckpointError(f"{shard.name}: header does not parse: file is {size} bytes")
        length = int.from_bytes(prefix, "little")
        if length > min(MAX_HEADER_BYTES, size - HEADER_LENGTH_BYTES):
            raise CheckpointError(
                f"{shard.name}: header does not parse: it claims {length} bytes in a "
                f"{size}-byte file (truncated or not a safetensors file)"
            )
        try:
            header = json.loads(handle.read(length))
        except ValueError as error:
            raise CheckpointError(f"{shard.name}: header does not parse: {error}") from error
    if not isinstance(header, dict):
        raise CheckpointError(f"{shard.name}: header does not parse: not a JSON object")
    base = HEADER_LENGTH_BYTES + length
    entries = {}
    for name, raw in header.items():
        if name == "__metadata__":
            continue
        entry = _entry(shard, name, raw, base)
        if entry.end > size:
            raise CheckpointError(
                f"{shard.name}: truncated: tensor {name} ends at byte {entry.end} of a "
                f"{size}-byte file"
            )
        entries[name] = entry
    return entries


def _entry(shard: Path, name: str, raw: object, base: int) -> TensorEntry:
    try:
        dtype, shape, (start, end) = str(raw["dtype"]), raw["shape"], raw["data_offsets"]  # type: ignore[index]
        entry = TensorEntry(name, dtype, tuple(int(d) for d in shape), base + start, base + end)
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{shard.name}: tensor {name}: malformed entry {raw!r}") from error
    if dtype not in DTYPE_BYTES:
        raise CheckpointError(
            f"{shard.name}: tensor {name} has dtype {dtype}, which skilleval cannot read "
            f"(known: {', '.join(DTYPE_BYTES)})"
        )
    if entry.end - entry.start != entry.elements * DTYPE_BYTES[dtype]:
        raise CheckpointError(
            f"{shard.name}: tensor {name}: {entry.end - entry.start} bytes for shape "
            f"{list(entry.shape)} of {dtype}"
        )
    return entry
