"""The declared lower bounds are true: with every direct dependency at the lowest version
pyproject.toml allows, the unit tests pass.

uv resolves the lowest versions (``--resolution lowest-direct``: each direct dependency at
its lower bound, its own dependencies as they come) into a venv of the test's own; the
unit tests (every test not marked slow, docker, slurm or gpu) then run in it. The test
fails, never skips, when the registry cannot be reached: an unchecked bound is no check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import REPO

pytestmark = pytest.mark.slow
UNIT_TESTS = "not slow and not docker and not slurm and not gpu and not real_server"
LEFT_OUT = (
    # Lease scheduling under 41 concurrent jobs: a minute of load that calls no library
    # API the other unit tests leave out.
    "tests/test_gpu.py::test_forty_jobs_through_snakemake_never_overlap_or_touch_gpu0",
    # What a linter reports depends on its version and on the stubs of the libraries it
    # reads (numpy 1.26's ndarray stubs give mypy --strict errors that numpy 2's do not):
    # the code lints clean with the linters' lower bounds and today's libraries.
    "tests/test_lint.py",
)


def lower_bounds() -> dict[str, Version]:
    """Direct dependency -> its declared lower bound, the dev extra included."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    bounds: dict[str, Version] = {}
    for line in [*project["dependencies"], *project["optional-dependencies"]["dev"]]:
        requirement = Requirement(line)
        lows = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==")]
        if lows:
            bounds[canonicalize_name(requirement.name)] = max(lows)
    return bounds


def uv(*args: str, env: dict[str, str], timeout: int = 900) -> str:
    command = [str(Path(sys.executable).parent / "uv"), *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.timeout(1800)
def test_the_lowest_allowed_versions_pass_the_unit_tests(tmp_path: Path) -> None:
    venv = tmp_path / "lowest"
    env = {**os.environ, "VIRTUAL_ENV": str(venv)}
    # --seed: a venv with pip, as `python3 -m venv` makes (tests/test_deploy.py uses it)
    uv("venv", "-q", "--seed", "--python", sys.executable, str(venv), env=env)
    lab_env = REPO / "tests" / "data" / "lab_env"  # as the README's test command installs it
    lowest = ("--resolution", "lowest-direct", "-e", f"{REPO}[dev]", "-e", str(lab_env))
    uv("pip", "install", "-q", *lowest, env=env)
    listed = json.loads(uv("pip", "list", "--format", "json", env=env))
    installed = {canonicalize_name(p["name"]): Version(p["version"]) for p in listed}
    bounds = lower_bounds()
    # What runs below is what the bounds say: each dependency at exactly its lower bound.
    assert {name: installed.get(name) for name in bounds} == bounds
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-m", UNIT_TESTS, *(f"--deselect={test}" for test in LEFT_OUT),
         "--basetemp", str(tmp_path / "inner"), "tests"],
        cwd=REPO, capture_output=True, text=True, timeout=1700,
        env={**env, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"},
    )  # fmt: skip
    summary = done.stdout.strip().splitlines()[-1:] or [done.stderr[-2000:]]
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    print(f"lowest versions ({len(bounds)} bounds): {summary[0]}")
