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

from skilleval.checkpoints.files import checkpoint_fingerprint
from skilleval.checkpoints.layout import shard_paths
from skilleval.storage import atomic


class FileDigests:
    def __init__(self, cache_file: Path) -> None:
        self.cache_file = cache_file
        self._cache: dict[str, str] = (
            json.loads(cache_file.read_text()) if cache_file.exists() else {}
        )

    def digest(self, path: str | Path) -> str:
        """Content fingerprint of a file, and of every shard when it is an index file."""
        path = Path(path)
        files = [f for f in sorted({path, *shard_paths(path)}) if f.exists()]
        key = "|".join(f"{f.resolve()}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files)
        if key not in self._cache:
            self._cache[key] = checkpoint_fingerprint(path)
            atomic.write_json(self.cache_file, self._cache)
        return self._cache[key]
