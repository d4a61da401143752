"""The report's first view: the main table and the forest plot with their captions, the
simulation notice, and under them the records behind each row of the table (each row's
name links to its chain), as one HTML fragment that report/workflow.rst includes."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2

from skilleval.report.chains import chain_html, contrast_links, read_chain, run_link
from skilleval.storage import atomic

# Snakemake's report narrows the landing page to 32rem, centres it vertically (so a tall
# page loses its top) and strips table borders (Tailwind); these rules undo that for the
# fragment only and the containers that hold it (through :has), so that it takes the width
# the window has. A table keeps its own width: the figure sits beside it where both fit and
# goes under it where not, and a table wider than the page scrolls inside its own box.
# Captions take no width of their own (contain: inline-size), so the table sets the panel's.
FRONT_STYLE = """<style>
.prose.max-w-lg:has(.skilleval-front) { max-width: none; padding: 1rem; }
ul:has(.skilleval-front) { flex: 1 1 auto; min-width: 0; }
.items-center:has(.skilleval-front) { align-items: flex-start; }
.skilleval-front .panels { display: flex; flex-wrap: wrap; gap: 0 2rem; align-items: flex-start; }
.skilleval-front .panels > .table-panel { flex: 0 1 auto; min-width: 0; }
.skilleval-front .panels > .figure-panel { flex: 1 1 24rem; min-width: 0; max-width: 56rem; }
.skilleval-front .panels p { contain: inline-size; }
.skilleval-front .scrolls { max-width: 100%; overflow-x: auto; }
.skilleval-front h2 { margin-top: 0.5rem; }
.skilleval-front h3 { margin: 0.5rem 0 0.2rem; }
.skilleval-front table {
  border-collapse: collapse; font-size: 0.72rem; margin: 0.3rem 0; width: auto;
}
.skilleval-front th, .skilleval-front td { border: 1px solid #ccc; padding: 1px 4px; }
.skilleval-front img { max-width: 100%; }
.skilleval-front .notice { border-left: 4px solid #d97706; padding-left: 0.5rem; }
.skilleval-front details { font-size: 0.72rem; margin: 0.2rem 0; overflow-x: auto; }
.skilleval-front details th { text-align: left; font-weight: normal; color: #555; }
</style>"""


def compact_main_table(table_html: str) -> str:
    """A table's HTML copy (report.writer) without its notice and long captions: the page
    shows the notice once and the table's short caption from report/."""
    text = Path(table_html).read_text()
    text = re.sub(r'<p class="notice">.*?</p>', "", text, flags=re.DOTALL)
    return re.sub(r"<caption>.*?</caption>", "", text, flags=re.DOTALL)


def linked_rows(table_html: str, links: Mapping[str, str]) -> str:
    """The table with each row whose first cell is a key of ``links`` linking to the chain
    that key names (a ranking arm's label links to its contrast against the free run)."""
    for cell_text, name in links.items():
        cell = f"<tr><td>{html.escape(cell_text)}"
        linked = f'<tr><td><a href="#{anchor(name)}">{html.escape(cell_text)}</a>'
        table_html = re.sub(re.escape(cell) + r"(?=[<\s†])", linked, table_html, count=1)
    return table_html


def anchor(name: str) -> str:
    return f"why-{name}"


def chains_html(root: Path, contrasts: Mapping[str, tuple[str, str]], runs: Sequence[str]) -> str:
    """Every linked row's chain as built, the same for any build of the same evidence
    (skilleval why adds when and how each was built, and whether it is current now).
    ``contrasts``: each contrast's (treatment, control) runs."""
    blocks = [
        chain_html(
            anchor(c),
            f"{c}: verdict, contrast and runs",
            read_chain(root, contrast_links(c, *pair), c, how=False),
        )
        for c, pair in contrasts.items()
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
    ranking: tuple[str, str] = ("", ""),
) -> str:
    """``ranking``: the ranking table's HTML and caption, shown under the panels."""
    figure = base64.b64encode(figure_png).decode("ascii")
    parts = [FRONT_STYLE, '<div class="skilleval-front">']
    if notice:
        parts.append(f'<p class="notice">{html.escape(notice)}</p>')
    parts += [
        '<div class="panels"><div class="table-panel">',
        "<h2>Table 1: the main table</h2>",
        f"<p>{html.escape(table_caption)}</p>",
        f'<div class="scrolls">{table_html}</div>',
        '</div><div class="figure-panel">',
        "<h2>Figure 1: the contrasts</h2>",
        f'<img alt="forest plot of the contrasts" src="data:image/png;base64,{figure}">',
        f"<p>{html.escape(figure_caption)}</p>",
        "</div></div>",
    ]
    if ranking[0]:
        parts += [
            "<h2>Table 2: the ranking</h2>",
            f"<p>{html.escape(ranking[1])}</p>",
            f'<div class="scrolls">{ranking[0]}</div>',
        ]
    parts += [chains, "</div>"]
    return "\n".join(parts) + "\n"


@dataclass(frozen=True)
class FrontRows:
    """The rows of the front page's tables that link to the records behind them: a row's
    first cell to its chain's name, and each chain's runs."""

    main: dict[str, str]
    ranking: dict[str, str]
    contrasts: dict[str, tuple[str, str]]  # contrast -> (treatment, control)
    runs: list[str]


def write_front_page(
    tables: Mapping[str, tuple[str, str]],
    figure: tuple[str, str],
    notice: str,
    output: str,
    rows: FrontRows,
    params: Mapping[str, object],
) -> None:
    """``tables``: the main and ranking tables' HTML copies and caption files; ``figure``:
    the forest plot's PNG and caption file; ``params``: what a caption reads as
    ``snakemake.params``, as Snakemake's report renders it (Jinja)."""

    def caption(path: str) -> str:
        text = jinja2.Template(Path(path).read_text()).render(snakemake={"params": params})
        return " ".join(text.split())

    main_html, main_caption = tables["main"]
    ranking_html, ranking_caption = tables["ranking"]
    atomic.write_text(
        output,
        front_page(
            linked_rows(compact_main_table(main_html), rows.main),
            caption(main_caption),
            Path(figure[0]).read_bytes(),
            caption(figure[1]),
            notice,
            chains_html(Path("."), rows.contrasts, rows.runs),
            (linked_rows(compact_main_table(ranking_html), rows.ranking), caption(ranking_caption)),
        ),
    )
