from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from skilleval.analysis.design import build_design
from skilleval.analysis.gate import fit_gate
from skilleval.analysis.ranking import select_chunks
from skilleval.analysis.records import GateBeta


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
    beta = GateBeta.create(**fit.as_json(), power={}, signed_order=[], inputs={}, provenance={})
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
    assert list(a["runs"]) == ["masked-01", "masked-02", "masked-03"]
    assert all(
        set(run) == {"t1", "t2"} and all(len(m) == 3 for m in run.values())
        for run in a["runs"].values()
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


def test_frozen_bank_records_the_beta_it_came_from(tmp_path: Path, small_world: Path) -> None:
    from skilleval.analysis.ranking import freeze_bank
    from skilleval.skills.bank import load_bank

    bank = small_world / "banks" / "draft16.md"
    ids = [s.chunk_id for s in load_bank(bank)]
    beta_path = tmp_path / "beta.json"
    GateBeta.create(
        chunks=[{"chunk_id": c, "beta": i / 100} for i, c in enumerate(ids)],
        covariance={
            "type": "cluster",
            "groups": "task_id",
            "n_clusters": 48,
            "chunk_ids": ids,
            "matrix": (np.eye(len(ids)) * 1e-4).tolist(),
        },
        power={},
        diagnostics={},
        signed_order=ids[::-1],
        inputs={},
        provenance={},
    ).write(beta_path)
    frozen = freeze_bank(str(beta_path), str(bank), "top", 4, None, str(tmp_path / "top.json"))
    assert frozen["chunk_ids"] == ids[::-1][:4]
    assert len(frozen["beta_sha256"]) == 64
    predicted = frozen["predicted_effect"]
    assert predicted["estimate"] == pytest.approx(sum(frozen["betas"].values()))
    assert predicted["standard_error"] == pytest.approx(np.sqrt(4 * 1e-4))
    assert predicted["ci_low"] < predicted["estimate"] < predicted["ci_high"]
    reloaded = load_bank(tmp_path / "top.json", 4)
    assert [s.chunk_id for s in reloaded] == frozen["chunk_ids"]
    assert all(s.hints for s in reloaded)
