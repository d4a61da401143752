"""``skilleval stale``, ``archive`` and ``clean``: what the graph would rebuild, and moving a
run's files (and the servers it left) out of its way."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from skilleval.config.model import Config
from skilleval.errors import ServiceError, SkillevalError


def cmd_stale(args: argparse.Namespace) -> int:
    from skilleval.workflow.stale import report, stale_jobs

    config, root = _config(args)
    targets, plan_file = args.targets or ["paper"], args.plan_file and Path(args.plan_file)
    jobs = stale_jobs(config, root, args.configfile or [], targets, args.profile, plan_file)
    print(json.dumps([j.as_json() for j in jobs], indent=1) if args.json else report(jobs))
    return 1 if jobs else 0


def _config(args: argparse.Namespace) -> tuple[Config, Path]:
    from skilleval.workflow.as_snakemake import snakemake_config

    root = Path(args.root)
    return snakemake_config(root, args.configfile or [], getattr(args, "profile", None)), root


def cmd_archive(args: argparse.Namespace) -> int:
    from skilleval.workflow.archive import archive_plan, archive_run

    config, root = _config(args)
    if args.dry_run:
        moved, dependents = archive_plan(args.run, config, root, args.configfile or ())
        print(f"would archive {args.run}: " + ", ".join(moved))
        print("and the outputs built from it: " + (", ".join(dependents) or "none"))
        return 0
    target = archive_run(args.run, args.reason, config, root, args.configfile or ())
    print(f"archived {args.run} to {target}")
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    from skilleval.workflow.archive import clean_run

    config, root = _config(args)
    mode = "delete" if args.delete else "archive" if args.archive else "list"
    containers = clean_containers(args.run, config, mode) + clean_servers(args.run, mode)
    try:
        paths = clean_run(args.run, config, root, mode)
    except SkillevalError:
        if not containers:
            raise
        paths = []
    verb = {
        "list": "would remove (pass --archive or --delete)",
        "archive": "archived",
        "delete": "deleted",
    }[mode]
    print(f"{verb}: " + ", ".join([*(str(p) for p in paths), *containers]))
    return 0


def clean_containers(run: str, config: Config, mode: str) -> list[str]:
    """The run's model-server containers whose job is gone: listed, or removed in either mode
    that acts, since a container is no evidence to archive. Looked for wherever a Docker
    engine answers (docker mode may come from a profile this command does not read); an
    unreachable engine is an error only when the config itself says docker."""
    from skilleval.serving.containers import docker_client, leftovers, remove_leftovers

    try:
        client = docker_client()
    except ServiceError:
        if config.backends.model_server == "docker":
            raise
        return []
    if mode == "list":
        return [f"container {c.name}" for c in leftovers(client, run)]
    return [f"container {name}" for name in remove_leftovers(client, run)]


def clean_servers(run: str, mode: str) -> list[str]:
    """The run's model-server processes whose job is gone (labels in the GPU lock
    directory): listed, or stopped in either mode that acts."""
    from skilleval.serving.gpu import lock_directory
    from skilleval.serving.processes import orphans, stop_orphans

    found = [
        f"server pid {label.pid} (port {label.port})"
        for _, label in orphans(lock_directory(), run)
        if label.server_alive()
    ]
    if mode != "list":
        stop_orphans(lock_directory(), run)
    return found


def add_stale_command(sub: Any) -> None:
    stale = sub.add_parser("stale", help="stale or missing results and the paper cells they feed")
    stale.add_argument(
        "--configfile", action="extend", nargs="+", help="as given to snakemake (one or more)"
    )
    stale.add_argument("--profile", help="as given to snakemake (e.g. profiles/gpu-host)")
    stale.add_argument("--root", default=".", help="workflow directory")
    stale.add_argument("--json", action="store_true", help="print the stale jobs as JSON")
    stale.add_argument("--plan-file", help="keep the dry run's plan (JSON lines) in this file")
    stale.add_argument("targets", nargs="*", help="snakemake targets (none: paper)")
    stale.set_defaults(func=cmd_stale)


def add_archive_commands(sub: Any) -> None:
    archive = sub.add_parser("archive", help="move a superseded run under results/archive/")
    archive.add_argument("run", help="run name (config runs, rank-*, masked runs)")
    archive.add_argument("--reason", required=True, help="recorded in why.json")
    archive.add_argument(
        "--dry-run", action="store_true", help="list what would move, move nothing"
    )
    clean = sub.add_parser("clean", help="remove an unfinished run (lists only, by default)")
    clean.add_argument("run", help="name of the unfinished run")
    clean.add_argument("--archive", action="store_true", help="move its leftovers to the archive")
    clean.add_argument("--delete", action="store_true", help="delete its leftovers for good")
    for command, func in ((archive, cmd_archive), (clean, cmd_clean)):
        command.add_argument(
            "--configfile", action="append", help="as given to snakemake (repeatable)"
        )
        command.add_argument("--root", default=".", help="workflow directory")
        command.set_defaults(func=func)
