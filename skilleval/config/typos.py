"""A name the config does not declare (a run, contrast, benchmark): say which exist."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from typing import Any

from skilleval.errors import SkillevalError


def did_you_mean(name: str, choices: Iterable[str]) -> list[str]:
    """The declared names closest to ``name``; a case slip (base-s0) counts as closest."""
    names = list(choices)
    same = [c for c in names if c.lower() == name.lower()]
    return same or difflib.get_close_matches(name, names, n=3, cutoff=0.6)


def unknown_name(kind: str, name: str, choices: Iterable[str], where: str = "the config") -> str:
    names = sorted(choices)
    close = did_you_mean(name, names)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return f"{where} declares no {kind} {name!r}{hint}; its {kind}s: {', '.join(names)}"


def not_one_of(names: Iterable[str], followed_by: str) -> str:
    """A wildcard constraint that matches any name but these, where the wildcard is followed
    by ``followed_by`` in the path (Snakemake matches a whole path, not the wildcard)."""
    declared = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return rf"(?!(?:{declared}){re.escape(followed_by)})[^/]+"


def refuse(
    kind: str, choices: Iterable[str], where: str = "the config", *, wildcard: str
) -> Callable[[Any], list[str]]:
    """An input function for a rule that matches only undeclared names in its ``wildcard``:
    it raises, naming the declared ones (Snakemake reports an input function's error with
    the target)."""
    names = list(choices)

    def explain(wildcards: Any) -> list[str]:
        raise SkillevalError(unknown_name(kind, getattr(wildcards, wildcard), names, where))

    return explain
