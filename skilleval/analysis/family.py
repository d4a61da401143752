"""The causal verdicts of one paper table as one family of tests: Holm-adjusted p-values.

Each contrast keeps its own 95% interval and verdict (memo §2). Several causal verdicts
at 5% each would, together, call some effect by chance far more often than 5%;
Holm's step-down adjustment (statsmodels' ``multipletests``) bounds the family-wise
error at the stated level without assuming the tests independent, which they are not
(the arms share runs). Members are the causal contrasts that have a p-value; invalid and
descriptive ones are listed with why they are left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from skilleval.records.analysis import Verdict, VerdictFamily

METHOD = "Holm step-down (statsmodels.stats.multitest.multipletests, method='holm')"


def holm(p_values: Mapping[str, float], level: float) -> dict[str, float]:
    """Holm-adjusted p-values, by name; a verdict holds family-wise where p_holm < level."""
    from statsmodels.stats.multitest import multipletests  # lazy: only the family rule

    if not p_values:
        return {}
    names = list(p_values)
    raw = np.array([p_values[n] for n in names], dtype=np.float64)
    if not np.all((raw >= 0) & (raw <= 1)):
        raise ValueError(f"p-values must lie in [0, 1], got {dict(zip(names, raw, strict=True))}")
    adjusted = multipletests(raw, alpha=level, method="holm")[1]
    return {n: float(p) for n, p in zip(names, adjusted, strict=True)}


def verdict_family(verdicts: Mapping[str, Verdict], level: float) -> dict[str, Any]:
    members, excluded = {}, []
    for name, verdict in verdicts.items():
        if verdict.verdict in ("invalid", "descriptive") or verdict.p_value is None:
            why = verdict.verdict if verdict.p_value is not None else "no p-value"
            excluded.append({"name": name, "verdict": verdict.verdict, "why": why})
        else:
            members[name] = verdict
    adjusted = holm({n: v.p_value for n, v in members.items() if v.p_value is not None}, level)
    return {
        "method": METHOD,
        "family_wise_level": level,
        "members": [
            {
                "name": name,
                "verdict": verdict.verdict,
                "p_value": verdict.p_value,
                "p_holm": adjusted[name],
                "holds_family_wise": verdict.verdict in ("improves", "regresses")
                and adjusted[name] < level,
            }
            for name, verdict in members.items()
        ],
        "excluded": excluded,
        "note": f"{len(members)} causal verdicts of one table in one family; p: two-sided "
        f"p-value of each contrast (its interval method's); p_holm: Holm-adjusted, so a "
        f"verdict whose p_holm < {level:g} holds at family-wise error {level:.0%}",
    }


def build_family(verdict_paths: Mapping[str, str], level: float, output: str) -> dict[str, Any]:
    family = verdict_family({n: Verdict.read(p) for n, p in verdict_paths.items()}, level)
    VerdictFamily.create(**family).write(output)
    return family


def holm_cell(family: Mapping[str, Any], name: str) -> float | None:
    """A contrast's Holm-adjusted p-value, or None when it is not in the family."""
    return next((m["p_holm"] for m in family["members"] if m["name"] == name), None)
