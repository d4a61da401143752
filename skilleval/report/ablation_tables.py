"""Ablation tables per benchmark, the harness table and a figure per group.

The default point of each group is the reused default run, shown as such. Invalid runs
stay in the tables with a dagger and their reasons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from skilleval.ablation.matrix import load_matrix
from skilleval.ablation.plan import PlannedRun, group_rows, plan, run_files
from skilleval.config.matrix import Group, Matrix
from skilleval.records.ablation import AblationAudit, AblationSummary
from skilleval.report.latex import (
    DECIMAL_COLUMN,
    centred,
    decimal_cell,
    environment,
    latex_escape,
    signed,
)
from skilleval.report.notice import caption_of, notice_of
from skilleval.report.writer import Section, write_table_set
from skilleval.storage.figures import PAPER_FONTS, characters_across, save_pdf, wrapped

METRICS = ("best_selection_score", "base_score", "best_test_score", "delta", "tokens")


def result_row(run_id: str, summary: str, audit: str) -> dict[str, Any]:
    s, a = AblationSummary.read(summary), AblationAudit.read(audit)
    return {
        "run_id": run_id,
        **{m: getattr(s, m) for m in METRICS},
        "valid": a.valid,
        "reasons": "; ".join(a.reasons),
    }


def ablation_rows(
    bench: str,
    matrix: Matrix,
    planned: Mapping[str, PlannedRun],
    files: Mapping[str, tuple[str, str]],
    groups: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One row per point of each group (all of the benchmark's groups by default)."""
    rows = []
    for group, spec in matrix.groups.items():
        if bench not in spec.benchmarks or (groups is not None and group not in groups):
            continue
        for value, source, reused in group_rows(matrix, planned, group, bench):
            rows.append(
                {
                    "group": group,
                    "value": value,
                    "reused_default": reused,
                    **result_row(source, *files[source]),
                }
            )
    return pd.DataFrame(rows)


def fmt(x: float) -> str:
    return f"{x:.4f}"


# The CSV copies hold the numbers as numbers, one column each, beside the run and its
# audit; the LaTeX, Markdown and HTML copies print them rounded.
ABLATION_COLUMNS = ["group", "value", "reused_default", "run_id", *METRICS, "valid", "reasons"]
# The ablation table's score columns, aligned on the decimal point in the LaTeX copy.
ABLATION_SCORES = ("Best sel.", "Base", "Best test", "$\\Delta$")
ABLATION_UNITS = (
    "best_selection_score, base_score, best_test_score: scores in [0, 1]; delta: "
    "best_test_score - base_score; tokens: the trainer's tokens of the run; valid: its audit "
    "passed (reasons: why not)"
)
HARNESS_UNITS = (
    "<student>_test: best test score of the run with that student (empty: not run); "
    "<student>_delta: that score - the initial skill's; <student>_valid: its audit passed "
    "(reasons: why not)"
)


def render(
    frame: pd.DataFrame,
    tex_rows: list[dict[str, Any]],
    outputs: Mapping[str, str],
    summaries: Sequence[str],
    data: tuple[pd.DataFrame, str],
    **template: Any,
) -> None:
    """``summaries``: the run summaries the table shows, whose notice it carries; ``data``:
    the CSV's numbers and what its columns mean. The other copies name every row's first
    column (the LaTeX leaves a repeat blank) and add the reason of a dagger."""
    notice = notice_of(ablation_summaries=summaries)
    template.setdefault("tex_header", template["header"])
    notes = [
        rf"$^\dagger$ {latex_escape(r['run_id'])}: {latex_escape(r['reasons'])}"
        for r in frame.to_dict("records")
        if not r["valid"]
    ]
    tex = (
        environment()
        .get_template("ablation_table.tex.j2")
        .render(rows=tex_rows, notes=notes, simulated=caption_of(notice), **template)
    )
    rows, first = [], ""
    for row, record in zip(tex_rows, frame.to_dict("records"), strict=True):
        first = row["cells"][0] or first
        reason = "" if record["valid"] else rf"$^\dagger$ {latex_escape(record['reasons'])}"
        rows.append([first, *row["cells"][1:], reason])
    header = [*template["header"].split(" & "), "Note"]
    numbers, units = data
    section = Section("Runs", "runs", header, rows, data=numbers, units=units)
    write_table_set(outputs, tex, [section], notice)


def planned_runs(
    matrix_path: str,
) -> tuple[Matrix, dict[str, PlannedRun], dict[str, tuple[str, str]]]:
    matrix = load_matrix(matrix_path)
    runs = plan(matrix)
    return matrix, {r.run_id: r for r in runs}, run_files(runs)


def human_count(count: float | None) -> str:
    """48000 -> 48k, 3200000 -> 3.2M: never 0.0M for a count below a million."""
    if count is None or count != count:  # unknown (None or NaN)
        return "n/a"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(count) >= scale:
            return f"{count / scale:.3g}{suffix}"
    return f"{count:.0f}"


