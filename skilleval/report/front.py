"""The report's first view: the main table and the forest plot with their captions, and the
simulation notice, as one HTML fragment that report/workflow.rst includes."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

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
</style>"""


def compact_main_table(table_html: str) -> str:
    """The main table's HTML copy (report.writer) without its notice and long captions: the
    page shows the notice once and the short caption of report/main_table.rst."""
    text = Path(table_html).read_text()
    text = re.sub(r'<p class="notice">.*?</p>', "", text, flags=re.DOTALL)
    return re.sub(r"<caption>.*?</caption>", "", text, flags=re.DOTALL)


def front_page(
    table_html: str, table_caption: str, figure_png: bytes, figure_caption: str, notice: str
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
        "</div></div></div>",
    ]
    return "\n".join(parts) + "\n"


def write_front_page(
    table_html: str,
    table_caption: str,
    figure_png: str,
    figure_caption: str,
    notice: str,
    output: str,
) -> None:
    atomic.write_text(
        output,
        front_page(
            compact_main_table(table_html),
            " ".join(Path(table_caption).read_text().split()),
            Path(figure_png).read_bytes(),
            " ".join(Path(figure_caption).read_text().split()),
            notice,
        ),
    )
