"""The report's first view: the main table and the forest plot with their captions, the
simulation notice, and under them the records behind each row of the table (each row's
name links to its chain), as one HTML fragment that report/workflow.rst includes."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from pathlib import Path

from skilleval.report.chains import chain_html, contrast_links, read_chain, run_link
from skilleval.storage import atomic

# Snakemake's report narrows the landing page to 32rem, centres it vertically (so a tall
# page loses its top) and strips table borders (Tailwind); these rules undo that for the
# fragment only and the containers that hold it (through :has).
FRONT_STYLE = """<style>
.prose.max-w-lg:has(.skilleval-front) { max-width: 72rem; padding: 1rem; }
.items-center:has(.skilleval-front) { align-items: flex-start; }
.skilleval-front .panels {
  display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 1.5rem;
}
.skilleval-front h2 { margin-top: 0.5rem; }
.skilleval-front h3 { margin: 0.5rem 0 0.2rem; }
.skilleval-front table { border-collapse: collapse; font-size: 0.72rem; margin: 0.3rem 0; }
.skilleval-front th, .skilleval-front td { border: 1px solid #ccc; padding: 1px 4px; }
.skilleval-front img { max-width: 100%; }
.skilleval-front .notice { border-left: 4px solid #d97706; padding-left: 0.5rem; }
.skilleval-front details { font-size: 0.72rem; margin: 0.2rem 0; }
.skilleval-front details th { text-align: left; font-weight: normal; color: #555; }
</style>"""


def compact_main_table(table_html: str) -> str:
    """The main table's HTML copy (report.writer) without its notice and long captions: the
    page shows the notice once and the short caption of report/main_table.rst."""
    text = Path(table_html).read_text()
    text = re.sub(r'<p class="notice">.*?</p>', "", text, flags=re.DOTALL)
    return re.sub(r"<caption>.*?</caption>", "", text, flags=re.DOTALL)


def linked_rows(table_html: str, names: Sequence[str]) -> str:
    """The table with each named row's first cell linking to that row's chain."""
    for name in names:
        cell = f"<tr><td>{html.escape(name)}"
        linked = f'<tr><td><a href="#{anchor(name)}">{html.escape(name)}</a>'
        table_html = re.sub(re.escape(cell) + r"(?=[<\s†])", linked, table_html, count=1)
    return table_html


def anchor(name: str) -> str:
    return f"why-{name}"


def chains_html(root: Path, contrasts: Sequence[str], runs: Sequence[str]) -> str:
    """Every row's chain as built, the same for any build of the same evidence (skilleval
    why adds when and how each was built, and whether it is current now)."""
    blocks = [
        chain_html(
            anchor(c),
            f"{c}: verdict, contrast and runs",
            read_chain(root, contrast_links(root, c), c, how=False),
        )
        for c in contrasts
    ]
    blocks += [
        chain_html(anchor(r), f"{r}: run summary", read_chain(root, [run_link(r)], r, how=False))
        for r in runs
    ]
    return "<h3>Where each number comes from</h3>" + "".join(blocks)


def front_page(
    table_html: str,
    table_caption: str,
    figure_png: bytes,
    figure_caption: str,
    notice: str,
    chains: str = "",
) -> str:
    figure = base64.b64encode(figure_png).decode("ascii")
    parts = [FRONT_STYLE, '<div class="skilleval-front">']
    if notice:
        parts.append(f'<p class="notice">{html.escape(notice)}</p>')
    parts += [
        '<div class="panels"><div>',
        "<h2>Table 1: the main table</h2>",
        f"<p>{html.escape(table_caption)}</p>",
        table_html,
        "</div><div>",
        "<h2>Figure 1: the contrasts</h2>",
        f'<img alt="forest plot of the contrasts" src="data:image/png;base64,{figure}">',
        f"<p>{html.escape(figure_caption)}</p>",
        "</div></div>",
        chains,
        "</div>",
    ]
    return "\n".join(parts) + "\n"


def write_front_page(
    table_html: str,
    table_caption: str,
    figure_png: str,
    figure_caption: str,
    notice: str,
    output: str,
    rows: tuple[Sequence[str], Sequence[str]] = ((), ()),
) -> None:
    """``rows``: the table's contrasts and runs, each linked to the records behind it."""
    contrasts, runs = rows
    atomic.write_text(
        output,
        front_page(
            linked_rows(compact_main_table(table_html), [*contrasts, *runs]),
            " ".join(Path(table_caption).read_text().split()),
            Path(figure_png).read_bytes(),
            " ".join(Path(figure_caption).read_text().split()),
            notice,
            chains_html(Path("."), contrasts, runs),
        ),
    )
