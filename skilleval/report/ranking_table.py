"""The ranking tables of the paper (Gate A arms, pairwise contrasts, chunk betas)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from skilleval import paths
from skilleval.records.analysis import GateBeta, Verdict, VerdictFamily
from skilleval.records.runs import RunSummary
from skilleval.report.latex import environment, fmt_ci, latex_escape, signed
from skilleval.report.notice import caption_of, notice_of
from skilleval.report.tables import (
    Notes,
    contrast_cells,
    contrast_section,
    family_caption,
    fmt_p,
    interval_name,
    noted_rows,
    percent,
    verdict_row,
    with_family,
)
from skilleval.report.writer import Section, write_table_set

ARM_HEADER = ("Arm", "Reward", r"$r_\mathrm{success}$", r"$\Delta$ vs free")
BETA_HEADER = ("Chunk", r"$\beta$", "SE", r"$\beta$ (intercept fit)", "SE (intercept fit)",
               "Top/Bottom", "Top/Bottom (intercept fit)")  # fmt: skip
BETA_KEYS = ("beta", "se", "beta_intercept_fit", "se_intercept_fit", "selection",
             "selection_intercept_fit")  # fmt: skip


def ranking_frames(
    arms: Sequence[Mapping[str, Any]],
    summaries: Sequence[str],
    vs_free: Sequence[str],
    pairwise: Mapping[str, str],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = []
    for arm, summary_path, verdict_path in zip(arms, summaries, vs_free, strict=True):
        s = RunSummary.read(summary_path)
        v = Verdict.read(verdict_path)
        rows.append(
            {
                "arm": arm["run"],
                "bank": s.bank,
                "reward": s.metric("reward"),
                "r_success": s.metric("r_success"),
                "coverage": s.coverage,
                "delta_vs_free": v.estimate,
                "ci_low": v.ci_low,
                "ci_high": v.ci_high,
                "verdict": v.verdict,
                "note": v.reason if v.verdict == "invalid" else "",
                "vs_free": arm["vs_free"],
                "selection": "registered" if arm.get("registered") else "drawn",
                "n_tasks": s.n_tasks,
                "split": s.split,
                "free": v.control,
                "confidence": v.confidence,
                "method": v.method,
            }
        )
    contrasts = [
        {k: v for k, v in verdict_row(name, Verdict.read(path)).items() if k in PAIRWISE_COLUMNS}
        for name, path in pairwise.items()
    ]
    return pd.DataFrame(rows), pd.DataFrame(contrasts)


PAIRWISE_COLUMNS = (
    "contrast",
    "treatment",
    "control",
    "estimate",
    "ci_low",
    "ci_high",
    "confidence",
    "method",
    "p_value",
    "verdict",
    "note",
)


def mean_loading(beta: GateBeta) -> float:
    """The mean share of a common effect that one no-intercept beta takes."""
    loadings = [float(r["loading_of_common_effect"]) for r in beta.comparison["chunks"]]
    return sum(loadings) / len(loadings)


def chunk_frame(beta: GateBeta) -> pd.DataFrame:
    """Per chunk: the memo's beta beside the intercept fit's, and where they disagree."""
    rows = {r["chunk_id"]: r for r in beta.comparison["chunks"]}
    se = {c["chunk_id"]: c["standard_error"] for c in beta.chunks}
    se_intercept = {c["chunk_id"]: c["standard_error"] for c in beta.intercept_fit["chunks"]}
    return pd.DataFrame(
        [
            {
                "chunk": chunk,
                "beta": rows[chunk]["beta_memo"],
                "se": se[chunk],
                "beta_intercept_fit": rows[chunk]["beta_intercept_fit"],
                "se_intercept_fit": se_intercept[chunk],
                "absorbed_common_effect": rows[chunk]["absorbed_common_effect"],
                "selection": rows[chunk]["selection_memo"],
                "selection_intercept_fit": rows[chunk]["selection_intercept_fit"],
                "sign_differs": rows[chunk]["sign_differs"],
                "selection_differs": rows[chunk]["selection_differs"],
            }
            for chunk in beta.signed_order
        ]
    )


def _arm_cells(
    arms: Sequence[Mapping[str, Any]], frame: pd.DataFrame, notes: Notes
) -> list[dict[str, str]]:
    return [
        {
            "label": latex_escape(arm["label"]),
            "mark": notes.mark(row.arm, row.verdict == "invalid", row.note),
            "reward": f"{row.reward:.4f}",
            "r_success": f"{row.r_success:.4f}",
            "estimate": "n/a" if row.delta_vs_free is None else signed(row.delta_vs_free),
            "ci": fmt_ci(row.ci_low, row.ci_high),
            "verdict": row.verdict,
            "p_holm": latex_escape(fmt_p(row.p_holm)),
        }
        for arm, row in zip(arms, frame.itertuples(), strict=True)
    ]


def chunk_cells(chunks: pd.DataFrame) -> list[dict[str, str]]:
    return [
        {
            "chunk": latex_escape(row.chunk),
            "beta": signed(row.beta),
            "se": f"{row.se:.4f}",
            "beta_intercept_fit": signed(row.beta_intercept_fit),
            "se_intercept_fit": f"{row.se_intercept_fit:.4f}",
            "selection": latex_escape(row.selection),
            "selection_intercept_fit": latex_escape(row.selection_intercept_fit),
            "mark": "*" if row.sign_differs or row.selection_differs else "",
        }
        for row in chunks.itertuples()
    ]


def differences(beta: GateBeta) -> str:
    """Where the two fits disagree, for the caption: 'none' when they agree everywhere."""
    differs = [
        *(f"sign of {c}" for c in beta.comparison["sign_differs"]),
        *(f"Top/Bottom membership of {c}" for c in beta.comparison["selection_differs"]),
    ]
    return latex_escape("; ".join(differs)) if differs else "none"


def short_labels(
    arms: Sequence[Mapping[str, Any]],
    arm_cells: list[dict[str, str]],
    pairwise_cells: list[dict[str, str]],
    contrasts: pd.DataFrame,
) -> str:
    """The LaTeX copy names an arm by its label without what it was drawn with, and a
    pairwise contrast by its two arms (the page is that narrow); returns what the arms
    were drawn with, said once in the caption."""
    short = {arm["run"]: arm["label"].split(" (")[0] for arm in arms}
    for cell, arm in zip(arm_cells, arms, strict=True):
        cell["short"] = latex_escape(short[arm["run"]])
    for cell, row in zip(pairwise_cells, contrasts.itertuples(), strict=True):
        cell["short_arms"] = rf"{short[row.treatment]} $-$ {short[row.control]}"
    drawn = [latex_escape(a["label"].replace(" (", ": ", 1).rstrip(")")) for a in arms]
    return "".join(f" {label}." for label in drawn if ": " in label)


def render_ranking_table(
    arms: Sequence[Mapping[str, Any]],
    summaries: Sequence[str],
    vs_free: Sequence[str],
    pairwise: Mapping[str, str],
    beta_path: str,
    family_path: str,
    outputs: Mapping[str, str],
) -> None:
    """``arms``: the paper arms in order, each with its run name, label, k and the name of
    its contrast against free."""
    frame, contrasts = ranking_frames(arms, summaries, vs_free, pairwise)
    family = VerdictFamily.read(family_path)
    frame = with_family(frame, "vs_free", family)
    contrasts = with_family(contrasts, "contrast", family)
    beta = GateBeta.read(beta_path)
    chunks = chunk_frame(beta)
    notice = notice_of(summaries)
    notes = Notes()
    arm_cells = _arm_cells(arms, frame, notes)
    pairwise_cells = contrast_cells(contrasts, notes)
    drawn_with = short_labels(arms, arm_cells, pairwise_cells, contrasts)
    intercept = beta.intercept_fit["intercept"]
    first = frame.iloc[0]
    tex = (
        environment()
        .get_template("ranking_table.tex.j2")
        .render(
            sources=f"{paths.fill(paths.RUN_SUMMARY, run='rank-*')}, "
            f"{paths.fill(paths.VERDICT, contrast='rank-*')}, {beta_path}, {family_path}",
            n_chunks=len(beta.chunks),
            split=latex_escape(first["split"]),
            n_tasks=int(first["n_tasks"]),
            k=int(arms[0]["k"]),
            free=latex_escape(first["free"]),
            confidence=percent(first["confidence"]),
            interval=interval_name(pd.concat([frame, contrasts])),
            family=family_caption(family),
            simulated=caption_of(notice),
            drawn_with=drawn_with,
            arms=arm_cells,
            contrasts=pairwise_cells,
            chunks=chunk_cells(chunks),
            common_effect=signed(intercept["beta"]),
            common_se=f"{intercept['standard_error']:.4f}",
            loading=f"{mean_loading(beta):.3f}",
            differs=differences(beta),
            notes=notes.lines,
        )
    )
    sections = ranking_sections(
        arm_cells, frame, pairwise_cells, contrasts, chunks, percent(first["confidence"])
    )
    write_table_set(outputs, tex, sections, notice)


# The ranking table's CSVs: numbers in columns of their own.
ARM_DATA = (
    "arm", "bank", "selection", "split", "n_tasks", "reward", "r_success", "coverage", "free",
    "delta_vs_free", "ci_low", "ci_high", "confidence", "method", "p_holm", "verdict", "note",
)  # fmt: skip
ARM_UNITS = (
    "reward, r_success: mean per task, in [0, 1]; delta_vs_free: mean task-aligned "
    "difference of reward against the free run, ci_low, ci_high its paired interval "
    "by the method named; p_holm: Holm-adjusted over the table's causal verdicts"
)


def ranking_sections(
    arm_cells: Sequence[Mapping[str, str]],
    frame: pd.DataFrame,
    pairwise_cells: Sequence[Mapping[str, str]],
    contrasts: pd.DataFrame,
    chunks: pd.DataFrame,
    confidence: str,
) -> list[Section]:
    """The copies' sections: arms and pairwise contrasts (the first LaTeX table), betas."""
    arms_section = Section(
        "Ranking arms",
        "arms",
        (*ARM_HEADER, f"{confidence} CI", "Verdict", r"$p_\mathrm{Holm}$", "Note"),
        noted_rows(
            arm_cells,
            ("label", "reward", "r_success", "estimate", "ci", "verdict", "p_holm"),
            frame["note"],
        ),
        data=frame.reindex(columns=list(ARM_DATA)).assign(
            p_holm=lambda f: pd.to_numeric(f["p_holm"])
        ),
        units=ARM_UNITS,
    )
    betas_section = Section(
        "Chunk betas",
        "betas",
        BETA_HEADER,
        [[c["chunk"] + c["mark"], *(c[k] for k in BETA_KEYS)] for c in chunk_cells(chunks)],
        table=1,
        data=chunks,
        units="beta, se: effect on reward of the chunk and its task-clustered standard error, "
        "under the memo's model (no intercept) and the fit with an intercept",
    )
    sections = [
        arms_section,
        contrast_section("Pairwise contrasts", pairwise_cells, contrasts, confidence),
        betas_section,
    ]
    return sections
