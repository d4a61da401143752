"""The ``skilleval`` command: tools that work outside the build graph."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skilleval.ablation.matrix import load_matrix
from skilleval.ablation.trainer_check import add_trainer_command
from skilleval.config.model import Config
from skilleval.errors import ServiceError, SkillevalError
from skilleval.logs import Interrupted, quiet_interrupts
from skilleval.serving.gpu import lock_directory
from skilleval.workflow.env_check import add_env_command
from skilleval.workflow.episode import add_episode_command
from skilleval.workflow.why import add_why_command
from skilleval.world.serve_command import add_serve_world


def cmd_compare(args: argparse.Namespace) -> int:
    from skilleval.analysis.contrast import RunRecords, compare
    from skilleval.analysis.verdict import verdict_of
    from skilleval.workflow.as_snakemake import check_declared_run

    for directory in (args.run_a, args.run_b):
        check_declared_run(Path(directory), Path(args.root))
    control, treatment = (RunRecords.in_directory(d) for d in (args.run_a, args.run_b))
    result = compare(
        control,
        treatment,
        metric=args.metric,
        n_resamples=args.n_resamples,
        confidence=args.confidence,
        seed=args.seed,
        method=args.method,
    )
    verdict = verdict_of(
        {
            **result,
            "name": "compare",
            "causal": True,
        }
    )
    if args.json:
        print(json.dumps({**result, "verdict": verdict["verdict"]}, indent=2))
        return 0
    print(
        f"{treatment.name} - {control.name} on {args.metric} ({result['n_pairs']} tasks, "
        f"{result['n_resamples']} resamples, seed {result['seed']}, {result['method']})\n"
        f"  means: {result['treatment_mean']:.4f} vs {result['control_mean']:.4f}\n"
        f"  delta: {result['estimate']:+.4f}  {result['confidence']:.0%} CI "
        f"[{result['ci_low']:+.4f}, {result['ci_high']:+.4f}]  -> {verdict['verdict']}"
    )
    return 0


def cmd_ablation_plan(args: argparse.Namespace) -> int:
    from skilleval.ablation.status import plan_table, render_plan

    rows = plan_table(load_matrix(args.matrix), Path(args.root))
    print(json.dumps(rows, indent=1) if args.json else render_plan(rows))
    return 0


def cmd_ablation_run(args: argparse.Namespace) -> int:
    import logging

    from skilleval.ablation.plan import plan
    from skilleval.ablation.run import build_and_audit

    # The rule sends this command's output to the run's log.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    matrix = load_matrix(args.matrix)
    runs = {run.run_id: run for run in plan(matrix)}
    if args.run_id not in runs:
        raise SkillevalError(f"{args.run_id!r} is not in the plan of {args.matrix}")
    build_and_audit(runs[args.run_id], matrix, args.summary, args.audit, args.identity, args.kept)
    return 0


def cmd_ablation_split(args: argparse.Namespace) -> int:
    from skilleval.ablation.splits import write_split

    write_split(args.benchmark, args.pool, args.ratio, args.output)
    return 0


def cmd_gpu_run(args: argparse.Namespace) -> int:
    """Lease cards, export CUDA_VISIBLE_DEVICES, run the command, release on exit."""
    import subprocess
    import time

    from skilleval.serving.gpu import gpu_lease, parse_devices, visible_devices

    command = args.command_args[1:] if args.command_args[:1] == ["--"] else args.command_args
    if not command:
        raise SkillevalError("gpu-run needs a command after --")
    allowed = parse_devices(args.devices)
    protected = parse_devices(args.protected)
    with gpu_lease(args.gpus, allowed, args.lock_dir, args.timeout, protected=protected) as lease:
        record = {**lease.as_json(), "command": command, "pid": os.getpid()}
        sys.stderr.write(f"skilleval gpu-run: leased {record}\n")
        with visible_devices(lease):
            started = time.time()
            code = subprocess.call(command)
        if args.record:
            from skilleval.serving.gpu import LeaseRecord

            LeaseRecord.create(**record, started=started, ended=time.time(), returncode=code).write(
                args.record
            )
    return code


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
    containers = _clean_containers(args.run, config, mode) + _clean_servers(args.run, mode)
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


def _clean_containers(run: str, config: Config, mode: str) -> list[str]:
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


def _clean_servers(run: str, mode: str) -> list[str]:
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


def cmd_checkpoint_audit(args: argparse.Namespace) -> int:
    from skilleval.checkpoints.audit import audit_checkpoint, render_audit

    audit = audit_checkpoint(Path(args.path).name, args.path, args.full_hash)
    print(json.dumps(audit, indent=2) if args.json else render_audit(audit))
    return 0 if audit["passed"] else 1


def cmd_checkpoint_diff(args: argparse.Namespace) -> int:
    from skilleval.checkpoints.diff import render_diff, weight_diff

    diff = weight_diff(args.base, args.final, args.device)
    print(json.dumps(diff, indent=2) if args.json else render_diff(diff, args.top))
    return 0


def _add_checkpoint(sub: Any) -> None:
    checkpoint = sub.add_parser("checkpoint", help="check checkpoints before registering them")
    checkpoint_sub = checkpoint.add_subparsers(dest="checkpoint_command", required=True)
    audit = checkpoint_sub.add_parser(
        "audit", help="shards present and readable, index true to its shards; exit 1 if not"
    )
    audit.add_argument("path", help="checkpoint directory, its index file or one .safetensors")
    audit.add_argument("--full-hash", action="store_true", help="hash every byte (slow)")
    audit.add_argument("--json", action="store_true", help="print the audit record as JSON")
    audit.set_defaults(func=cmd_checkpoint_audit)
    diff = checkpoint_sub.add_parser("diff", help="relative L2 change per tensor, FINAL vs BASE")
    diff.add_argument("base", help="checkpoint directory, index file or .safetensors")
    diff.add_argument("final", help="checkpoint directory, index file or .safetensors")
    diff.add_argument("--json", action="store_true", help="print every tensor as JSON")
    diff.add_argument("--top", type=int, default=20, help="tensors listed")
    diff.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="where sums are taken",
    )
    diff.set_defaults(func=cmd_checkpoint_diff)


def _add_compare(sub: Any) -> None:
    compare = sub.add_parser(
        "compare", help="task-aligned paired bootstrap of RUN_B - RUN_A (run directories)"
    )
    compare.add_argument("run_a", help="control run directory (holds summary.json, results.jsonl)")
    compare.add_argument("run_b", help="treatment run directory")
    compare.add_argument(
        "--root", default=".", help="workflow directory (its config names the runs)"
    )
    compare.add_argument("--metric", default="reward", help="reward, r_success or any r_* metric")
    compare.add_argument("--json", action="store_true", help="print the contrast as JSON")
    compare.add_argument("--n-resamples", type=int, default=10_000, help="bootstrap resamples")
    compare.add_argument("--confidence", type=float, default=0.95, help="interval level")
    compare.add_argument(
        "--seed", type=int, default=20260830, help="seed of numpy.random.default_rng"
    )
    compare.add_argument(
        "--method", choices=["percentile", "BCa"], default="percentile", help="interval"
    )
    compare.set_defaults(func=cmd_compare)


def _add_ablation(sub: Any) -> None:
    ablation = sub.add_parser("ablation", help="the ablation and harness matrices")
    ablation_sub = ablation.add_subparsers(dest="ablation_command", required=True)
    plan = ablation_sub.add_parser("plan", help="every planned run with its status")
    plan.add_argument("--json", action="store_true", help="print a JSON list of runs")
    plan.add_argument("--matrix", default="config/ablation/matrix.yaml", help="ablation matrix")
    plan.add_argument("--root", default=".", help="workflow directory holding results/")
    plan.set_defaults(func=cmd_ablation_plan)
    run = ablation_sub.add_parser("run", help="build and audit one planned run (graph entry)")
    run.add_argument("run_id", help="a run id of the plan (skilleval ablation plan)")
    run.add_argument("--matrix", default="config/ablation/matrix.yaml", help="ablation matrix")
    run.add_argument("--summary", required=True, help="summary JSON to write")
    run.add_argument("--audit", required=True, help="audit JSON to write")
    run.add_argument(
        "--identity", help="the run's evidence identity; a kept complete run of it is restored"
    )
    run.add_argument("--kept", help="folder of kept complete runs, by run id and identity")
    run.set_defaults(func=cmd_ablation_run)
    split = ablation_sub.add_parser("split", help="ratio split of a candidate pool (seed 42)")
    split.add_argument("benchmark", help="benchmark name of the matrix")
    split.add_argument(
        "ratio", choices=["1shot", "1-1-8", "2-1-7", "4-1-5"], help="train-val-test ratio"
    )
    split.add_argument("--pool", type=int, required=True, help="candidate pool size")
    split.add_argument("--output", required=True, help="split JSON to write")
    split.set_defaults(func=cmd_ablation_split)


def _add_gpu(sub: Any) -> None:
    gpu = sub.add_parser("gpu-run", help="run a command on leased GPUs (never a protected one)")
    gpu.add_argument("--gpus", type=int, required=True, help="cards to lease")
    gpu.add_argument(
        "--devices",
        default=os.environ.get("SKILLEVAL_GPU_DEVICES", ""),
        help="allowed card ids, e.g. 1-13 (profile resource gpu_devices)",
    )
    gpu.add_argument("--protected", default="0", help="cards never handed out")
    gpu.add_argument(
        "--lock-dir",
        default=str(lock_directory()),
        help="folder of the card locks, shared by every job of the host",
    )
    gpu.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for cards")
    gpu.add_argument("--record", help="write the lease and timings to this JSON file")
    gpu.add_argument("command_args", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    gpu.set_defaults(func=cmd_gpu_run)


def _add_stale(sub: Any) -> None:
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


def _add_archive(sub: Any) -> None:
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


class HelpfulParser(argparse.ArgumentParser):
    """Every command's --help shows each option's default (subcommands inherit this class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.ArgumentDefaultsHelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = HelpfulParser(prog="skilleval", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_compare(sub)
    _add_ablation(sub)
    _add_checkpoint(sub)
    _add_gpu(sub)
    _add_stale(sub)
    _add_archive(sub)
    add_episode_command(sub)
    add_serve_world(sub)
    add_why_command(sub)
    add_env_command(sub)
    add_trainer_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        sys.stdout.flush()
    except SkillevalError as error:
        sys.stderr.write(f"skilleval {args.command}: {error}\n")
        return 2
    except Interrupted as interrupt:
        sys.stderr.write(f"skilleval {args.command}: interrupted by {interrupt.signal_name}\n")
        return int(interrupt.code or 1)
    except BrokenPipeError:
        # The reader (head, less) closed the pipe: stop quietly, as Unix tools do, and keep
        # Python from failing again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return code


def run() -> None:
    """The ``skilleval`` command: an interrupt ends it in one line (skilleval.logs)."""
    quiet_interrupts()
    sys.exit(main())


if __name__ == "__main__":
    run()
