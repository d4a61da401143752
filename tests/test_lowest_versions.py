"""The declared lower bounds are true: with every direct dependency at the lowest version
pyproject.toml allows, the tests that call each dependency pass.

uv resolves the lowest versions (``--resolution lowest-direct``: each direct dependency at
its lower bound, its own dependencies as they come) into a venv of the test's own. The
unit tests of LIBRARY_TESTS then run in it: for each runtime dependency, the test files
that call it. The whole unit suite would say little more at several times the cost, and
every file listed is checked to reach its library's import. The test fails, never skips,
when the registry cannot be reached: an unchecked bound is no check.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import REPO

UNIT_TESTS = "not slow and not docker and not slurm and not gpu and not real_server"
# Runtime dependency -> the unit test files that call it at its lower bound.
LIBRARY_TESTS = {
    "snakemake": (
        "tests/test_snakemake_internals.py",  # every Workflow internal and logger event
        "tests/test_progress.py",  # the logger plugin under Snakemake's own handler
        "tests/test_deploy.py",  # a dry run of the whole paper graph
    ),
    "numpy": ("tests/test_world.py", "tests/test_checkpoints.py"),
    "scipy": ("tests/test_bootstrap.py", "tests/test_gate.py"),
    "statsmodels": ("tests/test_family.py",),
    "pandas": ("tests/test_ablation.py",),
    "pyyaml": ("tests/test_config.py",),  # it also runs the Snakefile's config checks
    "jsonschema": ("tests/test_config.py",),
    "jinja2": ("tests/test_paper_layout.py", "tests/test_world.py"),
    "matplotlib": ("tests/test_ablation.py", "tests/test_checkpoints.py"),
    "safetensors": ("tests/test_checkpoints.py",),
    "filelock": ("tests/test_journal.py", "tests/test_gpu.py"),
    "urllib3": ("tests/test_model_client.py", "tests/test_server_replies.py"),
    "pydantic": ("tests/test_journal.py", "tests/test_evidence.py"),
    "pypdf": ("tests/test_paper_layout.py",),
    # Only `snakemake --report` highlights code with it: the README's build, not a unit test.
    "pygments": (),
}
LEFT_OUT = (
    # Lease scheduling under 41 concurrent jobs: a minute of load that calls no library
    # API the other unit tests leave out.
    "tests/test_gpu.py::test_forty_jobs_through_snakemake_never_overlap_or_touch_gpu0",
    # Five dry runs of mistyped targets: the workflow's own messages, through no pyyaml or
    # jsonschema call that the file's other tests leave out.
    "tests/test_config.py::test_a_typo_in_a_target_names_the_declared_choices",
)


def imported_names(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def reached_imports(test_file: Path) -> set[str]:
    """The top-level names of the third-party modules a test file imports, itself or
    through the package's modules it imports (conftest's fixtures are not counted)."""
    seen: set[Path] = set()
    frontier, reached = [test_file], set()
    while frontier:
        path = frontier.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in imported_names(path):
            top = name.split(".")[0]
            if top in ("skilleval", "tests"):
                parts = REPO.joinpath(*name.split("."))
                found = [parts.with_suffix(".py"), parts / "__init__.py"]
                frontier += [f for f in found if f.is_file() and f.name != "conftest.py"]
            else:
                reached.add(top)
    return reached


def test_each_dependency_s_tests_reach_its_import() -> None:
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    runtime = {canonicalize_name(Requirement(d).name) for d in dependencies["dependencies"]}
    assert set(LIBRARY_TESTS) == runtime, "each runtime dependency names its tests"
    modules_of: dict[str, set[str]] = {}
    for module, distributions in packages_distributions().items():
        for distribution in distributions:
            modules_of.setdefault(canonicalize_name(distribution), set()).add(module)
    for dependency, test_files in LIBRARY_TESTS.items():
        for test_file in test_files:
            reached = reached_imports(REPO / test_file)
            assert modules_of[dependency] & reached, f"{test_file} never imports {dependency}"


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


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_lowest_allowed_versions_pass_the_unit_tests(tmp_path: Path) -> None:
    venv = tmp_path / "lowest"
    env = {**os.environ, "VIRTUAL_ENV": str(venv)}
    # --seed: a venv with pip, as `python3 -m venv` makes (tests/test_deploy.py uses it)
    uv("venv", "-q", "--seed", "--python", sys.executable, str(venv), env=env)
    lab_env = REPO / "tests" / "data" / "lab_env"  # as the README's test command installs it
    lowest = ("--resolution", "lowest-direct", "-e", f"{REPO}[dev]", "-e", str(lab_env))
    uv("pip", "install", "-q", "--compile-bytecode", *lowest, env=env)
    listed = json.loads(uv("pip", "list", "--format", "json", env=env))
    installed = {canonicalize_name(p["name"]): Version(p["version"]) for p in listed}
    bounds = lower_bounds()
    # What runs below is what the bounds say: each dependency at exactly its lower bound.
    assert {name: installed.get(name) for name in bounds} == bounds
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-m", UNIT_TESTS, *(f"--deselect={test}" for test in LEFT_OUT),
         "--basetemp", str(tmp_path / "inner"),
         *sorted({f for files in LIBRARY_TESTS.values() for f in files})],
        cwd=REPO, capture_output=True, text=True, timeout=1700,
        env={**env, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"},
    )  # fmt: skip
    summary = done.stdout.strip().splitlines()[-1:] or [done.stderr[-2000:]]
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    print(f"lowest versions ({len(bounds)} bounds): {summary[0]}")
