"""LaTeX for the paper: escaping, the Jinja2 templates (package data) and the PDF build."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import jinja2

from skilleval.errors import SkillevalError

# "<" and ">" too: the default OT1 font encoding prints them as "¡" and "¿" in text.
LATEX_SPECIAL = {
    "&": r"\&",
    "%": r"\%",
    "#": r"\#",
    "_": r"\_",
    "$": r"\$",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}


def latex_escape(text: object) -> str:
    return "".join(LATEX_SPECIAL.get(ch, ch) for ch in str(text))


# What a table's LaTeX cells and captions use, in the words a plain-text copy shows.
PLAIN_SYMBOLS = {
    r"$^\dagger$": "†",
    r"$\Delta$": "Δ",
    r"$\beta$": "β",
    r"$-$": "-",
    r"\quad": " ",
    "{,}": ",",
    "~": " ",
    "--": "\u2013",
}
COMMAND_WITH_TEXT = re.compile(r"\\(?:texttt|textit|textbf|emph|mathrm|text)\{([^{}]*)\}")
MULTICOLUMN = re.compile(r"\\multicolumn\{\d+\}\{[^{}]*\}\{([^{}]*)\}")
# "Table~\ref{tab:ranking}" reads "the ranking table" outside the LaTeX, where no number
# exists; a bare reference reads as its name.
TABLE_REFERENCE = re.compile(r"(Table|Figure)~\\ref\{(?:tab|fig):([^{}]*)\}")
REFERENCE = re.compile(r"\\ref\{(?:(?:tab|fig):)?([^{}]*)\}")


def plain_text(latex: str) -> str:
    """A LaTeX cell or caption as plain text: ``\\texttt{a\\_b}`` is ``a_b``,
    ``$r_\\mathrm{success}$`` is ``r_success``, ``$^\\dagger$`` is ``†``."""
    text = TABLE_REFERENCE.sub(lambda m: f"the {m[2]} {m[1].lower()}", latex)
    for symbol, word in PLAIN_SYMBOLS.items():
        text = text.replace(symbol, word)
    text = MULTICOLUMN.sub(r"\1", text)
    text = REFERENCE.sub(r"\1", text)
    while COMMAND_WITH_TEXT.search(text):
        text = COMMAND_WITH_TEXT.sub(r"\1", text)
    for special, escaped in LATEX_SPECIAL.items():
        text = text.replace(escaped, special)
    text = text.replace("$", "") if text.count("$") % 2 == 0 else text
    return " ".join(text.split())


def captions(tex: str) -> list[str]:
    """The long caption of each table in ``tex``, in order (``\\caption[short]{long}``)."""
    found = []
    for match in re.finditer(r"\\caption(\[[^\]]*\])?\{", tex):
        depth, start = 1, match.end()
        end = start
        while depth and end < len(tex):
            depth += {"{": 1, "}": -1}.get(tex[end], 0)
            end += 1
        found.append(tex[start : end - 1])
    return found


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("skilleval.report", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["decimal"] = decimal_cell
    env.filters["centred"] = centred
    env.globals["decimal_column"] = DECIMAL_COLUMN
    return env


DAGGER = r"$^\dagger$"
DECIMAL = re.compile(r"<?[+-]?\d[\d{},]*(\.\d+)?")
# A column of numbers aligned on the decimal point (dcolumn, in LaTeX's tools bundle).
DECIMAL_COLUMN = "D{.}{.}{-1}"


def decimal_cell(text: str) -> str:
    """A cell of a DECIMAL_COLUMN: a number as dcolumn reads it (math mode, no dollars), any
    other text (--, n/a) centred across the column."""
    marked = text.endswith(DAGGER)
    plain = text.removesuffix(DAGGER).replace(r"\textless{}", "<").strip().strip("$")
    if DECIMAL.fullmatch(plain):
        # "<" as an ordinary symbol: a relation would be spaced as one ("< 0.001").
        return plain.replace("<", "{<}") + (r"^{\dagger}" if marked else "")
    return rf"\multicolumn{{1}}{{c}}{{{text}}}"


def centred(header: str) -> str:
    """A header over a DECIMAL_COLUMN (dcolumn would set it as a number)."""
    return rf"\multicolumn{{1}}{{c}}{{{header}}}"


def signed(value: float, digits: int = 4) -> str:
    """A signed difference in math mode, so its minus is a minus sign, not a hyphen; the
    plain copies show it with ASCII signs (plain_text)."""
    return f"${value:+.{digits}f}$"


def fmt_ci(low: float | None, high: float | None, digits: int = 4) -> str:
    """An interval at the precision of its estimate (signed)."""
    if low is None or high is None:
        return "n/a"
    return f"[{signed(low, digits)}, {signed(high, digits)}]"


TEX_ENGINES = ("latexmk", "pdflatex")
TEX_PACKAGES = "texlive-latex-base texlive-latex-recommended texlive-fonts-recommended latexmk"


def compile_pdf(main_tex: str, output: str, build_dir: str) -> Path:
    """Compile the paper with its build products (aux, log, page kinds) in build_dir, never
    next to the sources; without a TeX engine fail with one line saying what to install.
    Returns the PDF in build_dir."""
    engine = next((e for e in TEX_ENGINES if shutil.which(e)), None)
    if engine is None:
        raise SkillevalError(
            f"no TeX engine found (latexmk or pdflatex); install the Debian packages "
            f"{TEX_PACKAGES}, then rerun"
        )
    build = Path(build_dir).resolve()
    build.mkdir(parents=True, exist_ok=True)
    options = ["-interaction=nonstopmode", "-halt-on-error", f"-output-directory={build}"]
    command = (
        ["latexmk", "-pdf", *options, Path(main_tex).name]
        if engine == "latexmk"
        else ["pdflatex", *options, Path(main_tex).name]
    )
    for _ in range(1 if engine == "latexmk" else 2):
        done = subprocess.run(
            command,
            cwd=Path(main_tex).parent,
            capture_output=True,
            text=True,
            # Unwrapped log lines, so the layout check reads every message whole.
            env={**os.environ, "max_print_line": "100000"},
        )
        if done.returncode != 0:
            raise SkillevalError(f"{engine} failed on {main_tex}:\n{done.stdout[-2000:]}")
    produced = build / (Path(main_tex).stem + ".pdf")
    shutil.copy(produced, output)
    return produced
