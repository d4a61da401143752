"""Writing figures: a PDF for the paper and a PNG for the report, same content."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def save_figure(fig: Any, out_pdf: str, out_png: str) -> None:
    import matplotlib.pyplot as plt

    Path(out_pdf).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_pdf)
    fig.savefig(out_png, dpi=150)
    plt.close(fig)
