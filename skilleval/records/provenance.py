"""Provenance recorded with every result: code version, package versions, fingerprints."""

from __future__ import annotations

import datetime as dt
import functools
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("skilleval", "snakemake", "numpy", "scipy", "pandas", "safetensors", "openai", "jinja2")


def git_state(cwd: str | Path = ".") -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip()

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def package_versions() -> dict[str, str | None]:
    return dict(installed_versions())


@functools.cache  # read once a process: the sim trainer's job records hundreds of runs
def installed_versions() -> tuple[tuple[str, str | None], ...]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return tuple(versions.items())


def provenance() -> dict[str, Any]:
    return {
        "git": git_state(),
        "packages": package_versions(),
        "python": platform.python_version(),
        "host": platform.node(),
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
