"""A cell of a built paper table, found by what the table shows, and the records behind it.

A reader names a cell as the table prints it: the table (main, ranking, betas, harness, or
an ablation table such as ablation_docvqa), the row's label (``Bottom-4``, ``final-ST``,
``split 1-1-8``, ``searchqa sched-constant``) or its id, and the column's header
(``p_Holm``, ``Reward``, ``Best test``, ``Codex``). The cell is read from the table's
markdown (the labels) and its CSV beside it (the ids, row for row, as one writer made both);
its chain is the records the number was computed from, named by the plan where the row is a
run or a contrast, read from the records where it is a chunk or a trainer run.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

from skilleval import paths
from skilleval.config.typos import unknown_name
from skilleval.errors import SkillevalError
from skilleval.report.chains import contrast_links, run_link

# Where each table the reader names is printed: (markdown file, section), and the CSV that
# holds the same rows with their ids. An ablation table's name is its file's.
SECTIONS = {
    "main": [("main", "Runs", "main"), ("main", "Contrasts", "main_contrasts")],
    "ranking": [
        ("ranking", "Ranking arms", "ranking"),
        ("ranking", "Pairwise contrasts", "ranking_contrasts"),
    ],
    "betas": [("ranking", "Chunk betas", "ranking_betas")],
    "harness": [("harness", "Runs", "harness")],
}
# A contrast column by the names `why` took before it read the tables' headers.
COLUMN_ALIASES = {"estimate": "Δreward", "ci": "95% CI", "p_holm": "p_Holm"}
STUDENTS = ("Codex", "Claude")


@dataclass(frozen=True)
class Cell:
    """One cell as the table shows it: its row (header -> text), the column and its value
    (None for a whole row), and the id of the row in its CSV."""

    table: str
    section: str
    row: dict[str, str]
    column: str | None
    value: str | None
    ids: dict[str, str]
    index: int


def sections_of(table: str, root: Path) -> list[tuple[str, str, str]]:
    if table in SECTIONS:
        return SECTIONS[table]
    if table.startswith("ablation_"):
        return [(table, "Runs", table)]
    tables = (root / paths.table("x", "md")).parent
    built = sorted(p.stem for p in tables.glob("ablation_*.md"))
    raise SkillevalError(unknown_name("table", table, [*SECTIONS, *built], "the paper"))


def markdown_tables(text: str) -> dict[str, list[dict[str, str]]]:
    """The pipe tables of a markdown file, by the ``##`` heading above each."""
    found: dict[str, list[dict[str, str]]] = {}
    heading, header = "", None
    for line in text.splitlines():
        if line.startswith("## "):
            heading, header = line[3:].strip(), None
        elif line.startswith("|") and not set(line) <= set("|:- "):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
                found[heading] = []
            else:
                found[heading].append(dict(zip(header, cells, strict=False)))
        elif not line.startswith("|"):
            header = None if line.strip() else header
    return found


def csv_rows(path: Path) -> list[dict[str, str]]:
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def labels(row: dict[str, str], ids: dict[str, str]) -> set[str]:
    """What a reader may call a row: its first cell (without a footnote mark), its first two
    cells together, or its id."""
    cells = list(row.values())
    shown = {cells[0], cells[0].rstrip("*†"), " ".join(cells[:2]), f"{cells[0]}={cells[1]}"}
    return {label.casefold() for label in shown | {next(iter(ids.values()), "")} if label}


def find_cell(root: Path, table: str, row: str, column: str | None) -> Cell:
    """The cell of ``table`` at ``row`` and ``column`` (a whole row when None)."""
    found: list[Cell] = []
    known: list[list[str]] = []
    for markdown, section, csv_name in sections_of(table, root):
        md_path = root / paths.table(markdown, "md")
        if not md_path.is_file():
            raise SkillevalError(
                f"table {table} is not built ({md_path} is missing); build it: "
                f"snakemake -j 4 {paths.table(markdown, 'md')}"
            )
        shown = markdown_tables(md_path.read_text()).get(section, [])
        csv_path = root / paths.table(csv_name, "csv")
        ids = csv_rows(csv_path) if csv_path.is_file() else []
        if len(ids) != len(shown):
            # One writer makes both, row for row: copies that disagree name no record.
            raise SkillevalError(
                f"{md_path} shows {len(shown)} rows under {section!r} but {csv_path} holds "
                f"{len(ids)}: the table's copies are from different builds; rebuild it: "
                f"snakemake -j 4 {paths.table(markdown, 'md')} -f"
            )
        for index, (cells, record) in enumerate(zip(shown, ids, strict=True)):
            keys = {k: v for k, v in record.items() if k in ID_COLUMNS}
            known.append(list(cells.values())[:2])
            if row.casefold() in labels(cells, keys):
                found.append(Cell(table, section, cells, None, None, keys, index))
    if not found:
        firsts = [cells[0] for cells in known]
        # A first cell that several rows share (an ablation group) needs the second too.
        said = [c[0] if firsts.count(c[0]) == 1 else " ".join(c) for c in known]
        raise SkillevalError(unknown_name("row", row, said, f"table {table}"))
    cell = found[0]
    if column is None:
        return cell
    header = COLUMN_ALIASES.get(column.casefold(), column)
    match = [h for h in cell.row if h.casefold() == header.casefold()]
    if not match:
        raise SkillevalError(unknown_name("column", column, list(cell.row), f"{cell.section}"))
    return Cell(
        cell.table, cell.section, cell.row, match[0], cell.row[match[0]], cell.ids, cell.index
    )


