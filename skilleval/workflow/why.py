"""``skilleval why TABLE ROW [COLUMN]``: from a number of the paper down to what made it.

The cell is named as the table shows it (report.cells): main, ranking, betas, harness or
an ablation table; a row by its label or id; a column by its header. The answer is the
cell's value and the chain of records below it: a contrast's verdict, its record and its
two runs (with the table's verdict family for p_Holm), a run's summary, a chunk's Gate A
fit with its design and masked runs, a trainer run's summary and audit. Each link says
what it is computed from (a run: its evidence identity, provenance.identity), when and by
which commit it was built, and whether it is current or stale now: the same dry run
`skilleval stale` reads, restricted to the chain's files.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from skilleval.config.model import Config
from skilleval.report.cells import SECTIONS, Cell, arm_contrast, cell_links, find_cell
from skilleval.report.chains import Link, read_chain
from skilleval.workflow.plan import WorkflowPlan
from skilleval.workflow.stale import stale_jobs

TABLES = (*SECTIONS, "ablation_<benchmark>")


def chain(plan: WorkflowPlan, root: Path, cell: Cell) -> list[tuple[str, str]]:
    """(what, path) of every record behind ``cell``."""
    pairs = {name: (c.treatment, c.control) for name, c in plan.contrasts.items()}
    return cell_links(root, cell, plan.arm_contrasts(), pairs, plan.gate)


def why(
    config: Config,
    root: Path,
    configfiles: Sequence[str],
    table: str,
    row: str,
    column: str | None = None,
    profile: str | None = None,
) -> tuple[Cell, list[Link]]:
    """The cell and the chain behind it, each link current, stale (with the reason) or
    missing."""
    cell = find_cell(root, table, row, column)
    plan = WorkflowPlan(config)
    # The name the records know the row by: a chunk's id, a contrast's (an arm's against
    # the free run), a run's.
    arm = arm_contrast(cell, plan.arm_contrasts()) if "arm" in cell.ids else None
    key = cell.ids.get("chunk") or arm or cell.ids.get("contrast") or row
    links = read_chain(root, chain(plan, root, cell), key)
    present = [link.path for link in links if link.status != "missing"]
    planned = {o: job for job in stale_jobs(config, root, configfiles, present, profile)
               for o in job.outputs} if present else {}  # fmt: skip
    return cell, [
        link
        if link.status == "missing"
        else replace(
            link,
            status="stale" if link.path in planned else "current",
            reasons=list(planned[link.path].reasons) if link.path in planned else [],
        )
        for link in links
    ]


def report(cell: Cell, row: str, links: Sequence[Link]) -> str:
    shown = f"{row}, {cell.column}: {cell.value}" if cell.column else f"{row}: {cell.row}"
    lines = [f"Table {cell.table} ({cell.section}), {shown}"]
    for link in links:
        state = link.status + (f" ({'; '.join(link.reasons)})" if link.reasons else "")
        lines.append(f"  {link.what}: {link.path}, {state}")
        for key, value in link.facts.items():
            lines.append(f"      {key}: {value}")
        if link.built.get("at"):
            commit = link.built.get("commit") or "no git checkout"
            dirty = " with uncommitted changes" if link.built.get("dirty") else ""
            lines.append(f"      built {link.built.get('at')} from {commit}{dirty}")
    return "\n".join(lines)


def cmd_why(args: argparse.Namespace) -> int:
    from skilleval.workflow.as_snakemake import snakemake_config

    root = Path(args.root)
    config = snakemake_config(root, args.configfile or [], args.profile)
    table = Path(args.table).stem if "/" in args.table else args.table
    cell, links = why(
        config, root, args.configfile or [], table, args.row, args.column, args.profile
    )
    if args.json:
        print(json.dumps({"cell": asdict(cell), "chain": [asdict(ln) for ln in links]}, indent=1))
    else:
        print(report(cell, args.row, links))
    return 1 if any(link.status != "current" for link in links) else 0


def add_why_command(sub: Any) -> None:
    parser = sub.add_parser(
        "why", help="the records, runs, inputs and code behind a number of the paper"
    )
    parser.add_argument("table", help=f"{' or '.join(TABLES)}, or its file under paper/tables")
    parser.add_argument("row", help="the row's label as the table shows it, or its id")
    parser.add_argument("column", nargs="?", help="the column's header as the table shows it")
    parser.add_argument(
        "--configfile", action="extend", nargs="+", help="as given to snakemake (one or more)"
    )
    parser.add_argument("--profile", help="as given to snakemake")
    parser.add_argument("--root", default=".", help="workflow directory")
    parser.add_argument("--json", action="store_true", help="print the chain as JSON")
    parser.set_defaults(func=cmd_why)
