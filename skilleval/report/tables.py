"""The main and ranking tables of the paper, from run summaries and verdicts.

Every cell comes from a built file; invalid results are marked with a dagger and their
reason in a table note, never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from skilleval import paths
from skilleval.analysis.family import holm_cell
from skilleval.analysis.records import GateBeta, Verdict, VerdictFamily
from skilleval.report.latex import environment, fmt_ci, latex_escape
from skilleval.report.notice import caption_of, notice_of
from skilleval.report.writer import Section, write_table_set
from skilleval.runs.records import RunSummary

DAGGER = r"$^\dagger$"


def _verdict_row(name: str, verdict: Verdict, description: str = "") -> dict[str, Any]:
    return {
        "contrast": name,
        "description": description,
        "treatment": verdict.treatment,
        "control": verdict.control,
        "estimate": verdict.estimate,
        "ci_low": verdict.ci_low,
        "ci_high": verdict.ci_high,
        "confidence": verdict.confidence,
        "verdict": verdict.verdict,
        "note": verdict.reason if verdict.verdict == "invalid" else "",
    }


def _run_row(name: str, summary: RunSummary) -> dict[str, Any]:
    valid = summary.coverage >= 1.0 and summary.service_unchanged
    return {
        "run": name,
        "experiment": summary.experiment,
        "checkpoint": summary.checkpoint_id,
        "bank": summary.bank or "none",
        "reward": summary.metric("reward"),
        "r_success": summary.metric("r_success"),
        "coverage": summary.coverage,
        "tokens_per_task": summary.tokens["mean_per_task"],
        "n_tasks": summary.n_tasks,
        "protocol": summary.protocol,
        "prompt": prompt_label(summary),
        "split": summary.split,
        "valid": valid,
        "note": "" if valid else "coverage below 1 or service changed",
    }


def prompt_label(summary: RunSummary) -> str:
    """Which registered prompt files a run was given, with their content digest."""
    files = summary.prompt_files
    return f"{files['system']} + {files['skill_template']} ({summary.prompt_hash[:8]})"


def main_table_frames(
    summaries: Mapping[str, str], verdicts: Mapping[str, str], descriptions: Mapping[str, str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``descriptions`` come from config, so rewording one reruns only the table."""
    runs = [_run_row(name, RunSummary.read(path)) for name, path in summaries.items()]
    contrasts = [
        _verdict_row(name, Verdict.read(path), descriptions[name])
        for name, path in verdicts.items()
    ]
    return pd.DataFrame(runs), pd.DataFrame(contrasts)


class Notes:
    """Table notes: one dagger note per invalid row, in the order the rows appear."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def mark(self, name: str, invalid: bool, why: str) -> str:
        if not invalid:
            return ""
        self.lines.append(rf"{DAGGER} {latex_escape(name)}: {latex_escape(why)}")
        return DAGGER


def fmt_p(p: float | None) -> str:
    """A p-value as a level: three decimals, or an upper bound below 0.001; '--' when the
    contrast is not in the family."""
    if p is None or pd.isna(p):
        return "--"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def with_family(frame: pd.DataFrame, key: str, family: VerdictFamily) -> pd.DataFrame:
    """``frame`` with each row's Holm-adjusted p-value (None outside the family)."""
    cells = [holm_cell(family.as_json(), name) for name in frame[key]]
    return frame.assign(p_holm=pd.Series(cells, index=frame.index, dtype=object))


def family_caption(family: VerdictFamily) -> str:
    """The caption sentence that says what the Holm column is, in LaTeX."""
    level = family.family_wise_level
    return (
        r" $p_\mathrm{Holm}$: the contrast's two-sided bootstrap p-value, Holm-adjusted over "
        rf"the {len(family.members)} causal verdicts of this table; a verdict with "
        rf"$p_\mathrm{{Holm}} < {level:g}$ holds at family-wise error "
        rf"{level:.0%}".replace("%", r"\%")
        + " (-- for a contrast outside the family)."
    )


def _contrast_cells(contrasts: pd.DataFrame, notes: Notes) -> list[dict[str, str]]:
    return [
        {
            "name": latex_escape(row.contrast),
            "mark": notes.mark(row.contrast, row.verdict == "invalid", row.note),
            "arms": latex_escape(f"{row.treatment} - {row.control}").replace(" - ", " $-$ "),
            "estimate": "n/a" if row.estimate is None else f"{row.estimate:+.4f}",
            "ci": fmt_ci(row.ci_low, row.ci_high),
            "verdict": row.verdict,
            "p_holm": latex_escape(fmt_p(row.p_holm)),
        }
        for row in contrasts.itertuples()
    ]


RUN_HEADER = ("Run", "Skills", "Reward", r"$r_\mathrm{success}$", "Coverage", "Tokens/task", "Note")


def contrast_header(confidence: str) -> tuple[str, ...]:
    return (
        "Contrast",
        "Arms",
        r"$\Delta$reward",
        f"{confidence} CI",
        "Verdict",
        r"$p_\mathrm{Holm}$",
        "Note",
    )


CONTRAST_KEYS = ("name", "arms", "estimate", "ci", "verdict", "p_holm")


def noted_rows(
    cells: Sequence[Mapping[str, str]], keys: Sequence[str], notes: Iterable[str]
) -> list[list[str]]:
    """The copies' rows: the LaTeX cells under ``keys``, then the Note column."""
    return [
        [c[k] for k in keys] + [note_cell(c["mark"], note)]
        for c, note in zip(cells, notes, strict=True)
    ]


