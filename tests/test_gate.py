from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from skilleval.analysis.design import build_design
from skilleval.analysis.gate import common_effect_loading, fit_gate, gate_fits
from skilleval.analysis.ranking import (
    cluster_bootstrap_spearman,
    percentile_interval,
    select_chunks,
)
from skilleval.records.analysis import GateBeta


def test_gate_recovers_known_effects_without_intercept() -> None:
    rng = np.random.default_rng(0)
    true = np.array([0.03, -0.02, 0.0, 0.01])
    masks = (rng.random((4000, 4)) < 0.5).astype(float)
    deltas = masks @ true + rng.normal(0, 0.3, 4000)
    fit = fit_gate(masks, deltas, ("a", "b", "c", "d"), [f"t{i}" for i in range(4000)])
    assert np.all(np.abs(fit.beta - true) < 4 * fit.standard_error)
    expected_se = 0.3 / np.sqrt(4000 * 0.25)  # roughly, for independent half-on masks
    assert fit.standard_error == pytest.approx(np.full(4, expected_se), rel=0.3)
    out = fit.as_json()
    assert out["diagnostics"]["intercept"] is False
    assert [c["chunk_id"] for c in out["chunks"]] == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    ("masks", "deltas", "message"),
    [
        (np.ones((10, 2)), np.zeros(10), "rank-deficient"),
        (np.eye(3), np.zeros(3), "more observations than chunks"),
        (np.full((5, 2), 0.5), np.zeros(5), "0/1"),
        (np.ones((5, 2)), np.zeros(4), "deltas"),
    ],
)
def test_gate_rejects_degenerate_designs(masks: Any, deltas: Any, message: str) -> None:
    groups = [f"t{i % 3}" for i in range(len(masks))]
    with pytest.raises(ValueError, match=message):
        fit_gate(masks, deltas, ("a", "b") if masks.shape[1] == 2 else ("a", "b", "c"), groups)


