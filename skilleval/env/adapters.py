"""Environment adapters by name: the built-in two and a lab's own, as plug-ins.

``backends.environment`` names ``shopsim`` (the simulated shop, in process), ``http`` (a
server speaking ``skilleval/env/wire.py``), or a lab's adapter: an entry point of the
``skilleval.environments`` group, or an import path ``package.module:Class``. An adapter
class is made as ``Class(settings)`` with the protocol's ``environment`` section (``url``,
``slots`` and the free-form ``options``), and its instances keep the contract of
``skilleval/env/contract.py`` (``skilleval env check`` runs it against a live server).
docs/bring-your-own-environment.md is the guide; ``skilleval/env/template.py`` the start.

Its identity, the import target, its distribution's version and the digest of every
source file of every top-level package its distribution installs (the adapter's own alone
when it was not installed), is part of every run's evidence identity: an edit to any module
the lab installed with the adapter makes the runs that used it stale, and a job refuses an
adapter that changed after the graph was planned.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.metadata
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilleval.errors import SkillevalError
from skilleval.storage.hashing import canonical_hash, file_sha256

BUILT_IN = ("shopsim", "http")
ENTRY_POINT_GROUP = "skilleval.environments"
IDENTITY_KEY = "environment_adapter"  # the adapter's identity, beside its name in backends


@dataclass(frozen=True)
class AdapterRef:
    """A lab's adapter as config names it, found without importing it."""

    name: str
    target: str  # module:attribute
    module_file: str
    package_digest: str
    distribution: str | None
    version: str | None

    @property
    def identity(self) -> str:
        """The adapter as evidence: what it is and its code, never where it lies."""
        installed = f"{self.distribution} {self.version}" if self.distribution else "no dist"
        return f"{self.target} ({installed}; package sha256:{self.package_digest})"


# Files of a package that are no source: what Python and packaging tools write beside it.
NOT_SOURCE = (".pyc", ".pyo")
NOT_SOURCE_DIRS = ("__pycache__", ".egg-info", ".dist-info")


def package_source(module: str) -> tuple[Path, list[Path]]:
    """The root of ``module``'s top-level package and every source file under it (all its
    modules and the data files beside them, sorted); a top-level module alone is its own
    file."""
    top = module.split(".")[0]
    spec = importlib.util.find_spec(top)
    if spec is None or (spec.origin is None and not spec.submodule_search_locations):
        raise AdapterNotFound(module, f"package {top} is not on this Python's path")
    if not spec.submodule_search_locations:
        origin = Path(str(spec.origin))
        return origin.parent, [origin]
    files: list[Path] = []
    roots = [Path(location) for location in spec.submodule_search_locations]
    for root in roots:
        files += (
            path
            for path in root.rglob("*")
            if path.is_file()
            and not path.name.endswith(NOT_SOURCE)
            and not any(part.endswith(NOT_SOURCE_DIRS) for part in path.relative_to(root).parts)
        )
    return roots[0].parent, sorted(files)


@functools.cache
def _content_digest(path: Path, size: int, mtime_ns: int) -> str:
    """A file's SHA-256, once per version of the file in this process: the workflow asks
    for the adapter's identity more than once per parse."""
    return file_sha256(path)


def source_digest(tops: list[str]) -> str:
    """One digest of the source files of these top-level packages (or modules): each
    file's path under its package's root and its contents, so that renaming, adding or
    editing any of them changes it."""
    contents = {}
    for top in tops:
        root, files = package_source(top)
        for path in files:
            stat = path.stat()
            contents[path.relative_to(root).as_posix()] = _content_digest(
                path, stat.st_size, stat.st_mtime_ns
            )
    return canonical_hash(contents)


def distribution_packages(top: str, distribution: str | None) -> list[str]:
    """The top-level packages whose code is the adapter's: every one its distribution
    installs (an editable install's too, from its top_level.txt), or its own alone. A name
    the distribution lists that this Python cannot find (a stale top_level.txt) holds no
    code to run, so it is left out."""
    if distribution is None:
        return [top]
    listed = {t for t, names in installed_distributions().items() if distribution in names}
    return sorted({t for t in listed if t == top or findable(t)} | {top})


