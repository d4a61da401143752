"""Content digests of the files a run reads, cached by (path, size, mtime).

Inputs the graph does not build (registered checkpoints, banks, split files) are
compared by content: their digests go into params, so a touch, a copy to another path
or a checkout that rewrites mtimes makes nothing stale. A checkpoint of many GB is
hashed once; after a touch its (path, size, mtime) misses the cache, it is hashed again
(cheaply for shards: header and sampled blocks) and found unchanged.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from skilleval.checkpoints.files import checkpoint_fingerprint
from skilleval.checkpoints.layout import shard_paths
from skilleval.errors import SkillevalError
from skilleval.storage import atomic
from skilleval.storage.hashing import file_sha256


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

    def tree(self, folder: str | Path) -> str:
        """Content digest of every file under a folder, by relative path; names and
        contents count, mtimes and the folder's own path do not."""
        folder = Path(folder)
        if not folder.is_dir():
            raise SkillevalError(f"{folder} is not a folder: its content cannot be identified")
        entries, changed = [], False
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            stat = path.stat()
            key = f"sha256:{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
            if key not in self._cache:
                self._cache[key], changed = file_sha256(path), True
            entries.append(f"{path.relative_to(folder).as_posix()}={self._cache[key]}")
        if changed:
            atomic.write_json(self.cache_file, self._cache)
        return hashlib.sha256("\n".join(entries).encode()).hexdigest()[:16]


def checkout_identity(root: str | Path) -> dict[str, str]:
    """The commit of a git checkout and a digest of what is not committed (changes to
    tracked files and untracked files that git does not ignore): the trainer's code."""

    def git(*args: str) -> bytes:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=60)
        if done.returncode != 0:
            raise SkillevalError(
                f"`git -C {root} {' '.join(args)}` failed: "
                f"{done.stderr.decode(errors='replace').strip()}"
            )
        return done.stdout

    commit = git("rev-parse", "HEAD").decode().strip()
    uncommitted = hashlib.sha256(git("diff", "HEAD", "--binary"))
    for name in sorted(git("ls-files", "--others", "--exclude-standard", "-z").split(b"\0")):
        if name:
            uncommitted.update(name + b"\0" + file_sha256(Path(root) / name.decode()).encode())
    return {"commit": commit, "uncommitted": uncommitted.hexdigest()[:16]}
