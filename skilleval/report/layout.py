"""Checks a compiled paper as a reviewer reads it: every page carries body text, every table
and figure comes after its first reference, and nothing is unresolved, doubly defined or
overfull. Reads the PDF's text (pypdf) and the build's log, aux and page-kind record."""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from skilleval.report.latex import LATEX_SPECIAL, compile_pdf
from skilleval.storage import atomic

NEWLABEL = re.compile(r"\\newlabel\{((?:tab|fig):[^}]*)\}\{\{([^}]*)\}\{([^}]*)\}")
# "Table 3", "Tables 3, 4 and 5", "Figure 2"; not "Table 3:", which opens a caption.
REFERENCE = re.compile(r"\b(Table|Figure)s?\s+(\d+(?:\s*(?:,|and)\s*\d+)*)(?!\d|\s*:)")
LOG_PROBLEMS = (
    (re.compile(r"^(Overfull \\[hv]box .*)$", re.M), "{0}"),
    (re.compile(r"LaTeX Warning: Label `([^']*)' multiply defined"), "label {0} defined twice"),
    (re.compile(r"LaTeX Warning: Reference `([^']*)' on page (\d+)"), "reference {0} undefined"),
    (re.compile(r"LaTeX Warning: (Float too large[^\n]*)"), "{0}"),
    (re.compile(r"LaTeX Error: (Float\(s\) lost)"), "{0}"),
)
# A figure's natural size (first use) and the size each use prints it at (pdftex's log).
FIGURE_NATURAL = re.compile(r"<([^<>,\s]+\.pdf), id=\d+, ([\d.]+)pt x [\d.]+pt>")
FIGURE_PRINTED = re.compile(
    r"Package pdftex\.def Info: (\S+) +used on input line \d+\.\s*\n"
    r"\(pdftex\.def\) +Requested size: ([\d.]+)pt x"
)
# Figures are drawn at their printed width with no text below 7 pt; shrinking one by more
# than this would print its text below 7 pt (beyond rounding of the widths).
MIN_FIGURE_SCALE = 0.95
# What the default OT1 font encoding prints for a character typed in text: "<" comes out
# as "¡", ">" as "¿" (Knuth's cmr fonts hold the Spanish marks in those slots).
OT1_SUBSTITUTES = {"¡": "<", "¿": ">"}
log = logging.getLogger(__name__)
KIND_NAMES = {"tab": "Table", "fig": "Figure"}


@dataclass(frozen=True)
class FloatLabel:
    label: str
    kind: str
    number: int
    page: int


@dataclass
class LayoutReport:
    pdf: str
    pages: int
    page_kinds: dict[int, str]
    floats: list[FloatLabel]
    first_references: dict[str, int]
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def read_labels(aux_text: str) -> list[FloatLabel]:
    labels = []
    for label, number, page in NEWLABEL.findall(aux_text):
        if number.isdigit() and page.isdigit():
            kind = KIND_NAMES[label.split(":", 1)[0]]
            labels.append(FloatLabel(label, kind, int(number), int(page)))
    return labels


def read_page_kinds(record: Path) -> dict[int, str]:
    kinds: dict[int, str] = {}
    for line in record.read_text().splitlines():
        page, kind = line.split()
        kinds[int(page)] = kind
    return kinds


def first_references(page_texts: list[str]) -> dict[str, int]:
    """'Table 3' -> the first page (1-based) whose text names it, captions aside."""
    first: dict[str, int] = {}
    for page, text in enumerate(page_texts, start=1):
        for kind, numbers in REFERENCE.findall(" ".join(text.split())):
            for number in re.findall(r"\d+", numbers):
                first.setdefault(f"{kind} {number}", page)
    return first


def log_problems(log_text: str) -> list[str]:
    problems = []
    for pattern, message in LOG_PROBLEMS:
        for match in pattern.finditer(log_text):
            problems.append(message.format(*match.groups()))
    return problems


def figure_scale_problems(log_text: str) -> list[str]:
    natural = {name: float(width) for name, width in FIGURE_NATURAL.findall(log_text)}
    problems = []
    for name, printed in FIGURE_PRINTED.findall(log_text):
        if name in natural and float(printed) < MIN_FIGURE_SCALE * natural[name]:
            scale = float(printed) / natural[name]
            problems.append(
                f"{name} prints at {scale:.0%} of its drawn width, so 7 pt text in it prints "
                f"at {7 * scale:.1f} pt: draw it at the width it prints at"
            )
    return problems


