"""Archiving superseded runs and removing unfinished ones, replacing the memo's rm/mv.

Archive moves a run's outputs and journals under results/archive/ with a why.json.
Clean removes an unfinished run's leftovers: by default it only lists them; --archive
moves them; --delete deletes them. Registered checkpoints and banks are never touched.
"""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from skilleval import paths
from skilleval.config.model import Config
from skilleval.config.typos import unknown_name
from skilleval.errors import SkillevalError
from skilleval.storage.records import Record
from skilleval.workflow.plan import WorkflowPlan


class ArchiveNote(Record):
    """Why a run's results were moved aside, when, and what moved with them."""

    kind = "archive_note"
    run: str
    reason: str
    archived_at: str
    moved: list[str]
    dependents_moved: list[str]


def protected_paths(config: Config, root: Path) -> list[Path]:
    paths = [root / c.path for c in config.checkpoints.values()]
    paths += [(root / c.path).parent for c in config.checkpoints.values()]
    paths += [root / b.path for b in config.banks.values()]
    return [p.resolve() for p in paths]


def run_paths(run: str, root: Path, config: Config | None = None) -> list[Path]:
    """What of ``run`` is on disk: its outputs, journal and log. With ``config``, a masked
    Gate A run (masked-01) is found under its gate, and a name the config does not declare
    is refused naming the declared ones."""
    candidates = [
        root / paths.fill(paths.RUN_DIR, run=run),
        root / paths.JOURNAL_ROOT / run,
        root / paths.LOGS / "runs" / f"{run}.log",
    ]
    if config is not None:
        plan = WorkflowPlan(config)
        if run in plan.masked:
            gate = plan.gate
            candidates = [
                root / paths.fill(paths.GATE_RUN_DIR, gate=gate, masked=run),
                root / paths.JOURNAL_ROOT / plan.masked[run].name,
                root / paths.LOGS / "gate" / f"{gate}-{run}.log",
            ]
        elif run not in plan.runs and not any(p.exists() for p in candidates):
            raise SkillevalError(unknown_name("run", run, [*plan.runs, *plan.masked]))
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


def archive_plan(
    run: str, config: Config, root: Path, configfiles: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """(the run's files, the outputs built from them) that archive_run would move."""
    found = run_paths(run, root, config)
    if not found:
        raise SkillevalError(f"nothing to archive for run {run!r} under {root / 'results'}")
    _refuse_protected(found, protected_paths(config, root))
    moved = [str(p.relative_to(root)) for p in found]
    return moved, [d for d in dependents_of(root, moved, configfiles) if (root / d).exists()]


def archive_run(
    run: str,
    reason: str,
    config: Config,
    root: Path,
    configfiles: Sequence[str] = (),
) -> Path:
    moved, dependents = archive_plan(run, config, root, configfiles)
    target = root / "results" / "archive" / "runs" / f"{run}-{_stamp()}"
    target.mkdir(parents=True)
    for path in (root / m for m in moved):
        shutil.move(
            str(path), target / path.relative_to(root / "results").as_posix().replace("/", "__")
        )
    for dependent in dependents:
        destination = target / "dependents" / dependent
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(root / dependent), destination)
    ArchiveNote.create(
        run=run, reason=reason, archived_at=_stamp(), moved=moved, dependents_moved=dependents
    ).write(target / "why.json")
    return target


def built_from(root: Path, configfiles: Sequence[str] = ()) -> dict[str, list[str]]:
    """Output -> the inputs Snakemake recorded when it built it, asked of Snakemake itself
    (``--detailed-summary``: snakemake/dag.py DAG.summary, one tab-separated line per
    output whose fifth field is its recorded input files, comma-separated, or -)."""
    if not (root / ".snakemake" / "metadata").is_dir():
        return {}  # Snakemake has built nothing here, so nothing was built from the run
    command = [sys.executable, "-m", "snakemake", "--directory", str(root), "--detailed-summary"]
    if configfiles:
        command += ["--configfile", *configfiles]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=600)
    lines = done.stdout.splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith("output_file\t")), None)
    if done.returncode != 0 or header is None:
        raise SkillevalError(
            f"cannot ask Snakemake what was built from what in {root} "
            f"(snakemake --detailed-summary): {(done.stderr or done.stdout)[-1500:]}"
        )
    records: dict[str, list[str]] = {}
    for line in lines[header + 1 :]:
        fields = line.split("\t")
        if len(fields) >= 5:
            records[fields[0]] = [] if fields[4] == "-" else fields[4].split(",")
    return records


def dependents_of(root: Path, files: Sequence[str], configfiles: Sequence[str] = ()) -> list[str]:
    """Every output built, directly or not, from ``files``, by Snakemake's own records.

    Snakemake does not rebuild a missing intermediate file while the outputs made from
    it are present, so archiving a run also archives what was built from it: the next
    build then redoes the run and everything that depends on it.
    """
    records = built_from(root, configfiles)
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


def clean_run(run: str, config: Config, root: Path, mode: str) -> list[Path]:
    """mode: 'list' (default, touches nothing), 'archive' or 'delete'."""
    found = run_paths(run, root, config)
    if any((p / paths.SUMMARY_FILE).exists() for p in found if p.is_dir()):
        raise SkillevalError(
            f"run {run!r} is finished (summary.json exists); use 'skilleval archive' to "
            "supersede a finished run, clean is for unfinished ones"
        )
    if not found:
        raise SkillevalError(
            f"no unfinished run {run!r}: nothing of it under {root / 'results'} (a run's "
            "name as in config runs, e.g. base-S0)"
        )
    _refuse_protected(found, protected_paths(config, root))
    if mode == "archive":
        archive_run(run, "unfinished run cleaned", config, root)
    elif mode == "delete":
        for path in found:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    return found
