"""The report's first view: the main table and the forest plot with their captions, and the
simulation notice, as one HTML fragment that report/workflow.rst includes."""

from __future__ import annotations

import base64
import html
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


# What a reader needs at first sight, with its number format; the full table (experiment
# ids, protocol, split, n_tasks, descriptions) is one click away under Results.
RUN_COLUMNS = {
    "run": "{}",
    "checkpoint": "{}",
    "bank": "{}",
    "reward": "{:.4f}",
    "r_success": "{:.4f}",
    "coverage": "{:.3f}",
    "tokens_per_task": "{:,.0f}",
}
CONTRAST_COLUMNS = {
    "contrast": "{}",
    "treatment": "{}",
    "control": "{}",
    "estimate": "{:+.4f}",
    "ci_low": "{:+.4f}",
    "ci_high": "{:+.4f}",
    "verdict": "{}",
}


def compact_main_table(table_csv: str) -> str:
    """The main table's runs and contrasts (with any note), as two small HTML tables."""
    import io

    import pandas as pd

    # The CSV's header comment (its notice, report.writer) is not a row.
    lines = Path(table_csv).read_text().splitlines(keepends=True)
    body = "".join(line for line in lines if not line.startswith("# "))
    frame = pd.read_csv(io.StringIO(body), keep_default_na=False, dtype=str)
    html_parts = []
    for section, title, columns in (
        ("run", "Runs", RUN_COLUMNS),
        ("contrast", "Contrasts", CONTRAST_COLUMNS),
    ):
        rows = frame[frame["section"] == section]
        formats = {**columns, **({"note": "{}"} if (rows["note"] != "").any() else {})}
        shown = pd.DataFrame(
            {
                column: [fmt.format(float(v)) if v and fmt != "{}" else v for v in rows[column]]
                for column, fmt in formats.items()
            }
        )
        html_parts.append(f"<h3>{title}</h3>")
        html_parts.append(shown.to_html(index=False, border=0))
    return "\n".join(html_parts)


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
    table_csv: str,
    table_caption: str,
    figure_png: str,
    figure_caption: str,
    notice: str,
    output: str,
) -> None:
    atomic.write_text(
        output,
        front_page(
            compact_main_table(table_csv),
            " ".join(Path(table_caption).read_text().split()),
            Path(figure_png).read_bytes(),
            " ".join(Path(figure_caption).read_text().split()),
            notice,
        ),
    )
