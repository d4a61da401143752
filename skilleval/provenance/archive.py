"""Archiving superseded runs and removing unfinished ones, replacing the memo's rm/mv.

Archive moves a run's outputs and journals under results/archive/ with a why.json.
Clean removes an unfinished run's leftovers: by default it only lists them; --archive
moves them; --delete deletes them. Registered checkpoints and banks are never touched.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skilleval.errors import SkillevalError
from skilleval.storage.records import write_record


def protected_paths(config: dict[str, Any], root: Path) -> list[Path]:
    paths = [root / c["path"] for c in config["checkpoints"].values()]
    paths += [(root / c["path"]).parent for c in config["checkpoints"].values()]
    paths += [root / b["path"] for b in config["banks"].values()]
    return [p.resolve() for p in paths]


def run_paths(run: str, root: Path) -> list[Path]:
    candidates = [
        root / "results" / "runs" / run,
        root / "results" / "journal" / run,
        root / "results" / "logs" / "runs" / f"{run}.log",
    ]
    return [p for p in candidates if p.exists()]


def _refuse_protected(paths: list[Path], protected: list[Path]) -> None:
    for path in paths:
        resolved = path.resolve()
        for guard in protected:
            if (
                resolved == guard
                or guard.is_relative_to(resolved)
                or resolved.is_relative_to(guard)
            ):
                raise SkillevalError(
                    f"refusing to touch {path}: it holds or is a registered checkpoint or bank "
                    f"({guard}); unregister it in config first if you really mean it"
                )


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def archive_plan(run: str, config: dict[str, Any], root: Path) -> tuple[list[str], list[str]]:
    """(the run's files, the outputs built from them) that archive_run would move."""
    paths = run_paths(run, root)
    if not paths:
        raise SkillevalError(f"nothing to archive for run {run!r} under {root / 'results'}")
    _refuse_protected(paths, protected_paths(config, root))
    moved = [str(p.relative_to(root)) for p in paths]
    return moved, [d for d in dependents_of(root, moved) if (root / d).exists()]


def archive_run(
    run: str,
    reason: str,
    config: dict[str, Any],
    root: Path,
) -> Path:
    archive_plan(run, config, root)
    paths = run_paths(run, root)
    target = root / "results" / "archive" / "runs" / f"{run}-{_stamp()}"
    target.mkdir(parents=True)
    for path in paths:
        shutil.move(
            str(path), target / path.relative_to(root / "results").as_posix().replace("/", "__")
        )
    moved = [str(p.relative_to(root)) for p in paths]
    dependents = [d for d in dependents_of(root, moved) if (root / d).exists()]
    for dependent in dependents:
        destination = target / "dependents" / dependent
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(root / dependent), destination)
    write_record(
        target / "why.json",
        "archive_note",
        {
            "run": run,
            "reason": reason,
            "archived_at": _stamp(),
            "moved": moved,
            "dependents_moved": dependents,
        },
    )
    return target


def dependents_of(root: Path, files: Sequence[str]) -> list[str]:
    """Every output built, directly or not, from ``files``, by Snakemake's own records.

    Snakemake does not rebuild a missing intermediate file while the outputs made from
    it are present, so archiving a run also archives what was built from it: the next
    build then redoes the run and everything that depends on it.
    """
    records = {}
    for record in (root / ".snakemake" / "metadata").glob("*"):
        try:
            output = base64.b64decode(record.name.replace("@", "/")).decode()
            records[output] = json.loads(record.read_text()).get("input", [])
        except (ValueError, OSError):
            continue
    found: list[str] = []
    frontier = [f.rstrip("/") for f in files]
    while frontier:
        wanted = frontier
        frontier = []
        for output, inputs in sorted(records.items()):
            hit = any(i == w or i.startswith(f"{w}/") for i in inputs for w in wanted)
            if hit and output not in found:
                found.append(output)
                frontier.append(output)
    return found


def clean_run(run: str, config: dict[str, Any], root: Path, mode: str) -> list[Path]:
    """mode: 'list' (default, touches nothing), 'archive' or 'delete'."""
    if (root / "results" / "runs" / run / "summary.json").exists():
        raise SkillevalError(
            f"run {run!r} is finished (summary.json exists); use 'skilleval archive' to "
            "supersede a finished run, clean is for unfinished ones"
        )
    paths = run_paths(run, root)
    if not paths:
        raise SkillevalError(
            f"no unfinished run {run!r}: nothing of it under {root / 'results'} (a run's "
            "name as in config runs, e.g. base-S0)"
        )
    _refuse_protected(paths, protected_paths(config, root))
    if mode == "archive":
        archive_run(run, "unfinished run cleaned", config, root)
    elif mode == "delete":
        for path in paths:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    return paths
