"""The workflow and package stay lint-clean: snakemake --lint, snakefmt, ruff, mypy, and
the layer contract of pyproject.toml (import-linter)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import REPO


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_snakemake_lint_is_clean() -> None:
    done = run(sys.executable, "-m", "snakemake", "--lint")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Congratulations" in done.stdout + done.stderr


def test_snakefmt_check_is_clean() -> None:
    done = run(sys.executable, "-m", "snakefmt", "--check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_is_clean() -> None:
    done = run(sys.executable, "-m", "ruff", "check", "skilleval", "tests", "benchmarks", "scripts")
    assert done.returncode == 0, done.stdout


def test_mypy_is_clean() -> None:
    done = run(sys.executable, "-m", "mypy", "skilleval")
    assert done.returncode == 0, done.stdout


LINT_IMPORTS = str(Path(sys.executable).with_name("lint-imports"))


def test_the_layers_point_down() -> None:
    done = run(LINT_IMPORTS, "--no-cache")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 1 kept, 0 broken." in done.stdout


def test_every_part_of_the_package_has_a_layer() -> None:
    contract = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    [layers] = [c["layers"] for c in contract["contracts"] if c["type"] == "layers"]
    placed = {name.strip() for layer in layers for name in layer.split("|")}
    package = REPO / "skilleval"
    parts = {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    parts |= {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    assert parts == placed


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(REPO / "skilleval", tmp_path / "skilleval")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    records = tmp_path / "skilleval" / "records" / "runs.py"
    records.write_text(records.read_text() + "\nfrom skilleval.report import tables\n")
    done = subprocess.run(
        [LINT_IMPORTS, "--no-cache"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0, done.stdout
    assert "skilleval.records.runs -> skilleval.report.tables" in done.stdout
