"""The package layout stays as the architecture says: small units, documented sub-packages."""

from __future__ import annotations

import ast
import importlib

from tests.conftest import REPO

PACKAGE = REPO / "skilleval"
LIMITS = {"module": 400, "class": 150, "function": 60}


def sizes() -> list[tuple[int, str, str]]:
    """(lines, kind, where) of every module, class and function of the package."""
    rows = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        where = str(path.relative_to(REPO))
        rows.append((len(source.splitlines()), "module", where))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                kind = "class" if isinstance(node, ast.ClassDef) else "function"
                assert node.end_lineno is not None
                rows.append((node.end_lineno - node.lineno + 1, kind, f"{where}:{node.name}"))
    return rows


def test_no_unit_exceeds_its_size_limit() -> None:
    rows = sizes()
    largest = {kind: max(r for r in rows if r[1] == kind) for kind in LIMITS}
    print("largest:", "; ".join(f"{k} {w} ({n} lines)" for k, (n, _, w) in largest.items()))
    over = [r for r in rows if r[0] > LIMITS[r[1]]]
    assert over == [], f"over the limits {LIMITS}: {over}"


def test_top_level_keeps_only_the_cli_errors_logging_and_paths() -> None:
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(modules) <= 5, modules


def test_every_sub_package_says_what_lives_there() -> None:
    packages = sorted(p.parent for p in PACKAGE.rglob("__init__.py"))
    assert len(packages) >= 10
    for package in packages:
        name = ".".join(package.relative_to(REPO).parts)
        doc = importlib.import_module(name).__doc__
        assert doc and len(doc.strip()) > 20, f"{name} has no docstring"


def test_no_results_path_is_spelled_outside_paths_module() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "paths.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if '"results/' in line or 'f"results/' in line:
                offenders.append(f"{path.relative_to(REPO)}:{number}")
    assert offenders == []


def test_nothing_points_outside_the_repository() -> None:
    """The memos' account is docs/memos.md: the repository is read without its neighbours."""
    pointing = [
        f"{path.relative_to(REPO)}:{number}"
        for top in ("README.md", "docs", "config", "skilleval", "rules", "scripts", "profiles")
        for path in ([REPO / top] if (REPO / top).is_file() else sorted((REPO / top).rglob("*")))
        if path.is_file() and path.suffix in {".md", ".yaml", ".json", ".py", ".smk", ""}
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1)
        if "../shared" in line or "DESIGN.md" in line
    ]
    assert pointing == [], pointing
    assert "## Memo 000" in (REPO / "docs" / "memos.md").read_text()