def findable(top: str) -> bool:
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def entry_point_target(name: str) -> str | None:
    """The import target of the ``skilleval.environments`` entry point ``name``, if any."""
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name == name:
            return str(entry.value)
    return None


def installed_adapters() -> list[str]:
    return sorted(e.name for e in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


class AdapterNotFound(SkillevalError):
    """``backends.environment`` names no adapter this Python can find: ``why`` and ``fix``
    apart, for config validation to report them against the key."""

    def __init__(self, name: str, why: str) -> None:
        known = [*BUILT_IN, *installed_adapters()]
        near = difflib.get_close_matches(name, known, n=1)
        installed = ", ".join(installed_adapters()) or "none installed"
        hint = f" (did you mean {near[0]}?)" if near else ""
        self.why = (
            f"{why}{hint}; an adapter is built in ({', '.join(BUILT_IN)}), an entry point of the "
            f"{ENTRY_POINT_GROUP} group ({installed}) or an import path package.module:Class"
        )
        self.fix = (
            "install the adapter's package into this venv (pip install -e PATH) or correct "
            "the name (docs/bring-your-own-environment.md)"
        )
        super().__init__(f"backends.environment = {name!r}: {self.why}; fix: {self.fix}")


@functools.cache
def installed_distributions() -> Mapping[str, list[str]]:
    """Top-level module -> the distributions that install it. It reads every installed
    distribution's file list, so once per process: each plan of the graph asks."""
    return importlib.metadata.packages_distributions()


def find_adapter(name: str) -> AdapterRef:
    """The lab adapter ``name`` names, with its identity; its module is found, not run."""
    target = entry_point_target(name) or name
    module, _, attribute = target.partition(":")
    if not module or not attribute:
        raise AdapterNotFound(name, "no such entry point, and not an import path")
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as error:
        raise AdapterNotFound(name, f"module {module} cannot be found ({error})") from None
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        raise AdapterNotFound(name, f"module {module} is not on this Python's path")
    top = module.split(".")[0]
    distributions = installed_distributions().get(top, [])
    distribution = distributions[0] if distributions else None
    return AdapterRef(
        name=name,
        target=target,
        module_file=str(Path(spec.origin)),
        package_digest=source_digest(distribution_packages(top, distribution)),
        distribution=distribution,
        version=importlib.metadata.version(distribution) if distribution else None,
    )


def adapter_evidence(name: str) -> dict[str, str]:
    """What a run's backends add for its environment adapter: nothing for a built-in one
    (the package's own code is in the run's code identity), a lab adapter's identity."""
    return {} if name in BUILT_IN else {IDENTITY_KEY: find_adapter(name).identity}


def make_adapter(name: str, planned: str | None, settings: dict[str, Any]) -> Any:
    """An instance of the lab adapter ``name``, refused when its code is not the code the
    graph planned the run with (``planned``: the identity in the run's backends)."""
    ref = find_adapter(name)
    if planned is not None and ref.identity != planned:
        raise SkillevalError(
            f"the environment adapter {name!r} changed after the graph was planned "
            f"(planned {planned}, found {ref.identity}); re-run snakemake so that the runs "
            "that use it are planned with its new code"
        )
    module, _, attribute = ref.target.partition(":")
    try:
        adapter = getattr(importlib.import_module(module), attribute)
    except AttributeError:
        raise AdapterNotFound(name, f"module {module} has no {attribute}") from None
    environment = adapter(settings)
    missing = [m for m in ("tools", "start") if not callable(getattr(environment, m, None))]
    if missing:
        raise SkillevalError(
            f"the environment adapter {ref.target} has no {' or '.join(missing)}() method; "
            "an adapter keeps the contract of skilleval/env/contract.py"
        )
    return environment
