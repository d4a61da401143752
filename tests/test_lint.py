"""The workflow and package stay lint-clean: snakemake --lint, snakefmt, ruff, mypy."""

from __future__ import annotations

import subprocess
import sys

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
