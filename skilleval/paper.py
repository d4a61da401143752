"""Rendering paper tables (LaTeX via Jinja2, CSV, Markdown, HTML) and figures.

Every cell comes from a built file (run summaries, verdicts); invalid results are
marked with a dagger and their reason, never dropped.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from skilleval import atomic
from skilleval.figures import save_figure

LATEX_SPECIAL = {"&": r"\&", "%": r"\%", "#": r"\#", "_": r"\_", "$": r"\$"}


def latex_escape(text: object) -> str:
    return "".join(LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("skilleval", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def fmt_ci(low: float | None, high: float | None, digits: int = 3) -> str:
    if low is None or high is None:
        return "n/a"
    return f"[{low:+.{digits}f}, {high:+.{digits}f}]"


def load_json(path: str | Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(path).read_text())
    return data


def main_table_frames(
    summaries: Mapping[str, str], verdicts: Mapping[str, str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    run_rows = []
    for name, path in summaries.items():
        s = load_json(path)
        valid = s["coverage"] >= 1.0 and s["service"]["unchanged"]
        run_rows.append(
            {
                "run": name,
                "experiment": s["experiment"],
                "checkpoint": s["checkpoint_id"],
                "bank": s["bank"] or "none",
                "reward": s["reward"],
                "r_success": s["r_success"],
                "coverage": s["coverage"],
                "tokens_per_task": s["tokens"]["mean_per_task"],
                "n_tasks": s["n_tasks"],
                "protocol": s["protocol"],
                "split": s["split"],
                "valid": valid,
                "note": "" if valid else "coverage below 1 or service changed",
            }
        )
    contrast_rows = []
    for name, path in verdicts.items():
        v = load_json(path)
        contrast_rows.append(
            {
                "contrast": name,
                "description": v["description"],
                "treatment": v["treatment"],
                "control": v["control"],
                "estimate": v["estimate"],
                "ci_low": v["ci_low"],
                "ci_high": v["ci_high"],
                "confidence": v["confidence"],
                "verdict": v["verdict"],
                "note": v["reason"] if v["verdict"] == "invalid" else "",
            }
        )
    return pd.DataFrame(run_rows), pd.DataFrame(contrast_rows)


def render_main_table(
    summaries: Mapping[str, str],
    verdicts: Mapping[str, str],
    out_tex: str,
    out_csv: str,
    out_md: str,
    out_html: str,
) -> None:
    runs, contrasts = main_table_frames(summaries, verdicts)
    notes = []
    run_cells = []
    for row in runs.itertuples():
        mark = "" if row.valid else r"$^\dagger$"
        if not row.valid:
            notes.append(rf"$^\dagger$ {latex_escape(row.run)}: {latex_escape(row.note)}")
        run_cells.append(
            {
                "name": latex_escape(row.run),
                "mark": mark,
                "bank": latex_escape(row.bank),
                "reward": f"{row.reward:.4f}",
                "r_success": f"{row.r_success:.4f}",
                "coverage": f"{row.coverage:.3f}",
                "tokens": f"{row.tokens_per_task:,.0f}".replace(",", "{,}"),
            }
        )
    contrast_cells = []
    for row in contrasts.itertuples():
        invalid = row.verdict == "invalid"
        if invalid:
            notes.append(rf"$^\dagger$ {latex_escape(row.contrast)}: {latex_escape(row.note)}")
        contrast_cells.append(
            {
                "name": latex_escape(row.contrast),
                "mark": r"$^\dagger$" if invalid else "",
                "arms": latex_escape(f"{row.treatment} - {row.control}").replace(" - ", " $-$ "),
                "estimate": "n/a" if row.estimate is None else f"{row.estimate:+.4f}",
                "ci": fmt_ci(row.ci_low, row.ci_high),
                "verdict": row.verdict,
            }
        )
    confidence = (
        f"{contrasts['confidence'].iloc[0]:.0%}".replace("%", r"\%") if len(contrasts) else ""
    )
    tex = (
        environment()
        .get_template("main_table.tex.j2")
        .render(
            sources="results/runs/*/summary.json, results/verdicts/*.json",
            split=latex_escape(runs["split"].iloc[0]),
            n_tasks=int(runs["n_tasks"].iloc[0]),
            protocol=latex_escape(runs["protocol"].iloc[0]),
            confidence=confidence,
            runs=run_cells,
            contrasts=contrast_cells,
            notes=notes,
        )
    )
    atomic.write_text(out_tex, tex)
    combined = pd.concat(
        [runs.assign(section="run"), contrasts.assign(section="contrast")], ignore_index=True
    )
    atomic.write_text(out_csv, combined.to_csv(index=False))
    md = "## Runs\n\n" + runs.drop(columns=["valid"]).to_markdown(index=False, floatfmt=".4f")
    md += "\n\n## Contrasts\n\n" + contrasts.to_markdown(index=False, floatfmt="+.4f") + "\n"
    atomic.write_text(out_md, md)
    html = "<h3>Runs</h3>" + runs.to_html(index=False, float_format="{:.4f}".format)
    html += "<h3>Contrasts</h3>" + contrasts.to_html(index=False, float_format="{:+.4f}".format)
    atomic.write_text(out_html, html)


def forest_plot(verdicts: Mapping[str, str], out_pdf: str, out_png: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [load_json(p) for p in verdicts.values()]
    colours = {
        "improves": "tab:green",
        "regresses": "tab:red",
        "inconclusive": "tab:gray",
        "descriptive": "tab:blue",
        "invalid": "black",
    }
    fig, ax = plt.subplots(figsize=(7, 0.55 * len(rows) + 1.2))
    for y, row in enumerate(reversed(rows)):
        if row["estimate"] is None:
            ax.text(0, y, f"{row['name']}: invalid", va="center", ha="center", fontsize=8)
            continue
        err = [[row["estimate"] - row["ci_low"]], [row["ci_high"] - row["estimate"]]]
        ax.errorbar(
            row["estimate"],
            y,
            xerr=err,
            fmt="o",
            capsize=4,
            color=colours[row["verdict"]],
            label=row["verdict"],
        )
    ax.axvline(0, color="black", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r["name"] for r in reversed(rows)])
    ax.set_xlabel(f"Delta reward (treatment - control), {rows[0]['confidence']:.0%} CI")
    ax.set_title(title)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax.legend(unique.values(), unique.keys(), loc="lower right", fontsize=8)
    fig.tight_layout()
    save_figure(fig, out_pdf, out_png)


TEX_ENGINES = ("latexmk", "pdflatex")


def compile_pdf(main_tex: str, output: str) -> None:
    """Compile the paper; without a TeX engine fail with one line saying what is missing."""
    import subprocess

    from skilleval.errors import SkillevalError

    engine = next((e for e in TEX_ENGINES if shutil.which(e)), None)
    if engine is None:
        raise SkillevalError(
            "no TeX engine found (latexmk or pdflatex); install Debian packages "
            "texlive-latex-recommended texlive-latex-extra latexmk, then rerun"
        )
    directory = Path(main_tex).parent
    command = (
        ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", Path(main_tex).name]
        if engine == "latexmk"
        else ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", Path(main_tex).name]
    )
    for _ in range(1 if engine == "latexmk" else 2):
        done = subprocess.run(command, cwd=directory, capture_output=True, text=True)
        if done.returncode != 0:
            raise SkillevalError(f"{engine} failed on {main_tex}:\n{done.stdout[-2000:]}")
    produced = directory / (Path(main_tex).stem + ".pdf")
    if produced.resolve() != Path(output).resolve():
        shutil.copy(produced, output)


def ranking_frames(
    summaries: Mapping[str, str], vs_free: Mapping[str, str], pairwise: Mapping[str, str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    arms = []
    for (arm, summary_path), verdict_path in zip(summaries.items(), vs_free.values(), strict=True):
        s, v = load_json(summary_path), load_json(verdict_path)
        arms.append(
            {
                "arm": arm,
                "bank": s["bank"],
                "reward": s["reward"],
                "r_success": s["r_success"],
                "coverage": s["coverage"],
                "delta_vs_free": v["estimate"],
                "ci_low": v["ci_low"],
                "ci_high": v["ci_high"],
                "verdict": v["verdict"],
                "note": v["reason"] if v["verdict"] == "invalid" else "",
                "n_tasks": s["n_tasks"],
                "split": s["split"],
                "free": v["control"],
                "confidence": v["confidence"],
            }
        )
    contrasts = [
        {
            "contrast": name,
            "treatment": (v := load_json(path))["treatment"],
            "control": v["control"],
            "estimate": v["estimate"],
            "ci_low": v["ci_low"],
            "ci_high": v["ci_high"],
            "verdict": v["verdict"],
            "note": v["reason"] if v["verdict"] == "invalid" else "",
        }
        for name, path in pairwise.items()
    ]
    return pd.DataFrame(arms), pd.DataFrame(contrasts)


def arm_label(arm: str) -> str:
    parts = arm.removeprefix("rank-").split("-")
    label = f"{parts[0].title()}-{parts[1]}"
    return label + (f" (seed {parts[2]})" if len(parts) > 2 else "")


def render_ranking_table(
    summaries: Mapping[str, str],
    vs_free: Mapping[str, str],
    pairwise: Mapping[str, str],
    beta_path: str,
    outputs: Mapping[str, str],
) -> None:
    arms, contrasts = ranking_frames(summaries, vs_free, pairwise)
    beta = load_json(beta_path)
    notes: list[str] = []

    def mark(name: str, row: Any) -> str:
        if row.verdict != "invalid":
            return ""
        notes.append(rf"$^\dagger$ {latex_escape(name)}: {latex_escape(row.note)}")
        return r"$^\dagger$"

    arm_cells = [
        {
            "label": latex_escape(arm_label(row.arm)),
            "mark": mark(row.arm, row),
            "reward": f"{row.reward:.4f}",
            "r_success": f"{row.r_success:.4f}",
            "estimate": "n/a" if row.delta_vs_free is None else f"{row.delta_vs_free:+.4f}",
            "ci": fmt_ci(row.ci_low, row.ci_high),
            "verdict": row.verdict,
        }
        for row in arms.itertuples()
    ]
    contrast_cells = [
        {
            "name": latex_escape(row.contrast),
            "mark": mark(row.contrast, row),
            "arms": latex_escape(f"{row.treatment} - {row.control}").replace(" - ", " $-$ "),
            "estimate": "n/a" if row.estimate is None else f"{row.estimate:+.4f}",
            "ci": fmt_ci(row.ci_low, row.ci_high),
            "verdict": row.verdict,
        }
        for row in contrasts.itertuples()
    ]
    first = arms.iloc[0]
    tex = (
        environment()
        .get_template("ranking_table.tex.j2")
        .render(
            sources="results/runs/rank-*/summary.json, results/verdicts/rank-*.json, " + beta_path,
            n_chunks=len(beta["chunks"]),
            split=latex_escape(first["split"]),
            n_tasks=int(first["n_tasks"]),
            k=int(first["arm"].removeprefix("rank-").split("-")[1]),
            free=latex_escape(first["free"]),
            confidence=f"{first['confidence']:.0%}".replace("%", r"\%"),
            arms=arm_cells,
            contrasts=contrast_cells,
            notes=notes,
        )
    )
    atomic.write_text(outputs["tex"], tex)
    combined = pd.concat(
        [arms.assign(section="arm"), contrasts.assign(section="contrast")], ignore_index=True
    )
    atomic.write_text(outputs["csv"], combined.to_csv(index=False))
    md = "## Ranking arms\n\n" + arms.to_markdown(index=False, floatfmt="+.4f")
    md += "\n\n## Pairwise contrasts\n\n" + contrasts.to_markdown(index=False, floatfmt="+.4f")
    atomic.write_text(outputs["md"], md + "\n")
    html = "<h3>Ranking arms</h3>" + arms.to_html(index=False, float_format="{:+.4f}".format)
    html += "<h3>Pairwise contrasts</h3>" + contrasts.to_html(
        index=False, float_format="{:+.4f}".format
    )
    atomic.write_text(outputs["html"], html)


def beta_plot(beta_path: str, truth_check_path: str | None, out_pdf: str, out_png: str) -> None:
    """Signed betas with 2-SE bars; in the default world, the known chunk effects too."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    beta = load_json(beta_path)
    truth = (
        {c["chunk_id"]: c["true_effect"] for c in load_json(truth_check_path)["chunks"]}
        if truth_check_path
        else {}
    )
    chunks = sorted(beta["chunks"], key=lambda c: -c["beta"])
    xs = range(len(chunks))
    fig, ax = plt.subplots(figsize=(8, 3.8))
    ax.errorbar(
        xs,
        [c["beta"] for c in chunks],
        yerr=[2 * c["standard_error"] for c in chunks],
        fmt="o",
        capsize=3,
        label="Gate A beta (2 SE)",
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
    ax.set_xticklabels([c["chunk_id"] for c in chunks], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("effect on reward")
    ax.set_title("Draft chunks ranked by signed beta")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, out_pdf, out_png)
