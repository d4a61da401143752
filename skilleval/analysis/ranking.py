"""Ranking of memo §2 C after the gate: frozen Top/Bottom/Random banks, checks, experiment B.

Banks follow from the signed beta by a declared rule, fixed before any result is seen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.stats

from skilleval.analysis.contrast import RunRecords
from skilleval.analysis.gate import gate_observations
from skilleval.analysis.records import FrozenBank, GateBeta
from skilleval.errors import SkillevalError
from skilleval.provenance.record import provenance
from skilleval.skills.bank import bank_hash, load_bank
from skilleval.storage.records import read_record, write_record


def select_chunks(
    chunks: Sequence[Mapping[str, Any]], rule: str, k: int, seed: int | None
) -> list[str]:
    """Top: largest signed beta first; bottom: smallest first; random: seeded draw."""
    ranked = sorted(chunks, key=lambda c: (-c["beta"], c["chunk_id"]))
    if k > len(ranked):
        raise SkillevalError(f"k = {k} exceeds the {len(ranked)} ranked chunks")
    if rule == "top":
        return [c["chunk_id"] for c in ranked[:k]]
    if rule == "bottom":
        return [c["chunk_id"] for c in reversed(ranked[-k:])]
    if rule == "random" and seed is not None:
        ids = sorted(c["chunk_id"] for c in ranked)
        return [str(x) for x in np.random.default_rng(seed).choice(ids, size=k, replace=False)]
    raise ValueError(f"unknown selection rule {rule!r} (seed {seed})")


def freeze_bank(
    beta_path: str, bank_path: str, rule: str, k: int, seed: int | None, output: str
) -> dict[str, Any]:
    beta = GateBeta.read(beta_path)
    skills = {s.chunk_id: s for s in load_bank(bank_path)}
    chunk_ids = select_chunks(beta.chunks, rule, k, seed)
    frozen = {
        "name": f"{rule}-{k}" + (f"-{seed}" if seed is not None else ""),
        "rule": {
            "top": "largest signed beta first",
            "bottom": "smallest signed beta first",
            "random": f"uniform draw of {k} chunks, numpy seed {seed}",
        }[rule],
        "k": k,
        "seed": seed,
        "chunk_ids": chunk_ids,
        "chunks": [{"id": c, "text": skills[c].text} for c in chunk_ids],
        "betas": {c["chunk_id"]: c["beta"] for c in beta.chunks if c["chunk_id"] in chunk_ids},
        "beta_sha256": beta.content_sha256(),
        "source_bank": bank_path,
        "source_bank_hash": bank_hash(list(skills.values())),
    }
    FrozenBank.create(**frozen).write(output)
    return frozen


def truth_check(
    beta_path: str, truth_path: str, checkpoint: str, bank: str, split: str, output: str
) -> dict[str, Any]:
    """Default world only: do the betas recover the known chunk effects?"""
    beta = GateBeta.read(beta_path)
    truth = read_record(truth_path, "ground_truth")["splits"][split][checkpoint]["chunks"][bank]
    rows = []
    for chunk in beta.chunks:
        true = truth[chunk["chunk_id"]]
        decisive = abs(true) > 2 * chunk["standard_error"]
        rows.append(
            {
                **chunk,
                "true_effect": true,
                "decisive": decisive,
                "sign_right": bool(np.sign(chunk["beta"]) == np.sign(true)),
            }
        )
    rho = scipy.stats.spearmanr([r["beta"] for r in rows], [r["true_effect"] for r in rows])
    decisive = [r for r in rows if r["decisive"]]
    result = {
        "spearman_beta_vs_truth": float(rho.statistic),
        "spearman_p_value": float(rho.pvalue),
        "decisive_chunks": len(decisive),
        "decisive_signs_right": sum(r["sign_right"] for r in decisive),
        "chunks": rows,
        "note": "decisive: |true effect| > 2 x the beta's standard error",
    }
    write_record(output, "truth_check", result)
    return result


def experiment_b(
    beta_path: str,
    design_path: str,
    bare_dir: str,
    masked_dirs: Mapping[str, str],
    n_resamples: int,
    seed: int,
    output: str,
) -> dict[str, Any]:
    """Spearman of predicted C^T beta against measured delta on fresh masks, with a CI."""
    beta = GateBeta.read(beta_path)
    design = read_record(design_path, "gate_design")
    coefficients = {c["chunk_id"]: c["beta"] for c in beta.chunks}
    vector = np.array([coefficients[c] for c in design["chunk_ids"]])
    masked = {n: RunRecords.load(d) for n, d in masked_dirs.items()}
    masks, measured = gate_observations(RunRecords.load(bare_dir), masked, design)
    predicted = masks @ vector

    def spearman(x: np.ndarray, y: np.ndarray) -> float:
        return float(scipy.stats.spearmanr(x, y).statistic)

    rho = float(scipy.stats.spearmanr(predicted, measured).statistic)
    ci = scipy.stats.bootstrap(
        (predicted, measured),
        spearman,
        paired=True,
        vectorized=False,
        n_resamples=n_resamples,
        method="percentile",
        rng=np.random.default_rng(seed),
    ).confidence_interval
    result = {
        "spearman": rho,
        "ci_low": float(ci.low),
        "ci_high": float(ci.high),
        "confidence": 0.95,
        "n_observations": int(measured.size),
        "n_resamples": n_resamples,
        "seed": seed,
        "beta_sha256": beta.content_sha256(),
        "provenance": provenance(),
    }
    write_record(output, "experiment_b", result)
    return result
