"""Every command in the README's code blocks, run as written, in order, on the default
world at its full size (the suite's one full-size build: the others use tests/data/small.yaml);
then what those commands built: the report's first view and the PDF's layout check."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, copy_workflow

pytestmark = pytest.mark.slow

README = REPO / "README.md"
# Commands of the README that other tests cover, or that set up the machine rather than
# use the graph; every other command runs here.
COVERED_ELSEWHERE = {
    "python3": "the venv is created by .ci/run itself",
    ".": "activating the venv",
    "pip": "installs: tests/test_deploy.py installs the package into a fresh venv",
    "uv": "installs: tests/test_lowest_versions.py installs the package with uv",
    "pytest": "the test suite is what runs this",
    ".ci/install-real-server": "installs the server of tests/test_real_server.py (.ci/run)",
    "ruff": "tests/test_lint.py",
    "mypy": "tests/test_lint.py",
    "snakefmt": "tests/test_lint.py",
    "python": "benchmarks print figures for people, not pass/fail",
}
# The real path needs GPUs, sglang or a SLURM cluster; here it is planned, not run.
REAL_PATH_PROFILES = ("profiles/gpu-host", "profiles/slurm")
TEX = shutil.which("latexmk") or shutil.which("pdflatex")


def readme_commands() -> list[list[str]]:
    """Each command of every ```bash block, split at &&, comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            while words:
                end = words.index("&&") if "&&" in words else len(words)
                commands.append(words[:end])
                words = words[end + 1 :]
    return commands


def as_run(words: list[str]) -> list[str] | None:
    """The argv this test runs for a README command, or None if it is covered elsewhere."""
    tool = words[0]
    if tool in COVERED_ELSEWHERE:
        return None
    if tool == "snakemake":
        planned_only = any(profile in words for profile in REAL_PATH_PROFILES)
        return [sys.executable, "-m", "snakemake", *words[1:], *(["-n"] if planned_only else [])]
    if tool == "skilleval":
        return [shutil.which("skilleval") or "skilleval", *words[1:]]
    raise AssertionError(f"README command {shlex.join(words)!r} is neither run nor covered")


@pytest.fixture(scope="module")
def readme_graph(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """A workflow copy, as shipped, and the outcome of every README command run in it in
    order."""
    workdir = copy_workflow(tmp_path_factory.mktemp("readme"))
    outcomes: list[dict[str, Any]] = []
    for words in readme_commands():
        argv = as_run(words)
        if argv is None:
            continue
        if "paper/main.pdf" in words and TEX is None:
            outcomes.append({"command": shlex.join(words), "skipped": "no TeX engine"})
            continue
        done = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, timeout=900)
        outcomes.append(
            {
                "command": shlex.join(words),
                "returncode": done.returncode,
                "output": (done.stdout + done.stderr)[-3000:],
            }
        )
    return workdir, outcomes


def test_every_readme_command_runs_as_written(
    readme_graph: tuple[Path, list[dict[str, Any]]],
) -> None:
    _, outcomes = readme_graph
    ran = [o for o in outcomes if "returncode" in o]
    assert len(ran) >= 10, [o["command"] for o in outcomes]
    failed = [o for o in ran if o["returncode"] != 0]
    assert not failed, "\n\n".join(f"$ {o['command']}\n{o['output']}" for o in failed)
    assert any(o["command"] == "snakemake -j 4 paper" for o in ran)


def test_the_readme_builds_the_default_world_at_its_full_size(
    readme_graph: tuple[Path, list[dict[str, Any]]],
) -> None:
    workdir, _ = readme_graph
    full, small = (
        yaml.safe_load(path.read_text())["world"]["split_sizes"]
        for path in (REPO / "config" / "config.yaml", REPO / "tests" / "data" / "small.yaml")
    )
    summary = json.loads((workdir / "results" / "runs" / "final-ST" / "summary.json").read_text())
    assert summary["n_tasks"] == full[summary["split"]] > small[summary["split"]], summary


def test_the_archived_run_was_rebuilt_by_the_next_command(
    readme_graph: tuple[Path, list[dict[str, Any]]],
) -> None:
    workdir, outcomes = readme_graph
    commands = [o["command"] for o in outcomes]
    archived = next(i for i, c in enumerate(commands) if "archive" in c and "--dry-run" not in c)
    rebuild = outcomes[archived + 1]
    if "skipped" in rebuild:  # the README's rebuild also makes the PDF
        pytest.skip(f"{rebuild['command']!r} did not run: {rebuild['skipped']}")
    listing = next(o for o in outcomes if "--dry-run" in o["command"])
    assert "results/runs/base-free" in listing["output"]
    assert (workdir / "results" / "runs" / "base-free" / "summary.json").exists()
    assert any((workdir / "results" / "archive").rglob("summary.json"))


def test_the_report_opens_on_the_main_table_and_forest_plot(
    readme_graph: tuple[Path, list[dict[str, Any]]],
) -> None:
    workdir, _ = readme_graph
    html = (workdir / "report.html").read_text()
    # Snakemake's report starts on the rule graph unless it has landing-page metadata.
    metadata = json.loads(re.search(r"var metadata = (.*?);\n", html).group(1))  # type: ignore[union-attr]
    assert metadata["Evaluation runs built"] >= 4
    description = json.loads(re.search(r'var workflow_desc = (".*?");\n', html, re.S).group(1))  # type: ignore[union-attr]
    assert 'class="skilleval-front"' in description
    assert "Table 1: the main table" in description and "Figure 1: the contrasts" in description
    assert "data:image/png;base64," in description
    for contrast in ("s0-gain", "internalisation", "upper-bound"):
        assert f'<td><a href="#why-{contrast}">{contrast}</a></td>' in description
    assert "Simulated evidence" in description


@pytest.mark.skipif(TEX is None, reason="no TeX engine: apt-get install texlive-latex-base latexmk")
def test_the_pdf_the_readme_builds_passes_its_layout_check(
    readme_graph: tuple[Path, list[dict[str, Any]]],
) -> None:
    workdir, _ = readme_graph
    layout = json.loads((workdir / "results" / "paper" / "layout.json").read_text())
    assert layout["problems"] == []
    assert layout["pages"] >= 5
    assert set(layout["page_kinds"].values()) == {"text"}
    assert {f["label"] for f in layout["floats"]} >= {
        "tab:main",
        "tab:ranking",
        "tab:harness",
        "fig:contrasts",
        "fig:ablation",
    }
    # Table 1's p_Holm column reads in the PDF as the table's sources write it (OT1 without
    # the escape printed "<0.001" as "¡0.001").
    import pandas as pd
    from pypdf import PdfReader

    from skilleval.report.tables import fmt_p

    text = " ".join(page.extract_text() for page in PdfReader(workdir / "paper" / "main.pdf").pages)
    assert "¡" not in text and "¿" not in text
    contrasts = pd.read_csv(workdir / "paper" / "tables" / "main_contrasts.csv", comment="#")
    shown = [fmt_p(p) for p in contrasts["p_holm"].dropna()]
    assert shown and all(p in text for p in shown), (shown, text[:2000])
    # LaTeX's products stay out of the sources.
    assert sorted(p.name for p in (workdir / "paper").glob("main.*")) == ["main.pdf", "main.tex"]
