"""Code as an input: the fingerprint of everything a rule's output is computed by.

A rule's code is its script, every ``skilleval`` module the script imports (transitively,
imports inside functions included, with the ``__init__`` of every package on the way)
and the templates it renders. Python files are fingerprinted by their syntax tree with
docstrings removed, so comments, docstrings and formatting never make evidence stale;
templates by their bytes. Rules put the result in ``params``, where Snakemake's params
trigger compares it with what the outputs were built with.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from skilleval.storage import atomic

PACKAGE = "skilleval"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = PACKAGE_ROOT / "report" / "templates"
DIGEST_CHARS = 16


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            value = first.value if isinstance(first, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return tree


class SourceCache:
    """Each source file's digest and skilleval imports, keyed by (path, size, mtime).

    Parsing every module at every Snakemake start would cost more than the rest of the
    workflow's parse; a file whose size and mtime are unchanged is not read again. The
    cache only ever saves work: a stale entry cannot match a changed file's stat.
    """

    def __init__(self, file: Path | None = None) -> None:
        self.file = file
        self.stored: dict[str, list[Any]] = (
            json.loads(file.read_text()) if file is not None and file.exists() else {}
        )
        self.used: dict[str, list[Any]] = {}
        # Files do not change while one Snakemake process parses the workflow.
        self.closures: dict[tuple[str, ...], list[str]] = {}

    def entry(self, path: Path) -> tuple[str, list[str]]:
        """The digest of the file's syntax tree without docstrings (behaviour, not
        presentation) and the skilleval modules it imports."""
        stat = path.stat()
        key = f"{path}:{stat.st_size}:{stat.st_mtime_ns}"
        if key not in self.used:
            self.used[key] = self.stored.get(key) or self._read(path)
        digest, imports = self.used[key]
        return digest, imports

    @staticmethod
    def _read(path: Path) -> list[Any]:
        tree = ast.parse(path.read_text(), filename=str(path))
        imports = sorted(imported_modules(tree) | discovered_modules(tree, path))
        dumped = ast.dump(_without_docstrings(tree), annotate_fields=False)
        return [hashlib.sha256(dumped.encode()).hexdigest()[:DIGEST_CHARS], imports]

    def save(self) -> None:
        """Keep what this parse used: entries of old file versions drop out."""
        if self.file is not None and self.used != self.stored:
            atomic.write_json(self.file, self.used)


MEMORY = SourceCache()


@cache
def module_path(module: str) -> Path | None:
    """The source file of a ``skilleval`` module, or None when the name is no module."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    base = PACKAGE_ROOT.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _package_chain(module: str) -> list[str]:
    """The module and every package its import executes first."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def discovered_modules(tree: ast.AST, path: Path) -> set[str]:
    """A package that imports its own modules by discovery (``pkgutil.iter_modules``, as
    the engine registry does) imports every module beside its ``__init__``."""
    discovers = any(
        isinstance(node, ast.Attribute) and node.attr == "iter_modules" for node in ast.walk(tree)
    )
    if path.name != "__init__.py" or not discovers:
        return set()
    package = ".".join([PACKAGE, *path.parent.relative_to(PACKAGE_ROOT).parts])
    return {f"{package}.{p.stem}" for p in path.parent.glob("*.py") if p.name != "__init__.py"}


def imported_modules(tree: ast.AST) -> set[str]:
    """``skilleval`` modules a file imports, wherever the import statement stands."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != PACKAGE:
                continue
            found.add(node.module)
            found.update(
                f"{node.module}.{a.name}"
                for a in node.names
                if module_path(f"{node.module}.{a.name}")
            )
    return found


def module_closure(entries: Iterable[str], cache: SourceCache = MEMORY) -> list[str]:
    """Every ``skilleval`` module that importing ``entries`` executes."""
    key = tuple(sorted(entries))
    if key not in cache.closures:
        cache.closures[key] = _closure(key, cache)
    return cache.closures[key]


def _closure(entries: Iterable[str], cache: SourceCache) -> list[str]:
    seen: set[str] = set()
    todo = [m for entry in entries for m in _package_chain(entry)]
    while todo:
        module = todo.pop()
        path = module_path(module)
        if module in seen or path is None:
            continue
        seen.add(module)
        for imported in cache.entry(path)[1]:
            todo.extend(_package_chain(imported))
    return sorted(seen)


def code_fingerprint(
    script: str | Path | None = None,
    modules: Sequence[str] = (),
    templates: Iterable[str] = (),
    cache: SourceCache = MEMORY,
) -> dict[str, str]:
    """File -> digest of everything a rule's outputs are computed by.

    ``script`` is the rule's script (its skilleval imports are followed); ``modules``
    are entry modules for rules that run the package another way (``shell:``);
    ``templates`` are template names under skilleval/report/templates.
    """
    entries = list(modules)
    digests: dict[str, str] = {}
    if script is not None:
        path = Path(script).resolve()
        digest, imports = cache.entry(path)
        digests[f"scripts/{path.name}"] = digest
        entries += imports
    for module in module_closure(entries, cache):
        source = module_path(module)
        assert source is not None, module  # the closure holds only modules with a file
        digests[str(source.relative_to(PACKAGE_ROOT.parent))] = cache.entry(source)[0]
    for name in templates:
        template = TEMPLATES / name
        digests[f"skilleval/report/templates/{name}"] = hashlib.sha256(
            template.read_bytes()
        ).hexdigest()[:DIGEST_CHARS]
    return digests
