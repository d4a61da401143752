"""LaTeX for the paper: escaping, the Jinja2 templates (package data) and the PDF build."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import jinja2

from skilleval.errors import SkillevalError

LATEX_SPECIAL = {"&": r"\&", "%": r"\%", "#": r"\#", "_": r"\_", "$": r"\$"}


def latex_escape(text: object) -> str:
    return "".join(LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("skilleval.report", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def fmt_ci(low: float | None, high: float | None, digits: int = 3) -> str:
    if low is None or high is None:
        return "n/a"
    return f"[{low:+.{digits}f}, {high:+.{digits}f}]"


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
