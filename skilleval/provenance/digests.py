"""Content digests of the files a run reads, cached by (path, size, mtime).

Inputs the graph does not build (registered checkpoints, banks, split files) are
compared by content: their digests go into params, so a touch, a copy to another path
or a checkout that rewrites mtimes makes nothing stale. A checkpoint of many GB is
hashed once; after a touch its (path, size, mtime) misses the cache, it is hashed again
(cheaply for shards: header and sampled blocks) and found unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

from skilleval.checkpoints.files import checkpoint_fingerprint, shard_paths
from skilleval.storage import atomic
from skilleval.storage.hashing import file_sha256


class FileDigests:
    def __init__(self, cache_file: Path) -> None:
        self.cache_file = cache_file
        self._cache: dict[str, str] = (
            json.loads(cache_file.read_text()) if cache_file.exists() else {}
        )

    def _stat_key(self, kind: str, paths: list[Path]) -> str:
        stats = [f"{p.resolve()}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in paths]
        return f"{kind}|" + "|".join(stats)

    def digest(self, path: str | Path, kind: str = "file") -> str:
        """sha256 of a file; for kind 'checkpoint', the fingerprint of it and its shards."""
        path = Path(path)
        files = sorted({path, *shard_paths(path)}) if kind == "checkpoint" else [path]
        key = self._stat_key(kind, [f for f in files if f.exists()])
        if key not in self._cache:
            value = checkpoint_fingerprint(path) if kind == "checkpoint" else file_sha256(path)
            self._cache[key] = value
            atomic.write_json(self.cache_file, self._cache)
        return self._cache[key]