# The CSV columns that name a row's records.
ID_COLUMNS = ("run", "contrast", "arm", "chunk", "run_id", "benchmark", "setting")


def arm_contrast(cell: Cell, arm_contrasts: dict[str, str]) -> str:
    """The contrast against free of the ranking arm in ``cell``, by the arm's run: a table
    whose arm the config's paper has not (built from another config) names no record."""
    arm = cell.ids["arm"]
    if arm not in arm_contrasts:
        raise SkillevalError(
            f"{paths.table('ranking', 'csv')} shows arm {arm!r}, which is not an arm of the "
            f"config's paper ({', '.join(arm_contrasts)}): the table was built from another "
            f"config; rebuild it: snakemake -j 4 {paths.table('ranking', 'md')}"
        )
    return arm_contrasts[arm]


def cell_links(
    root: Path,
    cell: Cell,
    arm_contrasts: dict[str, str],
    pairs: dict[str, tuple[str, str]],
    gate: str,
) -> list[tuple[str, str]]:
    """(what, path) of the records behind ``cell``. ``arm_contrasts``: each ranking arm's
    run -> its contrast against the free run; ``pairs``: each contrast's (treatment,
    control), and ``gate`` the Gate A whose betas rank the chunks, from the plan."""
    ids = cell.ids
    if "contrast" in ids:
        links = contrast_links(ids["contrast"], *pairs[ids["contrast"]])
        family = cell.table if cell.table in ("main", "ranking") else None
        if cell.column == "p_Holm" and family:
            links.insert(0, ("verdict family", paths.fill(paths.VERDICT_FAMILY, table=family)))
        return links
    if "arm" in ids:
        contrast = arm_contrast(cell, arm_contrasts)
        if cell.column in (None, "Reward", "r_success"):
            return [run_link(ids["arm"])]
        links = contrast_links(contrast, *pairs[contrast])
        if cell.column == "p_Holm":
            links.insert(0, ("verdict family", paths.fill(paths.VERDICT_FAMILY, table="ranking")))
        return links
    if "run" in ids:
        return [run_link(ids["run"])]
    if "chunk" in ids:
        return gate_links(root, gate)
    return trainer_links(root, cell)


def gate_links(root: Path, gate: str) -> list[tuple[str, str]]:
    """A chunk's β: the Gate A fit, its design and the masked runs it was fitted on."""
    beta = paths.fill(paths.GATE_BETA, gate=gate)
    if not (root / beta).is_file():
        return [("gate betas", beta)]  # read_chain says it is missing
    masked = json.loads((root / beta).read_text())["inputs"]["masked_runs"]
    runs = [
        (f"masked run {name}", paths.fill(paths.GATE_RUN_SUMMARY, gate=gate, masked=name))
        for name in sorted(masked)
    ]
    design = paths.fill(paths.GATE_DESIGN, gate=gate, design="design")
    return [("gate betas", beta), ("gate design", design), *runs]


def trainer_links(root: Path, cell: Cell) -> list[tuple[str, str]]:
    """A trainer run's score: its summary and its audit; a harness row names its runs by
    benchmark, setting and (the column) student."""
    ids = cell.ids
    if "run_id" in ids:
        run_ids = [(ids["run_id"], cell.table.removeprefix("ablation_"))]
    else:
        students = [cell.column] if cell.column in STUDENTS else list(STUDENTS)
        run_ids = harness_runs(root, ids["benchmark"], ids["setting"], students)
    links = []
    for run_id, bench in run_ids:
        links.append(
            (
                f"trainer run {run_id}",
                paths.fill(paths.ABLATION_SUMMARY, bench=bench, run_id=run_id),
            )
        )
        links.append(("audit", paths.fill(paths.ABLATION_AUDIT, bench=bench, run_id=run_id)))
    return links


def harness_runs(
    root: Path, bench: str, setting: str, students: list[str]
) -> list[tuple[str, str]]:
    found = []
    for summary in sorted((root / paths.RESULTS / "ablation" / bench).glob("*/summary.json")):
        record = json.loads(summary.read_text())
        harness = record.get("harness") or {}
        if record.get("value") == setting and harness.get("backend") in students:
            found.append((record["run_id"], bench))
    return found