def render_ablation_table(bench: str, matrix_path: str, outputs: Mapping[str, str]) -> None:
    matrix, planned, files = planned_runs(matrix_path)
    frame = ablation_rows(bench, matrix, planned, files)
    tex_rows, previous = [], None
    for r in frame.to_dict("records"):
        mark = "" if r["valid"] else r"$^\dagger$"
        value = latex_escape(r["value"]) + (" (default)" if r["reused_default"] else "")
        cells = [
            latex_escape(r["group"]) if r["group"] != previous else "",
            value + mark,
            decimal_cell(fmt(r["best_selection_score"])),
            decimal_cell(fmt(r["base_score"])),
            decimal_cell(fmt(r["best_test_score"])),
            decimal_cell(signed(r["delta"])),
            human_count(r["tokens"]),
        ]
        tex_rows.append({"cells": cells, "rule": previous is not None and r["group"] != previous})
        previous = r["group"]
    render(
        frame,
        tex_rows,
        outputs,
        [files[run_id][0] for run_id in frame.get("run_id", [])],
        (frame.reindex(columns=ABLATION_COLUMNS), ABLATION_UNITS),
        rule="ablation_table",
        short_caption=f"Ablations on {latex_escape(bench)}",
        label=f"tab:ablation-{bench}",
        caption=f"Ablations on {latex_escape(bench)}: one variable at a time; (default) rows "
        "reuse the default run. Best sel.: best score on the selection (val) split; Base: "
        "score of the initial skill; Best test: test score of the best-selected skill; "
        r"$\Delta$: Best test $-$ Base; Tokens: trainer tokens of the run. One run per row "
        "(no repeats), so a $\\Delta$ is a single run's difference, not an interval; "
        r"$^\dagger$: the run's audit failed.",
        colspec=f"ll{DECIMAL_COLUMN * 4}r",
        header="Group & Value & Best sel. & Base & Best test & $\\Delta$ & Tokens",
        tex_header=" & ".join(["Group", "Value", *map(centred, ABLATION_SCORES), "Tokens"]),
    )


def harness_cell(row: dict[str, Any], backend: str) -> str:
    """One backend's best test score of a harness row ("--" when not run; dagger if invalid)."""
    value = row.get(f"{backend}_test")
    if value is None or pd.isna(value):
        return "--"
    return fmt(value) + ("" if row.get(f"{backend}_valid") else r"$^\dagger$")


def render_harness_table(matrix_path: str, outputs: Mapping[str, str]) -> None:
    matrix, planned, files = planned_runs(matrix_path)
    order = list(matrix.benchmarks)
    by_setting: dict[tuple[str, str], dict[str, Any]] = {}
    # One block per benchmark (the matrix's order, as in every other table and figure).
    harness_runs = sorted(
        ((r, r.harness) for r in planned.values() if r.harness is not None),
        key=lambda pair: order.index(pair[0].benchmark),
    )
    for run, harness in harness_runs:
        run_id = run.run_id
        key = (run.benchmark, run.value)
        row = by_setting.setdefault(key, {"benchmark": key[0], "setting": key[1]})
        result = result_row(run_id, *files[run_id])
        backend = harness["backend"]
        row[f"{backend}_test"] = result["best_test_score"]
        row[f"{backend}_delta"] = result["delta"]
        row[f"{backend}_valid"] = result["valid"]
        row[f"{backend}_run"] = run_id
        row.setdefault("reasons", [])
        if not result["valid"]:
            row["reasons"].append(f"{run_id}: {result['reasons']}")
    frame = pd.DataFrame(list(by_setting.values()))
    frame["valid"] = frame["reasons"].map(lambda r: not r)
    frame["reasons"] = frame["reasons"].map("; ".join)
    frame["run_id"] = frame["benchmark"] + "/" + frame["setting"]

    tex_rows, previous = [], None
    for r in frame.to_dict("records"):
        cells = [
            # Named once per block, as the ablation tables name a group.
            latex_escape(r["benchmark"]) if r["benchmark"] != previous else "",
            latex_escape(r["setting"]),
            decimal_cell(harness_cell(r, "Codex")),
            decimal_cell(harness_cell(r, "Claude")),
        ]
        tex_rows.append(
            {"cells": cells, "rule": previous is not None and r["benchmark"] != previous}
        )
        previous = r["benchmark"]
    render(
        frame,
        tex_rows,
        outputs,
        [files[run.run_id][0] for run, _ in harness_runs],
        (harness_numbers(frame), HARNESS_UNITS),
        rule="harness_table",
        label="tab:harness",
        short_caption="Harness runs",
        caption="Harness runs: best test score per setting, Codex vs Claude Code students, "
        "each initialised from its benchmark's one canonical source skill (-- = not run). "
        "Benchmarks are named as in the ablation tables and come in the matrix's order; "
        "within one, settings in the order the matrix declares its harness runs.",
        colspec=f"ll{DECIMAL_COLUMN * 2}",
        header="Benchmark & Setting & Codex & Claude",
        tex_header=f"Benchmark & Setting & {centred('Codex')} & {centred('Claude')}",
    )


