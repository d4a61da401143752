"""The workflow runs from a non-editable install, with no skilleval/ source beside it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, copy_workflow


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package built from a copy of its sources and installed into a bare folder."""
    source = tmp_path_factory.mktemp("source")
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / part, source / part)
    for package in ("skilleval", "snakemake_logger_plugin_skilleval"):
        shutil.copytree(
            REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    target = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
               str(target), str(source)]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    return target


def in_copy(installed: Path, workdir: Path, *command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(installed)}
    return subprocess.run(
        [sys.executable, *command], cwd=workdir, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip


def test_dry_run_of_the_paper_from_a_wheel_install(installed: Path, tmp_path: Path) -> None:
    workdir = copy_workflow(tmp_path)
    assert not (workdir / "skilleval").exists()
    for package in ("skilleval", "snakemake_logger_plugin_skilleval"):
        where = in_copy(installed, workdir, "-c", f"import {package}; print({package}.__file__)")
        assert Path(where.stdout.strip()).is_relative_to(installed), where.stdout + where.stderr
    done = in_copy(installed, workdir, "-m", "snakemake", "-n", "paper")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "paper_main_table" in done.stdout


def test_schemas_and_templates_are_package_data(installed: Path) -> None:
    assert (installed / "skilleval" / "config" / "schemas" / "config.schema.yaml").exists()
    assert (installed / "skilleval" / "report" / "templates" / "main_table.tex.j2").exists()


def test_every_command_option_has_help_text() -> None:
    import argparse

    from skilleval.cli import build_parser

    missing = []

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, f"{prefix} {name}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"{prefix} {action.dest}")

    walk(build_parser(), "skilleval")
    assert missing == []


def test_a_closed_pipe_and_an_unknown_run_behave_as_unix_tools(tmp_path: Path) -> None:
    skilleval = [sys.executable, "-m", "skilleval.cli"]
    piped = subprocess.run(
        f"{' '.join(skilleval)} ablation plan --json | head -1",
        shell=True,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert piped.stdout.strip() == "[" and "Traceback" not in piped.stderr, piped.stderr
    for part in ("config",):
        shutil.copytree(REPO / part, tmp_path / part)
    unknown = subprocess.run(
        [*skilleval, "clean", "does-not-exist", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert unknown.returncode != 0 and "declares no run 'does-not-exist'" in unknown.stderr
