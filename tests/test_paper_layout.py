"""The paper's layout check, on hand-made inputs and on a small LaTeX document built to break
every rule; and the generated ablation section and report front page."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from skilleval.errors import FigureError
from skilleval.report.front import compact_main_table, front_page
from skilleval.report.latex import latex_escape
from skilleval.report.layout import (
    FloatLabel,
    check_layout,
    figure_scale_problems,
    first_references,
    log_problems,
    order_problems,
    page_problems,
    read_labels,
)
from skilleval.report.sections import ablation_section, joined_refs
from skilleval.report.writer import Section, write_table_set
from skilleval.storage.figures import characters_across, save_pdf, wrapped

REPO = Path(__file__).resolve().parent.parent
TEX = shutil.which("pdflatex")
needs_tex = pytest.mark.skipif(
    TEX is None, reason="no pdflatex: apt-get install texlive-latex-base"
)


def test_labels_are_read_from_the_aux_file() -> None:
    aux = (
        "\\newlabel{tab:main}{{1}{2}}\n"
        "\\newlabel{fig:x}{{3}{5}{c}{figure.3}{}}\n"
        "\\newlabel{sec:a}{{2}{1}}"
    )
    assert read_labels(aux) == [
        FloatLabel("tab:main", "Table", 1, 2),
        FloatLabel("fig:x", "Figure", 3, 5),
    ]


def test_references_skip_captions_and_expand_lists() -> None:
    pages = ["Table 1: a caption naming nothing else", "as Tables 2, 3 and 4 show; Figure 1"]
    first = first_references(pages)
    assert first == {"Table 2": 2, "Table 3": 2, "Table 4": 2, "Figure 1": 2}


def test_a_float_before_its_reference_and_out_of_order_numbers_are_reported() -> None:
    floats = [FloatLabel("tab:a", "Table", 1, 1), FloatLabel("tab:b", "Table", 2, 1)]
    problems = order_problems(floats, {"Table 1": 2})
    assert problems == [
        "Table 1 (tab:a) is on page 1, before its first reference on page 2",
        "Table 2 (tab:b) is never referenced in the text",
    ]
    swapped = [FloatLabel("fig:a", "Figure", 2, 1), FloatLabel("fig:b", "Figure", 1, 2)]
    assert order_problems(swapped, {"Figure 1": 1, "Figure 2": 1}) == [
        "figures appear out of order: [2, 1]"
    ]


def test_pages_without_body_text_and_unresolved_references_are_reported() -> None:
    texts = ["Body text.", "3", "Figure 2: only a caption", "see Table ??"]
    kinds = {1: "text", 2: "text", 3: "floats", 4: "text"}
    assert page_problems(texts, kinds) == [
        "page 2 is empty",
        "page 3 holds only floats, no body text",
        "page 4 shows '??' (an unresolved reference)",
    ]
    assert page_problems(["Body"], {}) == [
        "no page-kind record for pages [1]: rebuild with paper/main.tex"
    ]


def test_log_problems_name_each_kind() -> None:
    log = (
        "Overfull \\hbox (12.0pt too wide) in paragraph at lines 3--4\n"
        "LaTeX Warning: Label `tab:x' multiply defined.\n"
        "LaTeX Warning: Reference `fig:y' on page 2 undefined on input line 9.\n"
        "LaTeX Warning: Float too large for page by 20.0pt on input line 30.\n"
    )
    assert log_problems(log) == [
        "Overfull \\hbox (12.0pt too wide) in paragraph at lines 3--4",
        "label tab:x defined twice",
        "reference fig:y undefined",
        "Float too large for page by 20.0pt on input line 30.",
    ]


def test_a_figure_shrunk_below_its_drawn_width_is_reported() -> None:
    log = (
        "<figures/wide.pdf, id=1, 500.0pt x 300.0pt>\n"
        "Package pdftex.def Info: figures/wide.pdf  used on input line 38.\n"
        "(pdftex.def)             Requested size: 375.0pt x 225.0pt.\n"
        "<figures/fits.pdf, id=2, 100.0pt x 100.0pt>\n"
        "Package pdftex.def Info: figures/fits.pdf  used on input line 40.\n"
        "(pdftex.def)             Requested size: 98.0pt x 98.0pt.\n"
    )
    assert figure_scale_problems(log) == [
        "figures/wide.pdf prints at 75% of its drawn width, so 7 pt text in it prints at "
        "5.2 pt: draw it at the width it prints at"
    ]


BROKEN_DOCUMENT = r"""
\documentclass{article}
\makeatletter
\newwrite\skilleval@pagekinds
\immediate\openout\skilleval@pagekinds=\jobname.pagekinds
\AddToHook{shipout/before}{\immediate\write\skilleval@pagekinds{%
  \the\value{page} \if@fcolmade floats\else text\fi}}