def note_cell(mark: str, note: str) -> str:
    """The copies' Note column: the row's table-note mark and its reason."""
    return f"{mark} {latex_escape(note)}".strip() if mark else ""


def _percent(confidence: float) -> str:
    return f"{confidence:.0%}".replace("%", r"\%")


def render_main_table(
    summaries: Mapping[str, str],
    verdicts: Mapping[str, str],
    descriptions: Mapping[str, str],
    family_path: str,
    outputs: Mapping[str, str],
) -> None:
    runs, contrasts = main_table_frames(summaries, verdicts, descriptions)
    family = VerdictFamily.read(family_path)
    contrasts = with_family(contrasts, "contrast", family)
    notice = notice_of(list(summaries.values()))
    notes = Notes()
    # Runs of several splits or protocols in one table: each row says its own.
    mixed = any(runs[column].nunique() > 1 for column in ("split", "protocol", "prompt"))
    run_cells = [
        {
            "name": latex_escape(row.run)
            + (
                f" ({latex_escape(row.split)}, {latex_escape(row.protocol)}, "
                f"{latex_escape(row.prompt)})"
                if mixed
                else ""
            ),
            "mark": notes.mark(row.run, not row.valid, row.note),
            "bank": latex_escape(row.bank),
            "reward": f"{row.reward:.4f}",
            "r_success": f"{row.r_success:.4f}",
            "coverage": f"{row.coverage:.3f}",
            "tokens": f"{row.tokens_per_task:,.0f}".replace(",", "{,}"),
        }
        for row in runs.itertuples()
    ]
    contrast_cells = _contrast_cells(contrasts, notes)
    tex = (
        environment()
        .get_template("main_table.tex.j2")
        .render(
            sources=f"{paths.fill(paths.RUN_SUMMARY, run='*')}, "
            f"{paths.fill(paths.VERDICT, contrast='*')}",
            split=latex_escape("/".join(runs["split"].unique())),
            n_tasks="/".join(str(int(n)) for n in runs["n_tasks"].unique()),
            protocol=latex_escape(", ".join(runs["protocol"].unique())),
            prompt=latex_escape(", ".join(runs["prompt"].unique())),
            confidence=_percent(contrasts["confidence"].iloc[0]) if len(contrasts) else "",
            family=family_caption(family),
            simulated=caption_of(notice),
            runs=run_cells,
            contrasts=contrast_cells,
            notes=notes.lines,
        )
    )
    confidence = _percent(contrasts["confidence"].iloc[0]) if len(contrasts) else "95\\%"
    write_table_set(
        outputs,
        tex,
        [
            Section(
                "Runs",
                "runs",
                RUN_HEADER,
                noted_rows(
                    run_cells,
                    ("name", "bank", "reward", "r_success", "coverage", "tokens"),
                    runs["note"],
                ),
            ),
            Section(
                "Contrasts",
                "contrasts",
                contrast_header(confidence),
                noted_rows(contrast_cells, CONTRAST_KEYS, contrasts["note"]),
            ),
        ],
        notice,
    )


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
            }
        )
    contrasts = [
        {k: v for k, v in _verdict_row(name, Verdict.read(path)).items() if k in PAIRWISE_COLUMNS}
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
            "estimate": "n/a" if row.delta_vs_free is None else f"{row.delta_vs_free:+.4f}",
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
            "beta": f"{row.beta:+.4f}",
            "se": f"{row.se:.4f}",
            "beta_intercept_fit": f"{row.beta_intercept_fit:+.4f}",
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
    contrast_cells = _contrast_cells(contrasts, notes)
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
            confidence=_percent(first["confidence"]),
            family=family_caption(family),
            simulated=caption_of(notice),
            arms=arm_cells,
            contrasts=contrast_cells,
            chunks=chunk_cells(chunks),
            common_effect=f"{intercept['beta']:+.4f}",
            common_se=f"{intercept['standard_error']:.4f}",
            loading=f"{mean_loading(beta):.3f}",
            differs=differences(beta),
            notes=notes.lines,
        )
    )
    confidence = _percent(first["confidence"])
    write_table_set(
        outputs,
        tex,
        [
            Section(
                "Ranking arms",
                "arms",
                (
                    "Arm",
                    "Reward",
                    r"$r_\mathrm{success}$",
                    r"$\Delta$ vs free",
                    f"{confidence} CI",
                    "Verdict",
                    r"$p_\mathrm{Holm}$",
                    "Note",
                ),
                noted_rows(
                    arm_cells,
                    ("label", "reward", "r_success", "estimate", "ci", "verdict", "p_holm"),
                    frame["note"],
                ),
            ),
            Section(
                "Pairwise contrasts",
                "contrasts",
                contrast_header(confidence),
                noted_rows(contrast_cells, CONTRAST_KEYS, contrasts["note"]),
            ),
            Section(
                "Chunk betas",
                "betas",
                (
                    "Chunk",
                    r"$\beta$",
                    "SE",
                    r"$\beta$ (intercept fit)",
                    "SE (intercept fit)",
                    "Top/Bottom",
                    "Top/Bottom (intercept fit)",
                ),
                [
                    [
                        c["chunk"] + c["mark"],
                        c["beta"],
                        c["se"],
                        c["beta_intercept_fit"],
                        c["se_intercept_fit"],
                        c["selection"],
                        c["selection_intercept_fit"],
                    ]
                    for c in chunk_cells(chunks)
                ],
                table=1,
            ),
        ],
        notice,
    )
