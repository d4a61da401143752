"""``skilleval compare``: the contrast of two run directories the config declares."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from skilleval.config.model import INTERVAL_METHODS


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


def add_compare_command(sub: Any) -> None:
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
        "--method", choices=INTERVAL_METHODS, default="percentile", help="interval"
    )
    compare.set_defaults(func=cmd_compare)
