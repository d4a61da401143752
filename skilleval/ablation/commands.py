"""``skilleval ablation``: the ablation and harness matrices' plan, one run, a ratio split."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from skilleval.ablation.matrix import load_matrix
from skilleval.errors import SkillevalError


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


def add_ablation_command(sub: Any) -> None:
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