def page_problems(page_texts: list[str], kinds: dict[int, str]) -> list[str]:
    problems = []
    for page, text in enumerate(page_texts, start=1):
        words = [w for w in text.split() if not w.isdigit()]
        if not words:
            problems.append(f"page {page} is empty")
        elif kinds.get(page) == "floats":
            problems.append(f"page {page} holds only floats, no body text")
        if "??" in text:
            problems.append(f"page {page} shows '??' (an unresolved reference)")
    missing = sorted(set(range(1, len(page_texts) + 1)) - set(kinds))
    if missing:
        problems.append(f"no page-kind record for pages {missing}: rebuild with paper/main.tex")
    return problems


def order_problems(floats: list[FloatLabel], first: dict[str, int]) -> list[str]:
    problems = []
    for item in floats:
        name = f"{item.kind} {item.number}"
        referenced = first.get(name)
        if referenced is None:
            problems.append(f"{name} ({item.label}) is never referenced in the text")
        elif item.page < referenced:
            problems.append(
                f"{name} ({item.label}) is on page {item.page}, before its first reference "
                f"on page {referenced}"
            )
    numbers: dict[str, list[int]] = {}
    for item in sorted(floats, key=lambda f: (f.page, f.number)):
        numbers.setdefault(item.kind, []).append(item.number)
    for kind, order in numbers.items():
        if order != sorted(order):
            problems.append(f"{kind.lower()}s appear out of order: {order}")
    return problems


def glyph_problems(page_texts: list[str], sources: str) -> list[str]:
    """A glyph the PDF shows that its TeX sources never wrote: the font encoding printed
    another character than the one typed."""
    problems = []
    for page, text in enumerate(page_texts, start=1):
        for glyph, typed in OT1_SUBSTITUTES.items():
            if glyph in text and glyph not in sources:
                at = text.index(glyph)
                shown = " ".join(text[max(0, at - 30) : at + 30].split())
                problems.append(
                    f"page {page} shows {glyph!r} where the source has {typed!r} ({shown}): "
                    f"write it as {LATEX_SPECIAL[typed]} (report.latex.latex_escape) or in math"
                )
    return problems


def check_layout(
    pdf: Path, build_dir: Path, jobname: str = "main", sources: Path | None = None
) -> LayoutReport:
    """The checks above on a PDF built into build_dir (its .log, .aux and .pagekinds), from
    the TeX files under ``sources`` (default: the PDF's folder)."""
    from pypdf import PdfReader

    page_texts = [page.extract_text() or "" for page in PdfReader(pdf).pages]
    kinds_record = build_dir / f"{jobname}.pagekinds"
    kinds = read_page_kinds(kinds_record) if kinds_record.exists() else {}
    floats = read_labels((build_dir / f"{jobname}.aux").read_text(errors="replace"))
    first = first_references(page_texts)
    log_text = (build_dir / f"{jobname}.log").read_text(errors="replace")
    problems = log_problems(log_text) + figure_scale_problems(log_text)
    problems += page_problems(page_texts, kinds)
    problems += order_problems(floats, first)
    problems += glyph_problems(page_texts, tex_sources(sources or pdf.parent))
    return LayoutReport(str(pdf), len(page_texts), kinds, floats, first, problems)


def tex_sources(folder: Path) -> str:
    """The text of a TeX file, or of every TeX file under a folder."""
    files = [folder] if folder.is_file() else sorted(folder.rglob("*.tex"))
    return "".join(f.read_text(errors="replace") for f in files)


def build_checked_pdf(main_tex: str, output: str, build_dir: str, layout_json: str) -> None:
    """Compile the paper, check its layout and keep the check's findings next to the build.
    A finding is a warning in the log, not a failure: the PDF is still worth reading."""
    built = compile_pdf(main_tex, output, build_dir)
    report = check_layout(built, Path(build_dir), Path(main_tex).stem, Path(main_tex).parent)
    atomic.write_json(layout_json, report.to_json())
    log.info("%s: %d pages, %d layout problems", output, report.pages, len(report.problems))
    for problem in report.problems:
        log.warning("layout: %s", problem)
