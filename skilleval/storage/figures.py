"""How every figure is sized and saved, whichever layer draws it (the report, the
checkpoint diff, the ablations): the same figure gives the same bytes on any day."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def save_pdf(fig: Any, out_pdf: str) -> None:
    Path(out_pdf).parent.mkdir(parents=True, exist_ok=True)
    # No creation date: the same figure gives the same bytes on any day.
    fig.savefig(out_pdf, metadata={"CreationDate": None})


def save_figure(fig: Any, out_pdf: str, out_png: str) -> None:
    import matplotlib.pyplot as plt

    save_pdf(fig, out_pdf)
    fig.savefig(out_png, dpi=150)
    plt.close(fig)
