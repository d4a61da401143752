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
    fit = fit_gate(masks, deltas, ("a", "b", "c", "d"))
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
    with pytest.raises(ValueError, match=message):
        fit_gate(masks, deltas, ("a", "b") if masks.shape[1] == 2 else ("a", "b", "c"))


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
        diagnostics={},
        signed_order=ids[::-1],
        inputs={},
        provenance={},
    ).write(beta_path)
    frozen = freeze_bank(str(beta_path), str(bank), "top", 4, None, str(tmp_path / "top.json"))
    assert frozen["chunk_ids"] == ids[::-1][:4]
    assert len(frozen["beta_sha256"]) == 64
    reloaded = load_bank(tmp_path / "top.json", 4)
    assert [s.chunk_id for s in reloaded] == frozen["chunk_ids"]
    assert all(s.hints for s in reloaded)