\makeatother
\begin{document}
\begin{table}[p]\centering\caption{Early}\label{tab:early}\rule{1cm}{18cm}\end{table}
Body text on the first page, then Table~\ref{tab:early} and Figure~\ref{fig:missing}.
\hbox to 2cm{\rule{5cm}{1pt}}
\begin{table}[h]\centering\caption{Twice}\label{tab:twice}\label{tab:twice}\end{table}
See Table~\ref{tab:twice}.
\end{document}
"""


@needs_tex
def test_a_broken_document_fails_every_rule_it_breaks(tmp_path: Path) -> None:
    (tmp_path / "broken.tex").write_text(BROKEN_DOCUMENT)
    for _ in range(2):
        subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "broken.tex"],
            cwd=tmp_path,
            capture_output=True,
            check=False,
        )
    report = check_layout(tmp_path / "broken.pdf", tmp_path, "broken")
    text = "\n".join(report.problems)
    assert "Overfull \\hbox" in text
    assert "label tab:twice defined twice" in text
    assert "reference fig:missing undefined" in text
    assert "holds only floats, no body text" in text
    assert "shows '??'" in text


@needs_tex
def test_the_shipped_main_tex_records_page_kinds(tmp_path: Path) -> None:
    """paper/main.tex carries the page recorder the check relies on."""
    main = (REPO / "paper" / "main.tex").read_text()
    preamble = main[: main.index("\\input{tables/notice.tex}")]
    (tmp_path / "probe.tex").write_text(preamble + "\\begin{document}Text.\\end{document}\n")
    subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "probe.tex"],
        cwd=tmp_path,
        capture_output=True,
        check=True,
    )
    assert (tmp_path / "probe.pagekinds").read_text().split() == ["1", "text"]


def test_the_ablation_section_follows_the_matrix() -> None:
    tex = ablation_section(["alpha", "beta", "gamma"], ["lr", "batch"])
    assert (
        "Tables~\\ref{tab:ablation-alpha}, \\ref{tab:ablation-beta} and~\\ref{tab:ablation-gamma}"
        in tex
    )
    assert tex.count("\\input{tables/ablation_") == 3
    assert "figures/ablation_lr.pdf" in tex and "figures/ablation_batch.pdf" in tex
    assert tex.index("\\label{fig:ablation}") < tex.index("\\input{tables/ablation_alpha.tex}")
    assert joined_refs("Figure", ["fig:a"]) == "Figure~\\ref{fig:a}"
    with pytest.raises(ValueError, match="at least one benchmark"):
        ablation_section([], ["lr"])


def test_the_front_page_holds_table_figure_captions_and_notice(tmp_path: Path) -> None:
    copy = tmp_path / "main.html"
    write_table_set(
        {k: str(tmp_path / f"main.{k}") for k in ("tex", "csv", "md", "html")}
        | {"csv_contrasts": str(tmp_path / "main_contrasts.csv")},
        "\\begin{table}\\caption{Long \\texttt{main} caption}\\end{table}",
        [
            Section("Runs", "runs", ("Run", "Tokens/task"), [["base", "5{,}749"]]),
            Section("Contrasts", "contrasts", ("Contrast", "Est."), [["gain", "+0.0108"]]),
        ],
        "Simulated!",
    )
    table = compact_main_table(str(copy))
    right = '<td style="text-align:right">'  # numbers right-aligned, as in the PDF
    assert f"{right}5,749</td>" in table and f"{right}+0.0108</td>" in table
    assert "Simulated!" not in table and "Long main caption" not in table
    page = front_page(table, "Main table caption", b"\x89PNG", "Forest caption", "Simulated!")
    assert (
        page.index("Simulated!") < page.index("Main table caption") < page.index("Forest caption")
    )
    assert "data:image/png;base64,iVBORw==" in page
    assert "Simulated" not in front_page(table, "t", b"", "f", "")


LESS_THAN = r"""
\documentclass{article}
\begin{document}
Holm-adjusted p: %s in the table.
\end{document}
"""


@needs_tex
def test_a_raw_less_than_is_reported_and_the_escaped_one_prints_as_typed(tmp_path: Path) -> None:
    from pypdf import PdfReader

    for name, cell in (("raw", "<0.001"), ("escaped", latex_escape("<0.001"))):
        (tmp_path / f"{name}.tex").write_text(LESS_THAN % cell)
        subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", f"{name}.tex"],
            cwd=tmp_path,
            capture_output=True,
            check=True,
        )
    raw = check_layout(tmp_path / "raw.pdf", tmp_path, "raw", sources=tmp_path / "raw.tex")
    assert any("shows '¡' where the source has '<'" in p for p in raw.problems), raw.problems
    escaped = check_layout(
        tmp_path / "escaped.pdf", tmp_path, "escaped", sources=tmp_path / "escaped.tex"
    )
    assert not [p for p in escaped.problems if "where the source has" in p]
    assert "<0.001" in PdfReader(tmp_path / "escaped.pdf").pages[0].extract_text()


def test_a_figure_label_drawn_past_its_edge_is_refused_and_its_wrapped_form_passes(
    tmp_path: Path,
) -> None:
    """A planted panel: a long x-axis label at 7 pt on a 1.6 in figure, as the ablation
    panels are drawn. Cut, it fails saving, naming the text; wrapped by the stated rule,
    it saves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    label = "optimizer.longitudinal_pair_selection, policy.model"
    for text, refused in ((label, True), (wrapped(label, characters_across(1.6, 7)), False)):
        with plt.rc_context({"font.size": 7, "axes.labelsize": 7}):
            fig, ax = plt.subplots(figsize=(1.6, 1.6), layout="constrained")
            ax.plot([0, 1], [0, 1])
            ax.set_xlabel(text)
            if refused:
                with pytest.raises(FigureError, match=r"longitudinal_pair_selection.* by \d"):
                    save_pdf(fig, str(tmp_path / "cut.pdf"))
                assert not (tmp_path / "cut.pdf").exists()
            else:
                save_pdf(fig, str(tmp_path / "wrapped.pdf"))
                assert (tmp_path / "wrapped.pdf").stat().st_size > 0
            plt.close(fig)
