"""One writer for every paper table: the LaTeX text plus CSV, Markdown and HTML copies.

The Markdown and HTML copies are made from the very cells the LaTeX prints (de-LaTeXed),
so they have the same columns, rounding and signs; a cell the LaTeX prints as ``--`` (not
run, not in the family) is an en dash. A section given its numbers (``data``) writes them
as its CSV, one column each, for a reader's pandas; otherwise its CSV is the cells too. A
table has one or more sections (runs and contrasts, say): each is one CSV file, and a
heading of its own in Markdown and HTML, under its LaTeX caption.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

import pandas as pd

from skilleval.report.latex import captions, plain_text
from skilleval.storage import atomic

NOT_RUN = "\u2013"  # an en dash, as LaTeX prints --


@dataclass(frozen=True)
class Section:
    """One block of a LaTeX table: its header and rows as LaTeX cells. ``table``: which of
    the ``.tex`` file's tables holds it (its caption heads the copies); ``key``: the CSV of
    a later section is ``outputs[f"csv_{key}"]``."""

    title: str
    key: str
    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    table: int = 0
    # The CSV's numbers, one column each, and what each column means (its units).
    data: pd.DataFrame | None = None
    units: str = ""

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.header):
                raise ValueError(
                    f"section {self.title!r}: a row of {len(row)} cells under "
                    f"{len(self.header)} columns ({list(self.header)})"
                )

    def plain(self) -> tuple[list[str], list[list[str]]]:
        """Header and cells as plain text; a Note column only where a row has a note."""
        header = [plain_text(h) for h in self.header]
        cells = [[_cell(c) for c in row] for row in self.rows]
        if header and header[-1] == "Note" and not any(row[-1] for row in cells):
            return header[:-1], [row[:-1] for row in cells]
        return header, cells


def _cell(latex: str) -> str:
    text = plain_text(latex)
    return NOT_RUN if text in (NOT_RUN, "n/a") else text


def csv_path(outputs: Mapping[str, str], sections: Sequence[Section], index: int) -> str:
    if index == 0:
        return outputs["csv"]
    key = f"csv_{sections[index].key}"
    if key not in outputs:
        raise KeyError(f"the table's section {sections[index].title!r} has no output {key!r}")
    return outputs[key]


def write_table_set(
    outputs: Mapping[str, str], tex: str, sections: Sequence[Section], notice: str = ""
) -> None:
    """Write ``outputs['tex']``, a CSV per section (``['csv']``, then ``['csv_<key>']``),
    ``['md']`` and ``['html']``. Each copy is headed by its LaTeX caption; ``notice`` (what
    of the table is simulated, report.notice) heads the CSVs as a comment line and the
    Markdown and HTML as a note."""
    table_captions = [plain_text(c) for c in captions(tex)]
    atomic.write_text(outputs["tex"], tex)
    md, html = [], []
    if notice:
        md.append(f"> {notice}")
        html.append(f'<p class="notice">{escape(notice)}</p>')
    for index, section in enumerate(sections):
        caption = table_captions[section.table] if section.table < len(table_captions) else ""
        # The sections of one LaTeX table share its caption: Markdown and HTML print it once.
        shown = caption if index == 0 or sections[index - 1].table != section.table else ""
        header, rows = section.plain()
        titled = f"{section.title}: {caption}" if caption else section.title
        comments = [f"# {line}" for line in (notice, titled, section.units) if line]
        table = _csv(header, rows) if section.data is None else section.data.to_csv(index=False)
        atomic.write_text(csv_path(outputs, sections, index), "\n".join(comments) + "\n" + table)
        md.append(
            f"## {section.title}\n\n"
            + (f"*{shown}*\n\n" if shown else "")
            + _markdown(header, rows)
        )
        html.append(_html(section.title, shown, header, rows))
    atomic.write_text(outputs["md"], "\n\n".join(md) + "\n")
    atomic.write_text(outputs["html"], "".join(html))


def _csv(header: list[str], rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    # A CSV cell holds the number alone: no thousands separator, empty when not run.
    for row in rows:
        writer.writerow(
            ["" if c == NOT_RUN else c.replace(",", "") if _number(c) else c for c in row]
        )
    return buffer.getvalue()


def _number(cell: str) -> bool:
    return cell.replace(",", "").lstrip("+-").replace(".", "", 1).isdigit()


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    numeric = [
        bool(rows) and all(_number(r[i]) or r[i] == NOT_RUN for r in rows)
        for i in range(len(header))
    ]
    align = ["---:" if n else ":---" for n in numeric]
    return "\n".join([line(header), "|" + "|".join(align) + "|", *map(line, rows)])


# A cell that is a number as the tables print it: a sign, digits, a decimal point, an
# interval's brackets, a count's k/M/G, a percent or a dagger.
NUMERIC_CELL = re.compile(
    r"^[-+\u2212\u2013]?[\d.,]+[kMG%]?(\s*[\[(][-+\u2212\d., ]+[\])])?[\u2020*]?$"
)


def _td(cell: str) -> str:
    """A cell; a number right-aligned, as the PDF aligns its columns of numbers."""
    aligned = ' style="text-align:right"' if NUMERIC_CELL.match(cell.strip()) else ""
    return f"<td{aligned}>{escape(cell)}</td>"


def _html(title: str, caption: str, header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(_td(c) for c in row) + "</tr>" for row in rows)
    caption_line = f"<caption>{escape(caption)}</caption>" if caption else ""
    return (
        f"<h3>{escape(title)}</h3><table>{caption_line}"
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )
