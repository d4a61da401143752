"""The last lines of a paper build: where its results are and whether they are simulated."""

from __future__ import annotations

from pathlib import Path

from skilleval import paths


def where_results(root: Path = Path()) -> str:
    notice_file = root / paths.PAPER_NOTICE_TEXT
    notice = notice_file.read_text().strip() if notice_file.exists() else ""
    pdf = root / paths.PAPER_PDF
    tables = sorted(p.stem for p in (root / "paper" / "tables").glob("*.md"))
    lines = [
        "skilleval: the paper's evidence is built.",
        f"  tables   paper/tables/ ({', '.join(tables)}; .tex, .csv, .md, .html)",
        "  figures  paper/figures/ (.pdf for the paper, .png for the report)",
        f"  PDF      {paths.PAPER_PDF}"
        + ("" if pdf.exists() else f" (not built: snakemake -j 4 {paths.PAPER_PDF}, needs LaTeX)"),
        "  report   snakemake --report report.html (the same results, browsable)",
        f"  evidence {notice or 'no simulated evidence: every number comes from real runs'}",
    ]
    return "\n".join(lines)
