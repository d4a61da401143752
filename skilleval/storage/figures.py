"""How every figure is sized and saved, whichever layer draws it (the report, the
checkpoint diff, the ablations): the same figure gives the same bytes on any day."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from skilleval.errors import FigureError

# Every paper figure is drawn at the width it prints at (the PDF includes it at its natural
# size, and the layout check flags any figure shrunk below 95%), so these sizes are the
# sizes on the page: no text below 7 pt.
PAPER_FONTS: Any = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
}


# The width of a character of the figures' font (DejaVu Sans) in ems, generous for the
# wide ones of config keys (underscores, lower-case m and w): what a
# line of a given width holds.
CHARACTER_EMS = 0.7


def characters_across(width_in: float, font_pt: float) -> int:
    """How many characters of ``font_pt`` a line ``width_in`` inches wide holds."""
    return max(int(width_in * 72 / (font_pt * CHARACTER_EMS)), 1)


def wrapped(text: str, width: int) -> str:
    """``text`` in lines of at most ``width`` characters, broken after a space, '.', '_',
    ',', '/' or '-' (config keys and model names have few spaces); a run of characters
    without one of these stays whole, and the clip check below names it if it still does
    not fit."""
    pieces = re.findall(r"[^\s._,/-]*[\s._,/-]*", text)
    lines = [""]
    for piece in filter(None, pieces):
        if lines[-1] and len(lines[-1]) + len(piece.rstrip()) > width:
            lines.append("")
        lines[-1] += piece
    return "\n".join(line.rstrip() for line in lines)


# How far past the figure's edge a text may reach before it counts as cut: rounding.
CLIP_TOLERANCE_PT = 0.5


def drawn_texts(fig: Any) -> list[Any]:
    """Every text the figure draws: its own, each axes' title, axis labels and the tick
    labels of the ticks inside the axes' limits (matplotlib keeps labels of ticks outside
    them, never drawn), and legend texts."""
    texts = [*fig.texts, *(t for legend in fig.legends for t in legend.get_texts())]
    for ax in fig.axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label]
        texts += [t for legend in [ax.get_legend()] if legend for t in legend.get_texts()]
        texts += [t for t in ax.texts]
        for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            low, high = min(low, high), max(low, high)
            for tick in axis.get_major_ticks():
                if low <= tick.get_loc() <= high:
                    texts += [tick.label1, tick.label2]
    return [t for t in texts if t.get_visible() and t.get_text().strip()]


def clipped_texts(fig: Any) -> list[str]:
    """Each drawn text that reaches past the figure's edge, with how far (points)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    edge, found = fig.bbox, []
    for text in drawn_texts(fig):
        box = text.get_window_extent(renderer)
        over = max(edge.x0 - box.x0, box.x1 - edge.x1, edge.y0 - box.y0, box.y1 - edge.y1)
        over_pt = over * 72 / fig.dpi
        if over_pt > CLIP_TOLERANCE_PT:
            found.append(f"{' '.join(text.get_text().split())!r} by {over_pt:.1f} pt")
    return found


def save_pdf(fig: Any, out_pdf: str) -> None:
    """The figure as a PDF; refused where a text would print cut at its edge."""
    clipped = clipped_texts(fig)
    if clipped:
        raise FigureError(
            f"{out_pdf}: text drawn past the figure's edge: {'; '.join(clipped)}; wrap or "
            "shorten it (storage.figures.wrapped) or widen the figure"
        )
    Path(out_pdf).parent.mkdir(parents=True, exist_ok=True)
    # No creation date: the same figure gives the same bytes on any day.
    fig.savefig(out_pdf, metadata={"CreationDate": None})


def save_figure(fig: Any, out_pdf: str, out_png: str) -> None:
    import matplotlib.pyplot as plt

    save_pdf(fig, out_pdf)
    fig.savefig(out_png, dpi=150)
    plt.close(fig)
