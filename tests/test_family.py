"""The paper's causal verdicts as one family: bootstrap p-values and Holm's adjustment."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from skilleval.analysis.bootstrap import AlignedPairs, paired_bootstrap
from skilleval.analysis.family import build_family, holm
from skilleval.records.analysis import Verdict


def holm_by_hand(p: dict[str, float]) -> dict[str, float]:
    """Holm (1979) step-down, written out: the i-th smallest p times (m - i + 1), made
    monotone and capped at 1."""
    order = sorted(p, key=p.__getitem__)
    m, running, adjusted = len(order), 0.0, {}
    for i, name in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[name]))
        adjusted[name] = running
    return adjusted


def test_holm_matches_the_step_down_written_out() -> None:
    rng = np.random.default_rng(5)
    for _ in range(50):
        p = {f"c{i}": float(x) for i, x in enumerate(rng.uniform(0, 0.2, 9))}
        assert holm(p, 0.05) == pytest.approx(holm_by_hand(p))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm({"a": 1.5}, 0.05)


def test_the_bootstrap_p_value_agrees_with_the_interval() -> None:
    rng = np.random.default_rng(0)
    for shift in (0.0, 0.02, 0.05, 0.1):
        control = rng.uniform(0, 1, 300)
        pairs = AlignedPairs(tuple(map(str, range(300))), control, control + shift)
        pairs = AlignedPairs(pairs.task_ids, control, control + shift + rng.normal(0, 0.3, 300))
        result = paired_bootstrap(pairs, rng=np.random.default_rng(1), n_resamples=4000)
        excludes_zero = result.ci_low > 0 or result.ci_high < 0
        assert (result.p_value < 0.05) == excludes_zero
        tail = min(np.mean(result.distribution <= 0), np.mean(result.distribution >= 0))
        assert result.p_value == pytest.approx(2 * tail, abs=2 / 4001)


def verdict(name: str, word: str, p: float | None) -> Verdict:
    return Verdict.create(
        name=name,
        control="a",
        treatment="b",
        metric="reward",
        estimate=0.01,
        ci_low=0.0,
        ci_high=0.02,
        confidence=0.95,
        verdict=word,
        reason="",
        checks=[],
        p_value=p,
    )


def test_the_family_holds_causal_verdicts_and_names_what_it_leaves_out(tmp_path: Path) -> None:
    words = {
        "gain": ("improves", 0.004),
        "gap": ("improves", 0.03),
        "loss": ("regresses", 0.012),
        "flat": ("inconclusive", 0.4),
        "both-changed": ("descriptive", 0.001),
        "broken": ("invalid", None),
    }
    paths = {}
    for name, (word, p) in words.items():
        paths[name] = str(tmp_path / f"{name}.json")
        verdict(name, word, p).write(paths[name])
    family = build_family(paths, 0.05, str(tmp_path / "family.json"))
    members = {m["name"]: m for m in family["members"]}
    assert set(members) == {"gain", "gap", "loss", "flat"}
    expected = holm_by_hand({n: words[n][1] for n in members})  # type: ignore[misc]
    for name, member in members.items():
        assert member["p_holm"] == pytest.approx(expected[name])
    # 0.03 alone passes at 5%, not once four verdicts share the level.
    assert (
        members["gap"]["p_holm"] == pytest.approx(0.06) and not members["gap"]["holds_family_wise"]
    )
    assert members["gain"]["holds_family_wise"] and members["loss"]["holds_family_wise"]
    assert not members["flat"]["holds_family_wise"]
    assert {e["name"]: e["why"] for e in family["excluded"]} == {
        "both-changed": "descriptive",
        "broken": "no p-value",
    }