def small_world_gate(seed: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """12 masked runs x 40 tasks; a task's rows share its bare run's noise, as in Gate A."""
    rng = np.random.default_rng(seed)
    tasks, runs, true = 40, 12, np.array([0.04, -0.03, 0.0, 0.02, 0.01])
    bare_noise = rng.normal(0, 0.2, tasks)
    masks = (rng.random((tasks * runs, 5)) < 0.5).astype(float)
    task_of_row = np.tile(np.arange(tasks), runs)
    deltas = masks @ true + rng.normal(0, 0.2, tasks * runs) - bare_noise[task_of_row]
    return masks, deltas, [f"task-{t:02d}" for t in task_of_row]


def test_clustered_errors_equal_a_hand_computed_sandwich() -> None:
    masks, deltas, tasks = small_world_gate(1)
    fit = fit_gate(masks, deltas, tuple("abcde"), tasks)
    # CR1: (X'X)^-1 [sum_g X_g' u_g u_g' X_g] (X'X)^-1 x G/(G-1) x (N-1)/(N-K)
    beta = np.linalg.solve(masks.T @ masks, masks.T @ deltas)
    residuals = deltas - masks @ beta
    meat = np.zeros((5, 5))
    for task in sorted(set(tasks)):
        rows = np.array([t == task for t in tasks])
        score = masks[rows].T @ residuals[rows]
        meat += np.outer(score, score)
    bread = np.linalg.inv(masks.T @ masks)
    n, k, g = len(deltas), 5, len(set(tasks))
    sandwich = bread @ meat @ bread * g / (g - 1) * (n - 1) / (n - k)
    np.testing.assert_allclose(fit.beta, beta, rtol=1e-10)
    np.testing.assert_allclose(fit.covariance, sandwich, rtol=1e-10)
    assert fit.n_clusters == 40 and fit.degrees_of_freedom == 39
    record = fit.as_json()
    assert record["covariance"]["type"] == "cluster"
    assert np.asarray(record["covariance"]["matrix"]).shape == (5, 5)


def test_a_bank_prediction_uses_the_full_covariance() -> None:
    masks, deltas, tasks = small_world_gate(2)
    fit = fit_gate(masks, deltas, tuple("abcde"), tasks)
    beta = GateBeta.create(
        **gate_fits(masks, deltas, tuple("abcde"), tasks, 2, 12), inputs={}, provenance={}
    )
    estimate, se = beta.combination({"a": 1.0, "b": 1.0, "d": 1.0})
    w = np.array([1.0, 1.0, 0.0, 1.0, 0.0])
    assert estimate == pytest.approx(float(w @ fit.beta))
    assert se == pytest.approx(float(np.sqrt(w @ fit.covariance @ w)))
    independent = float(np.sqrt(np.sum(fit.standard_error[[0, 1, 3]] ** 2)))
    assert se != pytest.approx(independent, rel=1e-3)  # the off-diagonal terms count


def test_design_is_seeded_and_covers_every_task() -> None:
    a = build_design(
        ["c1", "c2", "c3"], ["t1", "t2"], ["masked-01", "masked-02", "masked-03"], 0.5, 7
    )
    b = build_design(
        ["c1", "c2", "c3"], ["t1", "t2"], ["masked-01", "masked-02", "masked-03"], 0.5, 7
    )
    assert a == b
    assert list(a.runs) == ["masked-01", "masked-02", "masked-03"]
    assert all(
        set(run) == {"t1", "t2"} and all(len(m) == 3 for m in run.values())
        for run in a.runs.values()
    )
    assert (
        build_design(
            ["c1", "c2", "c3"], ["t1", "t2"], ["masked-01", "masked-02", "masked-03"], 0.5, 8
        )
        != a
    )


def test_banks_use_signed_beta_not_magnitude() -> None:
    beta = {
        "chunks": [
            {"chunk_id": "big-harm", "beta": -0.09},
            {"chunk_id": "help", "beta": 0.02},
            {"chunk_id": "small", "beta": 0.01},
            {"chunk_id": "harm", "beta": -0.01},
        ]
    }
    assert select_chunks(beta["chunks"], "top", 2, None) == ["help", "small"]
    assert select_chunks(beta["chunks"], "bottom", 2, None) == ["big-harm", "harm"]
    random = select_chunks(beta["chunks"], "random", 2, 20260907)
    assert random == select_chunks(beta["chunks"], "random", 2, 20260907) and len(set(random)) == 2
    with pytest.raises(Exception, match="exceeds"):
        select_chunks(beta["chunks"], "top", 5, None)


def bank_gate(ids: list[str], common: float, seed: int = 3) -> tuple[Any, ...]:
    """12 masked runs x 60 tasks over ``ids``: deltas of known chunk effects plus a common
    effect of any skills section, with task-shared noise."""
    rng = np.random.default_rng(seed)
    tasks, runs = 60, 12
    true = np.linspace(-0.04, 0.05, len(ids))
    masks = (rng.random((tasks * runs, len(ids))) < 0.5).astype(float)
    task_of_row = np.tile(np.arange(tasks), runs)
    noise = rng.normal(0, 0.05, tasks * runs) - rng.normal(0, 0.05, tasks)[task_of_row]
    deltas = masks @ true + common * (masks.sum(axis=1) > 0) + noise
    return masks, deltas, [f"task-{t:02d}" for t in task_of_row], true


def write_beta(path: Path, ids: list[str], common: float = 0.0) -> GateBeta:
    masks, deltas, tasks, _ = bank_gate(ids, common)
    beta = GateBeta.create(
        **gate_fits(masks, deltas, tuple(ids), tasks, 4, 12), inputs={}, provenance={}
    )
    beta.write(path)
    return beta


def test_frozen_bank_records_the_beta_it_came_from(tmp_path: Path, small_world: Path) -> None:
    from skilleval.analysis.ranking import freeze_bank
    from skilleval.skills.bank import load_bank

    bank = small_world / "banks" / "draft16.md"
    ids = [s.chunk_id for s in load_bank(bank)]
    beta = write_beta(tmp_path / "beta.json", ids, common=0.02)
    top = freeze_bank(
        str(tmp_path / "beta.json"), str(bank), "top", 4, None, str(tmp_path / "top.json")
    )
    assert top["chunk_ids"] == beta.signed_order[:4]
    assert len(top["beta_sha256"]) == 64
    predicted = top["predicted_effect"]
    assert predicted["estimate"] == pytest.approx(sum(top["betas"].values()))
    w = np.array([1.0 if c in top["chunk_ids"] else 0.0 for c in ids])
    sigma = np.asarray(beta.covariance["matrix"])
    assert predicted["standard_error"] == pytest.approx(float(np.sqrt(w @ sigma @ w)))
    assert predicted["ci_low"] < predicted["estimate"] < predicted["ci_high"]
    # Under the intercept fit the same bank is predicted as the common effect plus its
    # chunks' own betas, with the error of that sum.
    other = top["predicted_effect_intercept_fit"]
    fit = beta.intercept_fit
    own = {c["chunk_id"]: c["beta"] for c in fit["chunks"]}
    assert other["estimate"] == pytest.approx(
        fit["intercept"]["beta"] + sum(own[c] for c in top["chunk_ids"])
    )
    w1 = np.concatenate([[1.0], w])
    assert other["standard_error"] == pytest.approx(
        float(np.sqrt(w1 @ np.asarray(fit["covariance"]["matrix"]) @ w1))
    )
    assert top["registered"] is None
    reloaded = load_bank(tmp_path / "top.json", 4)
    assert [s.chunk_id for s in reloaded] == top["chunk_ids"]
    assert all(s.hints for s in reloaded)


def test_a_common_effect_lands_on_every_memo_beta_and_the_intercept_fit_separates_it() -> None:
    ids = [f"c{i:02d}" for i in range(16)]
    masks, _, tasks, true = bank_gate(ids, 0.0)
    common = 0.02
    # Noise-free deltas: what each fit estimates, exactly.
    deltas = masks @ true + common * (masks.sum(axis=1) > 0)
    memo = fit_gate(masks, deltas, tuple(ids), tasks)
    with_intercept = fit_gate(masks, deltas, tuple(ids), tasks, intercept=True)
    loading = common_effect_loading(masks)
    np.testing.assert_allclose(memo.beta - true, common * loading, atol=1e-12)
    # 16 chunks in with probability 1/2: each beta takes about 1 / 8.5 of the common effect.
    assert loading.mean() == pytest.approx(1 / 8.5, rel=0.05)
    np.testing.assert_allclose(with_intercept.chunk_beta, true, atol=1e-12)
    assert with_intercept.beta[0] == pytest.approx(common)
    assert with_intercept.terms[0] == "(any skills)" and with_intercept.terms[1:] == tuple(ids)


def test_the_comparison_flags_chunks_whose_sign_or_bank_differs_between_the_fits() -> None:
    ids = [f"c{i:02d}" for i in range(16)]
    masks, deltas, tasks, true = bank_gate(ids, 1.0)
    fits = gate_fits(masks, deltas, tuple(ids), tasks, 4, 12)
    rows = {r["chunk_id"]: r for r in fits["comparison"]["chunks"]}
    # A large common effect makes every memo beta positive; the intercept fit keeps the
    # clearly negative true effects negative, so those chunks differ in sign.
    assert all(c["beta"] > 0 for c in fits["chunks"])
    negative = {c for c, t in zip(ids, true, strict=True) if t < -0.015}
    assert negative and negative <= set(fits["comparison"]["sign_differs"])
    for chunk in fits["comparison"]["sign_differs"]:
        assert np.sign(rows[chunk]["beta_memo"]) != np.sign(rows[chunk]["beta_intercept_fit"])
    assert fits["comparison"]["common_effect"] == pytest.approx(1.0, abs=0.02)
    # Membership: the flags agree with the two fits' own Top-4/Bottom-4.
    for fit_key, selection_key in (("chunks", "selection_memo"),):
        ranked = sorted(fits[fit_key], key=lambda c: (-c["beta"], c["chunk_id"]))
        assert {c["chunk_id"] for c in ranked[:4]} == {
            c for c, r in rows.items() if "top" in r[selection_key]
        }
    ranked = sorted(fits["intercept_fit"]["chunks"], key=lambda c: (-c["beta"], c["chunk_id"]))
    assert {c["chunk_id"] for c in ranked[-4:]} == {
        c for c, r in rows.items() if "bottom" in r["selection_intercept_fit"]
    }
    assert set(fits["comparison"]["selection_differs"]) == {
        c for c, r in rows.items() if r["selection_memo"] != r["selection_intercept_fit"]
    }


def test_a_registered_bank_is_used_as_listed_and_an_unknown_id_is_refused(
    tmp_path: Path, small_world: Path
) -> None:
    from skilleval.analysis.ranking import freeze_bank
    from skilleval.errors import SkillevalError
    from skilleval.skills.bank import load_bank

    bank = small_world / "banks" / "draft16.md"
    ids = [s.chunk_id for s in load_bank(bank)]
    write_beta(tmp_path / "beta.json", ids)
    listed = [ids[5], ids[0], ids[11], ids[3]]
    registered = {"chunk_ids": listed, "drawn_by": "the lab's rank script", "note": "memo 000"}
    frozen = freeze_bank(
        str(tmp_path / "beta.json"),
        str(bank),
        "random",
        4,
        20260907,
        str(tmp_path / "random.json"),
        registered,
    )
    assert frozen["chunk_ids"] == listed
    assert frozen["registered"] == registered and frozen["rng"] is None
    assert "registered" in frozen["rule"] and "the lab's rank script" in frozen["rule"]
    drawn = select_chunks(GateBeta.read(tmp_path / "beta.json").chunks, "random", 4, 20260907)
    assert drawn != listed  # the listed subset, not the seed's draw
    with pytest.raises(SkillevalError, match="draft16-99"):
        freeze_bank(
            str(tmp_path / "beta.json"),
            str(bank),
            "random",
            4,
            20260907,
            str(tmp_path / "bad.json"),
            {**registered, "chunk_ids": [*listed[:3], "draft16-99"]},
        )


def test_experiment_b_gives_no_interval_when_a_resample_has_no_spearman() -> None:
    rng = np.random.default_rng(3)
    tasks = [f"t{i}" for i in range(20) for _ in range(3)]
    predicted = rng.normal(size=60)
    measured = predicted + rng.normal(size=60)
    distribution = cluster_bootstrap_spearman(predicted, measured, tasks, 200, rng)
    defined = percentile_interval(distribution, 0.95)
    assert defined["undefined_resamples"] == 0 and "no_interval_because" not in defined
    assert -1 < defined["ci_low"] < defined["ci_high"] < 1
    expected = np.quantile(distribution, [0.025, 0.975])
    assert [defined["ci_low"], defined["ci_high"]] == pytest.approx(expected, rel=1e-12)
    # Two tasks, one of them with a constant measured delta: some resamples hold only it.
    ties = cluster_bootstrap_spearman(
        np.array([0.1, 0.5, 0.2, 0.9]),
        np.array([0.0, 0.0, 1.0, 2.0]),
        ["a", "a", "b", "b"],
        200,
        rng,
    )
    undefined = int(np.isnan(ties).sum())
    assert 0 < undefined < 200
    refused = percentile_interval(ties, 0.95)
    assert refused["ci_low"] is None and refused["ci_high"] is None
    assert refused["undefined_resamples"] == undefined
    assert f"{undefined} of 200 resamples" in refused["no_interval_because"]
