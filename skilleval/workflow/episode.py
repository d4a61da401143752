"""``skilleval episode RUN TASK``: one episode of a built run as a reader wants it: its
messages, how it ended and how it scored.

A run is found by its name in results/runs, or, for a masked Gate A run, in the gate's
runs (``masked-03`` or ``gate-draft16-masked-03``); a name the config does not declare is
answered with the declared runs nearest to it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from skilleval import paths
from skilleval.errors import SkillevalError
from skilleval.records.runs import METRIC_NAME
from skilleval.runs.transcripts import find_episode, render
from skilleval.storage.records import read_records
from skilleval.workflow.as_snakemake import check_declared_run


def run_folder(root: Path, run: str) -> Path:
    """The folder of the built run ``run``: a declared run's, or a masked gate run's."""
    folder = root / paths.fill(paths.RUN_DIR, run=run)
    if folder.is_dir():
        return folder
    gate_runs = sorted(root.glob(paths.fill(paths.GATE_RUN_DIR, gate="*", masked="*")))
    for gate_run in gate_runs:
        gate = gate_run.parent.parent.name
        if run in (gate_run.name, f"gate-{gate}-{gate_run.name}"):
            return gate_run
    check_declared_run(folder, root)
    raise SkillevalError(
        f"run {run!r} is declared but not built yet (neither {folder} nor a gate's runs hold "
        "it); build it with snakemake -j 4 paper (skilleval stale lists what is missing)"
    )


def scores(folder: Path, task_id: str, repeat: int) -> dict[str, float]:
    """Every metric of the episode's record in the run's results.jsonl."""
    results = folder / paths.RESULTS_FILE
    for record in read_records(results, "task_record"):
        if record["task_id"] == task_id and record.get("repeat", 0) == repeat:
            return {k: v for k, v in record.items() if METRIC_NAME.match(k)}
    raise SkillevalError(f"{results} holds no record of task {task_id!r} repeat {repeat}")


def scored_line(metrics: dict[str, float]) -> str:
    ordered = sorted(metrics, key=lambda name: (name != "reward", name))
    return "=== scored: " + ", ".join(f"{name} {metrics[name]:.4g}" for name in ordered)


def show_episode(args: argparse.Namespace) -> int:
    folder = run_folder(Path(args.root), args.run)
    transcripts = folder / Path(paths.RUN_TRANSCRIPTS).name
    episode = find_episode(transcripts, args.task, args.repeat)
    metrics = scores(folder, args.task, args.repeat)
    if args.json:
        print(json.dumps({**episode, "scores": metrics}, indent=1))
    else:
        print(f"{render(episode)}\n{scored_line(metrics)}")
    return 0


def add_episode_command(sub: Any) -> None:
    episode = sub.add_parser("episode", help="one episode's transcript: what the model said")
    episode.add_argument("run", help="run name (config runs, rank-*, masked gate runs)")
    episode.add_argument("task", help="task id, as in the run's results.jsonl")
    episode.add_argument("--repeat", type=int, default=0, help="which repeat of the task")
    episode.add_argument("--json", action="store_true", help="the transcript and scores as JSON")
    episode.add_argument("--root", default=".", help="workflow directory")
    episode.set_defaults(func=show_episode)
