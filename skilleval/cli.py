"""The ``skilleval`` command: tools that work outside the build graph."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from skilleval.errors import SkillevalError


def cmd_compare(args: argparse.Namespace) -> int:
    from skilleval.contrast import RunRecords, compare, validity_checks, verdict_of

    control, treatment = RunRecords.load(args.run_a), RunRecords.load(args.run_b)
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
            "description": "",
            "causal": True,
            "checks": validity_checks(control, treatment),
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skilleval", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    compare = sub.add_parser(
        "compare", help="task-aligned paired bootstrap of RUN_B - RUN_A (run directories)"
    )
    compare.add_argument("run_a", help="control run directory (holds summary.json, results.jsonl)")
    compare.add_argument("run_b", help="treatment run directory")
    compare.add_argument("--metric", default="reward", help="reward (default), r_success, r_*")
    compare.add_argument("--json", action="store_true", help="print the contrast as JSON")
    compare.add_argument("--n-resamples", type=int, default=10_000)
    compare.add_argument("--confidence", type=float, default=0.95)
    compare.add_argument("--seed", type=int, default=20260830)
    compare.add_argument("--method", choices=["percentile", "BCa"], default="percentile")
    compare.set_defaults(func=cmd_compare)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except SkillevalError as error:
        print(f"skilleval {args.command}: {error}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
