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
from skilleval.config.model import INTERVAL_NAMES
from skilleval.records.analysis import Verdict, VerdictFamily
from skilleval.records.runs import RunSummary
from skilleval.report.latex import environment, fmt_ci, latex_escape, signed
from skilleval.report.notice import caption_of, notice_of
from skilleval.report.writer import Section, write_table_set

DAGGER = r"$^\dagger$"


def verdict_row(name: str, verdict: Verdict, description: str = "") -> dict[str, Any]:
    return {
        "contrast": name,
        "description": description,
        "treatment": verdict.treatment,
        "control": verdict.control,
        "estimate": verdict.estimate,
        "ci_low": verdict.ci_low,
        "ci_high": verdict.ci_high,
        "confidence": verdict.confidence,
        "method": verdict.method,
        "verdict": verdict.verdict,
        "p_value": verdict.p_value,
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
        **{metric: summary.metric(metric) for metric in summary.metrics},
        "coverage": summary.coverage,
        "tokens_per_task": summary.tokens["mean_per_task"],
        "n_tasks": summary.n_tasks,
        "protocol": summary.protocol_label,
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
        verdict_row(name, Verdict.read(path), descriptions[name]) for name, path in verdicts.items()
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
        r" $p_\mathrm{Holm}$: the contrast's two-sided p-value, Holm-adjusted over "
        rf"the {len(family.members)} causal verdicts of this table; a verdict with "
        rf"$p_\mathrm{{Holm}} < {level:g}$ holds at family-wise error "
        rf"{level:.0%}".replace("%", r"\%")
        + " (-- for a contrast outside the family)."
    )


def contrast_cells(contrasts: pd.DataFrame, notes: Notes) -> list[dict[str, str]]:
    return [
        {
            "name": latex_escape(row.contrast),
            "mark": notes.mark(row.contrast, row.verdict == "invalid", row.note),
            "arms": latex_escape(f"{row.treatment} - {row.control}").replace(" - ", " $-$ "),
            "estimate": "n/a" if row.estimate is None else signed(row.estimate),
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


def percent(confidence: float) -> str:
    return f"{confidence:.0%}".replace("%", r"\%")


def interval_name(contrasts: pd.DataFrame) -> str:
    """The interval method of a table's contrasts, as its caption names it."""
    methods = contrasts["method"].dropna().unique() if "method" in contrasts else []
    return "/".join(INTERVAL_NAMES.get(m, m) for m in sorted(methods)) or "paired"


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
    run_cells = _run_cells(runs, notes)
    shown = contrast_cells(contrasts, notes)
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
            confidence=percent(contrasts["confidence"].iloc[0]) if len(contrasts) else "",
            interval=interval_name(contrasts),
            family=family_caption(family),
            simulated=caption_of(notice),
            runs=run_cells,
            contrasts=shown,
            notes=notes.lines,
        )
    )
    confidence = percent(contrasts["confidence"].iloc[0]) if len(contrasts) else "95\\%"
    # The copies (CSV, Markdown, HTML) show every declared auxiliary metric; the LaTeX
    # table keeps the paper's columns.
    auxiliary = auxiliary_metrics(runs)
    keys = ("name", "bank", "reward", "r_success", *auxiliary, "coverage", "tokens")
    header = (*RUN_HEADER[:4], *(latex_escape(m) for m in auxiliary), *RUN_HEADER[4:])
    runs_section = Section(
        "Runs",
        "runs",
        header,
        noted_rows(run_cells, keys, runs["note"]),
        data=runs[run_data_columns(runs)],
        units=RUN_UNITS,
    )
    write_table_set(
        outputs,
        tex,
        [runs_section, contrast_section("Contrasts", shown, contrasts, confidence)],
        notice,
    )


# The main table's CSVs: numbers in columns of their own, as the records hold them.
RUN_DATA = (
    "run", "experiment", "checkpoint", "bank", "split", "n_tasks", "reward", "r_success",
    "coverage", "tokens_per_task", "note",
)  # fmt: skip
RUN_UNITS = (
    "reward, r_success and every other r_* column (the protocol's declared metrics): mean per "
    "task; coverage: share of the split's tasks with a result; tokens_per_task: mean prompt + "
    "completion tokens"
)


def auxiliary_metrics(runs: pd.DataFrame) -> list[str]:
    """The declared metrics of any run besides reward and r_success, sorted."""
    return sorted(c for c in runs.columns if c.startswith("r_") and c not in RUN_DATA)


def run_data_columns(runs: pd.DataFrame) -> list[str]:
    """The runs CSV's columns: RUN_DATA with every declared auxiliary metric of any run
    after r_success (empty where a run's protocol does not declare it)."""
    fixed = list(RUN_DATA)
    at = fixed.index("r_success") + 1
    return fixed[:at] + auxiliary_metrics(runs) + fixed[at:]


CONTRAST_DATA = (
    "contrast", "treatment", "control", "estimate", "ci_low", "ci_high", "confidence",
    "method", "p_value", "p_holm", "verdict", "note",
)  # fmt: skip
CONTRAST_UNITS = (
    "estimate: mean task-aligned difference of reward, treatment - control; ci_low, ci_high: "
    "its paired interval at the given confidence, by the method named (percentile, BCa, "
    "studentized: bootstrap-t, t: paired t); p_value: two-sided p of that method; p_holm: "
    "Holm-adjusted over the table's causal verdicts (empty outside the family)"
)


def contrast_section(
    title: str, cells: Sequence[Mapping[str, str]], contrasts: pd.DataFrame, confidence: str
) -> Section:
    data = contrasts.reindex(columns=list(CONTRAST_DATA))
    return Section(
        title,
        "contrasts",
        contrast_header(confidence),
        noted_rows(cells, CONTRAST_KEYS, contrasts["note"]),
        data=data.assign(p_holm=pd.to_numeric(data["p_holm"])),
        units=CONTRAST_UNITS,
    )


def _run_cells(runs: pd.DataFrame, notes: Notes) -> list[dict[str, str]]:
    # Runs of several splits or protocols in one table: each row says its own.
    mixed = any(runs[column].nunique() > 1 for column in ("split", "protocol", "prompt"))
    auxiliary = auxiliary_metrics(runs)
    return [
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
            **{
                metric: "--" if pd.isna(value) else f"{value:.4f}"
                for metric, value in row._asdict().items()
                if metric in auxiliary
            },
            "coverage": f"{row.coverage:.3f}",
            "tokens": f"{row.tokens_per_task:,.0f}".replace(",", "{,}"),
        }
        for row in runs.itertuples()
    ]
