"""Atomic file writes: a reader sees the old file or the whole new one, never a part.

Files get the mode the user's umask allows (as ``open`` would), not the private 0600
of a temporary file, and a full or read-only disk is one DiskError naming the path.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from skilleval.errors import DiskError

DISK_PROBLEMS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}


def disk_error(path: str | Path, error: OSError, kept: str = "") -> DiskError | None:
    """The user-facing error for a write that failed on the disk; None for other errors."""
    problem = DISK_PROBLEMS.get(error.errno or 0)
    if problem is None:
        return None
    folder = Path(path).resolve().parent
    fix = (
        f"free space on the file system holding {folder} (df -h {folder})"
        if error.errno in (errno.ENOSPC, errno.EDQUOT)
        else f"make {folder} writable"
    )
    return DiskError(f"cannot write {path}: {problem}; {fix}, then re-run{kept}")


def current_umask() -> int:
    """The process umask, read without changing it (os.umask would, for every thread)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode())


def write_bytes(path: str | Path, data: bytes) -> None:
    """``data`` at ``path`` whole or not at all: written beside it, synced, then renamed."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise disk_error(path, error) or error from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), 0o666 & ~current_umask())
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as error:
        Path(tmp).unlink(missing_ok=True)
        raise disk_error(path, error) or error from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | Path, data: Any) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def write_jsonl(path: str | Path, records: Iterable[dict[str, Any]]) -> None:
    write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
