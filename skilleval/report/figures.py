"""Paper figures: the forest plot of contrasts and the Gate A betas, as PDF and PNG."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from skilleval.records.analysis import GateBeta, TruthCheck, Verdict
from skilleval.storage.figures import PAPER_FONTS, save_figure


def forest_plot(verdicts: Mapping[str, str], out_pdf: str, out_png: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [Verdict.read(p) for p in verdicts.values()]
    colours = {
        "improves": "tab:green",
        "regresses": "tab:red",
        "inconclusive": "tab:gray",
        "descriptive": "tab:blue",
        "invalid": "black",
    }
    with plt.rc_context(PAPER_FONTS):
        fig, ax = plt.subplots(figsize=(5.2, 0.35 * len(rows) + 1.2), layout="constrained")
        draw_forest(ax, rows, colours, title)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        # Outside the axes, so the legend can never cover a point or an interval.
        fig.legend(
            unique.values(),
            unique.keys(),
            loc="outside lower center",
            ncol=max(len(unique), 1),
            frameon=False,
        )
        save_figure(fig, out_pdf, out_png)


def draw_forest(ax: Any, rows: list[Any], colours: Mapping[str, str], title: str) -> None:
    for y, row in enumerate(reversed(rows)):
        if row.estimate is None or row.ci_low is None or row.ci_high is None:
            ax.text(0, y, f"{row.name}: invalid", va="center", ha="center")
            continue
        err = [[row.estimate - row.ci_low], [row.ci_high - row.estimate]]
        ax.errorbar(
            row.estimate,
            y,
            xerr=err,
            fmt="o",
            capsize=4,
            color=colours[row.verdict],
            label=row.verdict,
        )
    ax.axvline(0, color="black", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r.name for r in reversed(rows)])
    confidence = next((r.confidence for r in rows if r.confidence is not None), None)
    interval = f", {confidence:.0%} CI" if confidence is not None else ""
    # Δ and a minus sign, as the tables write them
    ax.set_xlabel(
        f"\N{GREEK CAPITAL LETTER DELTA} reward (treatment \N{MINUS SIGN} control){interval}"
    )
    ax.set_ylabel("contrast")
    ax.set_title(title)


def true_effects(truth_check_path: str | None) -> dict[str, float]:
    """Chunk id -> its known effect, from the default world's truth check (none elsewhere)."""
    if not truth_check_path:
        return {}
    return TruthCheck.read(truth_check_path).true_effects()


def beta_plot(beta_path: str, truth_check_path: str | None, out_pdf: str, out_png: str) -> None:
    """Signed betas with 2-SE bars beside the intercept fit's; in the default world, the
    known chunk effects too. A chunk whose sign or Top/Bottom membership differs between
    the two fits is starred on the axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    beta = GateBeta.read(beta_path)
    truth = true_effects(truth_check_path)
    chunks = sorted(beta.chunks, key=lambda c: -c["beta"])
    other = {c["chunk_id"]: c for c in beta.intercept_fit["chunks"]}
    differs = set(beta.comparison["sign_differs"]) | set(beta.comparison["selection_differs"])
    xs = np.arange(len(chunks))
    with plt.rc_context(PAPER_FONTS):
        fig, ax = plt.subplots(figsize=(6.0, 3.2), layout="constrained")
        ax.errorbar(
            xs - 0.15,
            [c["beta"] for c in chunks],
            yerr=[2 * c["standard_error"] for c in chunks],
            fmt="o",
            capsize=3,
            label="Gate A beta, memo's model (2 SE)",
        )
        ax.errorbar(
            xs + 0.15,
            [other[c["chunk_id"]]["beta"] for c in chunks],
            yerr=[2 * other[c["chunk_id"]]["standard_error"] for c in chunks],
            fmt="s",
            markersize=4,
            capsize=2,
            color="tab:gray",
            label="fit with intercept (2 SE)",
        )
        if truth:
            ax.scatter(
                xs,
                [truth[c["chunk_id"]] for c in chunks],
                marker="x",
                color="tab:red",
                zorder=3,
                label="true effect (default world)",
            )
        ax.axhline(0, color="black", linewidth=0.8, linestyle="--")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(
            [c["chunk_id"] + ("*" if c["chunk_id"] in differs else "") for c in chunks],
            rotation=60,
            ha="right",
        )
        ax.set_xlabel("draft chunk, by signed beta")
        ax.set_ylabel("effect on reward")
        ax.set_title("Draft chunks ranked by signed beta (* sign or Top/Bottom differs)")
        # Outside the axes, so the legend can never cover a point or an error bar.
        fig.legend(loc="outside lower center", ncol=3, frameon=False)
        save_figure(fig, out_pdf, out_png)
