"""Verdicts: improves, regresses, inconclusive, descriptive or invalid, with the reason."""

from __future__ import annotations

from typing import Any

from skilleval.records.analysis import Contrast, Verdict


def verdict_of(contrast: dict[str, Any]) -> dict[str, Any]:
    failed = [c for c in contrast["checks"] if not c["passed"]]
    if failed or contrast.get("error"):
        reason = "; ".join(f"{c['name']} failed ({c['detail']})" for c in failed)
        verdict, reason = "invalid", reason or str(contrast.get("error"))
    elif not contrast["causal"]:
        verdict = "descriptive"
        reason = "declared non-causal: more than one factor changed between the arms"
    elif contrast["ci_low"] > 0:
        verdict, reason = "improves", f"{contrast['confidence']:.0%} CI lies above 0"
    elif contrast["ci_high"] < 0:
        verdict, reason = "regresses", f"{contrast['confidence']:.0%} CI lies below 0"
    else:
        verdict, reason = "inconclusive", f"{contrast['confidence']:.0%} CI contains 0"
    keys = (
        "name",
        "control",
        "treatment",
        "metric",
        "estimate",
        "ci_low",
        "ci_high",
        "confidence",
        "method",
        "p_value",
    )
    return {
        **{k: contrast.get(k) for k in keys},
        "verdict": verdict,
        "reason": reason,
        "checks": contrast["checks"],
    }


def build_verdict(contrast_path: str, output: str) -> dict[str, Any]:
    verdict = verdict_of(Contrast.read(contrast_path).as_json())
    Verdict.create(**verdict).write(output)
    return verdict
