"""``skilleval why TABLE ROW [COLUMN]``: from a number of the paper down to what made it.

A row of the main or the ranking table is a contrast (its verdict, its contrast record and
its two runs) or a run; the p_Holm column adds the table's verdict family. Each link of
the chain says what it is computed from (a run: its evidence identity, provenance.identity),
when and by which commit it was built, how many episodes were computed and reused, and
whether it is current or stale now: the same dry run `skilleval stale` reads, restricted
to the chain's files.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, get_args

from skilleval import paths
from skilleval.config.model import Config
from skilleval.config.typos import unknown_name
from skilleval.errors import SkillevalError
from skilleval.report.chains import Link, contrast_links, read_chain, run_link
from skilleval.workflow.plan import Table, WorkflowPlan
from skilleval.workflow.stale import stale_jobs

TABLES = tuple(t for t in get_args(Table) if t != "extra")
# The columns of a contrast row.
CONTRAST_COLUMNS = ("estimate", "ci", "verdict", "p_holm")


def chain(
    plan: WorkflowPlan, root: Path, table: str, row: str, column: str | None
) -> list[tuple[str, str]]:
    """(what, path) of every record behind ``row`` of ``table`` (and its ``column``)."""
    if table not in TABLES:
        raise SkillevalError(unknown_name("table", table, TABLES, "the paper"))
    contrasts = plan.contrasts_for(table)  # type: ignore[arg-type]
    runs = plan.main_runs if table == "main" else [arm.run for arm in plan.paper_arms]
    if row in contrasts:
        if column is not None and column.lower() not in CONTRAST_COLUMNS:
            raise SkillevalError(unknown_name("column", column, CONTRAST_COLUMNS, "a contrast row"))
        plan_row = plan.contrasts[row]
        links = contrast_links(row, plan_row.treatment, plan_row.control)
        if column is not None and column.lower() == "p_holm":
            links.insert(0, ("verdict family", paths.fill(paths.VERDICT_FAMILY, table=table)))
        return links
    if row in runs:
        return [run_link(row)]
    raise SkillevalError(unknown_name("row", row, [*contrasts, *runs], f"table {table}"))


def why(
    config: Config,
    root: Path,
    configfiles: Sequence[str],
    table: str,
    row: str,
    column: str | None = None,
    profile: str | None = None,
) -> list[Link]:
    """The chain behind a cell, each link current, stale (with the reason) or missing."""
    links = read_chain(root, chain(WorkflowPlan(config), root, table, row, column), row)
    present = [link.path for link in links if link.status != "missing"]
    planned = {o: job for job in stale_jobs(config, root, configfiles, present, profile)
               for o in job.outputs} if present else {}  # fmt: skip
    return [
        link
        if link.status == "missing"
        else replace(
            link,
            status="stale" if link.path in planned else "current",
            reasons=list(planned[link.path].reasons) if link.path in planned else [],
        )
        for link in links
    ]


def report(table: str, row: str, column: str | None, links: Sequence[Link]) -> str:
    cell = f"{row}, {column}" if column else row
    lines = [f"Table {table}, {cell}:"]
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
    links = why(config, root, args.configfile or [], table, args.row, args.column, args.profile)
    if args.json:
        print(json.dumps([asdict(link) for link in links], indent=1))
    else:
        print(report(table, args.row, args.column, links))
    return 1 if any(link.status != "current" for link in links) else 0


def add_why_command(sub: Any) -> None:
    parser = sub.add_parser(
        "why", help="the records, runs, inputs and code behind a number of the paper"
    )
    parser.add_argument("table", help=f"{' or '.join(TABLES)}, or its file under paper/tables")
    parser.add_argument("row", help="a contrast or a run of the table")
    parser.add_argument(
        "column", nargs="?", help=f"a contrast's column: {', '.join(CONTRAST_COLUMNS)}"
    )
    parser.add_argument(
        "--configfile", action="extend", nargs="+", help="as given to snakemake (one or more)"
    )
    parser.add_argument("--profile", help="as given to snakemake")
    parser.add_argument("--root", default=".", help="workflow directory")
    parser.add_argument("--json", action="store_true", help="print the chain as JSON")
    parser.set_defaults(func=cmd_why)
