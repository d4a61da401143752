"""Content fingerprints of checkpoint files (no numpy: parse-time code uses it).

Fingerprints must be cheap on multi-GB shards, so large files are hashed from their
safetensors header, size and evenly spaced sampled blocks rather than every byte.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from skilleval.checkpoints.layout import is_index, resolve_weights, shard_paths
from skilleval.errors import CheckpointError

FULL_HASH_LIMIT = 64 * 1024 * 1024
SAMPLE_BLOCKS = 16
BLOCK_SIZE = 1024 * 1024


def file_fingerprint(path: str | Path, full: bool = False) -> str:
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: checkpoint file does not exist")
    size = path.stat().st_size
    digest = hashlib.sha256(f"size={size};".encode())
    with open(path, "rb") as handle:
        if full or size <= FULL_HASH_LIMIT:
            for block in iter(lambda: handle.read(BLOCK_SIZE), b""):
                digest.update(block)
            return f"sha256:{digest.hexdigest()}"
        header_len = int.from_bytes(handle.read(8), "little")
        handle.seek(0)
        digest.update(handle.read(8 + min(header_len, size - 8)))
        for i in range(SAMPLE_BLOCKS):
            handle.seek((size - BLOCK_SIZE) * i // (SAMPLE_BLOCKS - 1))
            digest.update(handle.read(BLOCK_SIZE))
    return f"sampled-sha256:{digest.hexdigest()}"


def checkpoint_fingerprint(weights: str | Path) -> str:
    weights = resolve_weights(weights)
    parts = [file_fingerprint(weights)]
    if is_index(weights):
        parts += [f"{p.name}={file_fingerprint(p)}" for p in shard_paths(weights)]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()