def harness_numbers(frame: pd.DataFrame) -> pd.DataFrame:
    """The harness table's CSV: each setting's scores and audits, by student."""
    students = [c.removesuffix("_test") for c in frame.columns if c.endswith("_test")]
    columns = [f"{s}_{k}" for s in sorted(students) for k in ("test", "delta", "valid")]
    return frame.reindex(columns=["benchmark", "setting", *columns, "reasons"])


def benchmark_colours(matrix: Matrix) -> dict[str, Any]:
    """One colour per benchmark, the same in every figure (the matrix's order)."""
    import matplotlib

    palette = matplotlib.colormaps["tab10"]
    return {bench: palette(i % palette.N) for i, bench in enumerate(matrix.benchmarks)}


PANEL_INCHES = (1.6, 1.6)  # a quarter of the paper's 6.5 in text width: 7 pt text on the page
PANEL_FONTS: Any = {**PAPER_FONTS, "font.size": 7, "axes.labelsize": 7, "axes.titlesize": 7.5}


def ablation_figures(
    matrix_path: str, groups: Sequence[str], pdfs: Sequence[str], pngs: Sequence[str], legend: str
) -> None:
    """Every group's panel (``pdfs``/``pngs`` in the order of ``groups``) and their legend."""
    matrix, planned, files = planned_runs(matrix_path)
    for group, pdf, png in zip(groups, pdfs, pngs, strict=True):
        group_figure(group, matrix, planned, files, pdf, png)
    benchmark_legend(matrix, legend)


def group_figure(
    group: str,
    matrix: Matrix,
    planned: dict[str, PlannedRun],
    files: dict[str, tuple[str, str]],
    out_pdf: str,
    out_png: str,
) -> None:
    """One titled panel per group, drawn at its printed size. The paper's PDF panel has no
    legend (the figure shares one, see benchmark_legend); the report's PNG stands alone, so
    it carries its legend below the axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec = matrix.groups[group]
    values = [str(value) for value in spec.values]
    colours = benchmark_colours(matrix)
    with plt.rc_context(PANEL_FONTS):
        fig, ax = plt.subplots(figsize=PANEL_INCHES, layout="constrained")
        for bench in spec.benchmarks:
            frame = ablation_rows(bench, matrix, planned, files, groups=[group])
            ys = [frame.loc[frame["value"] == v, "best_test_score"].iloc[0] for v in values]
            ax.plot(range(len(values)), ys, marker="o", ms=3, color=colours[bench], label=bench)
            for x, (_, r) in enumerate(frame.iterrows()):
                if not r["valid"]:
                    ax.annotate("invalid", (x, ys[x]), color="red")
        # Turned only when the labels would not fit side by side at 7 pt.
        crowded = sum(len(str(v)) for v in values) > 16
        ax.set_xticks(
            range(len(values)),
            values,
            rotation=35 if crowded else 0,
            ha="right" if crowded else "center",
            rotation_mode="anchor",
        )
        title_width = characters_across(PANEL_INCHES[0], PANEL_FONTS["axes.titlesize"])
        ax.set_title(f"{wrapped(group, title_width)}\n({spec.prefix}, §{spec.section})")
        ax.set_xlabel(axis_label(spec))
        ax.set_ylabel("best test score")
        save_pdf(fig, out_pdf)
        fig.set_size_inches(PANEL_INCHES[0], PANEL_INCHES[1] + 0.15 * len(spec.benchmarks))
        fig.legend(loc="outside lower center", ncol=1, frameon=False)
        fig.savefig(out_png, dpi=200)
        plt.close(fig)


def axis_label(spec: Group) -> str:
    """A group panel's x-axis: its declared ``axis``, else the keys its values vary."""
    if spec.axis:
        return spec.axis
    varied = sorted({key for overrides in spec.values.values() for key in overrides})
    width = characters_across(PANEL_INCHES[0], PANEL_FONTS["axes.labelsize"])
    return wrapped(", ".join(varied) or "value", width)


def benchmark_legend(matrix: Matrix, out_pdf: str) -> None:
    """The ablation figure's one legend: every benchmark in its shared colour, in a strip as
    wide as the text."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    colours = benchmark_colours(matrix)
    handles = [Line2D([], [], color=c, marker="o", ms=3, label=b) for b, c in colours.items()]
    with plt.rc_context(PANEL_FONTS):
        columns = min(len(handles), 5)
        rows = -(-len(handles) // columns)
        fig = plt.figure(figsize=(6.3, 0.1 + 0.16 * rows))
        fig.legend(handles=handles, loc="center", ncol=columns, frameon=False)
        save_pdf(fig, out_pdf)
        plt.close(fig)
