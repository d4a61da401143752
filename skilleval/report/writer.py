"""One writer for every paper table: the LaTeX text plus CSV, Markdown and HTML copies.

A table has one or more sections (runs and contrasts, say). The copies show the same
frames; with several sections the CSV gets a ``section`` column and Markdown and HTML a
heading per section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

import pandas as pd

from skilleval.storage import atomic


@dataclass(frozen=True)
class Section:
    title: str
    key: str
    frame: pd.DataFrame
    float_format: str = ".4f"
    markdown_drops: tuple[str, ...] = field(default=())


def write_table_set(
    outputs: Mapping[str, str], tex: str, sections: Sequence[Section], notice: str = ""
) -> None:
    """Write ``outputs['tex']``, ``['csv']``, ``['md']`` and ``['html']``; ``notice`` (what
    of the table is simulated, report.notice) heads the CSV as a comment line and the
    Markdown and HTML as a note (the LaTeX caption carries its own)."""
    atomic.write_text(outputs["tex"], tex)
    if len(sections) == 1:
        only = sections[0]
        csv = only.frame.to_csv(index=False)
        md = _markdown(only)
        html = only.frame.to_html(index=False, float_format=_formatter(only))
    else:
        combined = pd.concat([s.frame.assign(section=s.key) for s in sections], ignore_index=True)
        csv = combined.to_csv(index=False)
        md = "\n\n".join(f"## {s.title}\n\n{_markdown(s)}" for s in sections)
        html = "".join(
            f"<h3>{s.title}</h3>" + s.frame.to_html(index=False, float_format=_formatter(s))
            for s in sections
        )
    if notice:
        csv = f"# {notice}\n{csv}"
        md = f"> {notice}\n\n{md}"
        html = f'<p class="notice">{escape(notice)}</p>{html}'
    atomic.write_text(outputs["csv"], csv)
    atomic.write_text(outputs["md"], md + "\n")
    atomic.write_text(outputs["html"], html)


def _markdown(section: Section) -> str:
    frame = section.frame.drop(columns=list(section.markdown_drops))
    return str(frame.to_markdown(index=False, floatfmt=section.float_format))


def _formatter(section: Section) -> object:
    return ("{:" + section.float_format + "}").format
