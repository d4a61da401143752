"""Reading tensors of every dtype real checkpoints use, widened exactly, in bounded chunks.

Choice: numpy with exact widening rather than torch. bf16 is the top half of an fp32
(a shift), fp8 E5M2 the top half of an fp16, and fp8 E4M3 has 256 codes (a table), so
every value widens to fp32 without rounding; torch would add a 200 MB dependency to the
main job for the same numbers. torch is used only to put the arithmetic on a GPU.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

from skilleval.checkpoints.layout import DTYPE_BYTES, TensorEntry, shard_paths
from skilleval.errors import CheckpointError

CHUNK_ELEMENTS = 4 * 1024 * 1024
NATIVE = {
    "BOOL": np.bool_,
    "U8": np.uint8,
    "I8": np.int8,
    "I16": np.int16,
    "U16": np.uint16,
    "F16": np.float16,
    "I32": np.int32,
    "U32": np.uint32,
    "F32": np.float32,
    "I64": np.int64,
    "U64": np.uint64,
    "F64": np.float64,
}


def _e4m3_values() -> np.ndarray:
    """fp8 E4M3 (the 'fn' variant safetensors stores): bias 7, no infinities, S.1111.111 is NaN."""
    codes = np.arange(256)
    exponent, mantissa = (codes >> 3) & 0xF, codes & 0x7
    magnitude = np.where(
        exponent == 0,
        mantissa / 8 * 2.0**-6,
        (1 + mantissa / 8) * 2.0 ** (exponent - 7),
    )
    magnitude[(exponent == 15) & (mantissa == 7)] = np.nan
    return np.where(codes & 0x80, -magnitude, magnitude).astype(np.float32)


E4M3_VALUES = _e4m3_values()


def widen(raw: bytes, dtype: str) -> np.ndarray:
    """The values in raw little-endian bytes of a safetensors dtype, as fp32 (fp64 if wider)."""
    if dtype == "BF16":
        return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    if dtype == "F8_E5M2":
        return (
            (np.frombuffer(raw, np.uint8).astype(np.uint16) << 8)
            .view(np.float16)
            .astype(np.float32)
        )
    if dtype == "F8_E4M3":
        return E4M3_VALUES[np.frombuffer(raw, np.uint8)]
    values = np.frombuffer(raw, np.dtype(NATIVE[dtype]).newbyteorder("<"))
    wide = np.float64 if values.dtype.itemsize == 8 else np.float32
    return values.astype(wide)


def chunks(shard: Path, entry: TensorEntry, elements: int = CHUNK_ELEMENTS) -> Iterator[np.ndarray]:
    """A tensor's values in order, at most ``elements`` at a time, never the whole tensor."""
    width = DTYPE_BYTES[entry.dtype]
    with open(shard, "rb") as handle:
        handle.seek(entry.start)
        remaining = entry.end - entry.start
        while remaining > 0:
            wanted = min(remaining, elements * width)
            raw = handle.read(wanted)
            if len(raw) < wanted:
                raise CheckpointError(f"{shard.name}: truncated inside tensor {entry.name}")
            remaining -= len(raw)
            yield widen(raw, entry.dtype)


def read_tensor(shard: Path, entry: TensorEntry) -> np.ndarray:
    """A whole tensor, widened, in its shape (for small tensors and tests)."""
    return np.concatenate(list(chunks(shard, entry)) or [np.zeros(0, np.float32)]).reshape(
        entry.shape
    )


def load_policy_tensors(weights: str | Path) -> dict[str, np.ndarray]:
    tensors: dict[str, np.ndarray] = {}
    for shard in shard_paths(weights):
        if not os.path.exists(shard):
            raise CheckpointError(f"{shard}: shard named in the index is missing")
        tensors.update({k: v for k, v in load_file(str(shard)).items() if k.startswith("policy.")})
    if "policy.decision_logits" not in tensors:
        raise CheckpointError(
            f"{weights}: no policy.decision_logits tensor; the sim policy needs a shopsim "
            "checkpoint (use the openai backend for real model weights)"
        )
    return tensors
