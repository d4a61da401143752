"""Ranking of memo §2 C after the gate: frozen Top/Bottom/Random banks, checks, experiment B.

Banks follow from the signed beta by a declared rule, fixed before any result is seen.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.special  # the t quantile of scipy.stats.t.ppf (see analysis/gate.py)

from skilleval.analysis.contrast import RunRecords
from skilleval.analysis.gate import gate_observations
from skilleval.analysis.rng import rng_record, seeded
from skilleval.errors import SkillevalError
from skilleval.paths import RunFiles
from skilleval.records.analysis import (
    ExperimentB,
    FrozenBank,
    GateBeta,
    GateDesign,
    TruthCheck,
)
from skilleval.records.provenance import provenance
from skilleval.records.world import GroundTruth
from skilleval.skills.bank import bank_hash, load_bank


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
        return [str(x) for x in seeded(seed).choice(ids, size=k, replace=False)]
    raise ValueError(f"unknown selection rule {rule!r} (seed {seed})")


def interval(beta: GateBeta, estimate: float, standard_error: float) -> dict[str, Any]:
    """A 95% t interval (clusters - 1 degrees of freedom) for a combination of betas."""
    df = int(beta.covariance["n_clusters"]) - 1
    half = float(scipy.special.stdtrit(df, 0.975)) * standard_error
    return {
        "estimate": estimate,
        "standard_error": standard_error,
        "ci_low": estimate - half,
        "ci_high": estimate + half,
        "confidence": 0.95,
        "covariance": f"{beta.covariance['type']} by {beta.covariance['groups']}",
    }


def registered_chunks(
    registered: Mapping[str, Any], skills: Mapping[str, Any], k: int
) -> list[str]:
    """A registered bank's ids as listed; refused unless they are k chunks of the bank."""
    ids = list(registered["chunk_ids"])
    unknown = [c for c in ids if c not in skills]
    if unknown or len(set(ids)) != k or len(ids) != k:
        raise SkillevalError(
            f"registered bank {ids} is not {k} distinct chunks of the ranking bank"
            + (f": {unknown} are not in it" if unknown else "")
            + f" (its chunks: {', '.join(skills)})"
        )
    return ids


def freeze_bank(
    beta_path: str,
    bank_path: str,
    rule: str,
    k: int,
    seed: int | None,
    output: str,
    registered: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    beta = GateBeta.read(beta_path)
    skills = {s.chunk_id: s for s in load_bank(bank_path)}
    if registered is not None:
        chunk_ids = registered_chunks(registered, skills, k)
    else:
        chunk_ids = select_chunks(beta.chunks, rule, k, seed)
    weights = dict.fromkeys(chunk_ids, 1.0)
    estimate, se = beta.combination(weights)
    common = {beta.intercept_fit["covariance"]["chunk_ids"][0]: 1.0}
    estimate_intercept_fit, se_intercept_fit = beta.combination(
        weights | common, intercept_fit=True
    )
    drawn = {
        "top": "largest signed beta first",
        "bottom": "smallest signed beta first",
        "random": f"uniform draw of {k} chunks without replacement from the sorted chunk "
        f"ids, numpy.random.default_rng({seed}) (PCG64)",
    }[rule]
    frozen = {
        "name": f"{rule}-{k}" + (f"-{seed}" if seed is not None else ""),
        "rule": drawn
        if registered is None
        else f"registered: the chunk ids as drawn by {registered['drawn_by']} (seed {seed}), "
        "used as listed, not redrawn",
        "k": k,
        "seed": seed,
        "rng": rng_record(seed) if rule == "random" and registered is None else None,
        "registered": dict(registered) if registered is not None else None,
        "chunk_ids": chunk_ids,
        "chunks": [{"id": c, "text": skills[c].text} for c in chunk_ids],
        "betas": {c["chunk_id"]: c["beta"] for c in beta.chunks if c["chunk_id"] in chunk_ids},
        "predicted_effect": interval(beta, estimate, se),
        # The same bank under the sensitivity fit: its chunks' betas plus the common effect
        # of any skills section, both from the fit with an intercept.
        "predicted_effect_intercept_fit": interval(beta, estimate_intercept_fit, se_intercept_fit),
        "beta_sha256": beta.content_sha256(),
        "source_bank": bank_path,
        "source_bank_hash": bank_hash(list(skills.values())),
    }
    FrozenBank.create(**frozen).write(output)
    return frozen


def covered_rows(
    beta: GateBeta, chunks: Sequence[Mapping[str, Any]], truth: Mapping[str, float]
) -> list[dict[str, Any]]:
    rows = []
    for chunk in chunks:
        true = truth[chunk["chunk_id"]]
        band = interval(beta, chunk["beta"], chunk["standard_error"])
        rows.append(
            {
                **chunk,
                "true_effect": true,
                "decisive": abs(true) > 2 * chunk["standard_error"],
                "sign_right": bool(np.sign(chunk["beta"]) == np.sign(true)),
                "ci_low": band["ci_low"],
                "ci_high": band["ci_high"],
                "covered": band["ci_low"] <= true <= band["ci_high"],
            }
        )
    return rows


def truth_check(
    beta_path: str, truth_path: str, checkpoint: str, bank: str, split: str, output: str
) -> TruthCheck:
    """Default world only: do the betas of both fits recover the known chunk effects?

    A chunk's true effect is its own, on top of a skills section (the world's ground
    truth); the intercept fit's intercept is checked against the section's own effect."""
    beta = GateBeta.read(beta_path)
    world = GroundTruth.read(truth_path).splits[split][checkpoint]
    truth = world["chunks"][bank]
    rows = covered_rows(beta, beta.chunks, truth)
    rows_intercept_fit = covered_rows(beta, beta.intercept_fit["chunks"], truth)
    common = beta.intercept_fit["intercept"]
    common_band = interval(beta, common["beta"], common["standard_error"])
    import scipy.stats  # lazy: only the truth check and experiment B rank

    rho = scipy.stats.spearmanr([r["beta"] for r in rows], [r["true_effect"] for r in rows])
    decisive = [r for r in rows if r["decisive"]]
    shift = [r["beta"] - r["true_effect"] for r in rows]
    result = TruthCheck.create(
        **{
            "spearman_beta_vs_truth": float(rho.statistic),
            "spearman_p_value": float(rho.pvalue),
            "decisive_chunks": len(decisive),
            "decisive_signs_right": sum(r["sign_right"] for r in decisive),
            "covered": sum(r["covered"] for r in rows),
            "chunks": rows,
            "intercept_fit": {
                "covered": sum(r["covered"] for r in rows_intercept_fit),
                "chunks": rows_intercept_fit,
                "common_effect": {
                    "estimate": common["beta"],
                    "true_effect": world["skills_section"],
                    "ci_low": common_band["ci_low"],
                    "ci_high": common_band["ci_high"],
                    "covered": common_band["ci_low"]
                    <= world["skills_section"]
                    <= common_band["ci_high"],
                },
            },
            "true_common_effect": world["skills_section"],
            "mean_beta_minus_truth": float(np.mean(shift)),
            "note": "decisive: |true effect| > 2 x the beta's task-clustered standard error; "
            "covered: the true effect lies in the beta's 95% interval; true effect of a chunk: "
            "a skills section with it minus the section alone; mean_beta_minus_truth: the mean "
            "offset of the memo's betas, which a common effect of the section moves",
        }
    )
    result.write(output)
    return result


def cluster_bootstrap_spearman(
    predicted: np.ndarray,
    measured: np.ndarray,
    tasks: Sequence[str],
    n_resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Spearman's rho over resamples of whole tasks (rows of one task share noise); NaN
    for a resample with a constant vector, which percentile_interval counts."""
    by_task: dict[str, list[int]] = {}
    for row, task in enumerate(tasks):
        by_task.setdefault(task, []).append(row)
    groups = [np.asarray(rows) for rows in by_task.values()]
    import scipy.stats  # lazy: only the truth check and experiment B rank

    distribution = np.empty(n_resamples)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.stats.ConstantInputWarning)
        for b in range(n_resamples):
            rows = np.concatenate([groups[i] for i in rng.integers(0, len(groups), len(groups))])
            distribution[b] = scipy.stats.spearmanr(predicted[rows], measured[rows]).statistic
    return distribution


def percentile_interval(distribution: np.ndarray, confidence: float) -> dict[str, Any]:
    """The percentile interval of a bootstrap distribution, or none, saying why, when some
    resamples have no value (Spearman's rho of a constant vector is undefined): an interval
    over the others alone would be conditioned on the data's ties."""
    undefined = int(np.isnan(distribution).sum())
    fields: dict[str, Any] = {"confidence": confidence, "undefined_resamples": undefined}
    if undefined:
        return {
            **fields,
            "ci_low": None,
            "ci_high": None,
            "no_interval_because": f"{undefined} of {distribution.size} resamples have no "
            "value (a constant predicted or measured vector)",
        }
    tail = (1 - confidence) / 2
    low, high = np.quantile(distribution, [tail, 1 - tail])
    return {**fields, "ci_low": float(low), "ci_high": float(high)}


def experiment_b(
    beta_path: str,
    design_path: str,
    bare_files: RunFiles,
    masked_files: Mapping[str, RunFiles],
    n_resamples: int,
    seed: int,
    output: str,
) -> ExperimentB:
    """Spearman of predicted C^T beta against measured delta on fresh masks, with a CI."""
    beta = GateBeta.read(beta_path)
    design = GateDesign.read(design_path)
    coefficients = {c["chunk_id"]: c["beta"] for c in beta.chunks}
    vector = np.array([coefficients[c] for c in design.chunk_ids])
    masked = {n: RunRecords.load(files) for n, files in masked_files.items()}
    masks, measured, tasks = gate_observations(RunRecords.load(bare_files), masked, design)
    predicted = masks @ vector
    import scipy.stats  # lazy: only the truth check and experiment B rank

    rho = float(scipy.stats.spearmanr(predicted, measured).statistic)
    distribution = cluster_bootstrap_spearman(predicted, measured, tasks, n_resamples, seeded(seed))
    result = ExperimentB.create(
        **{
            "spearman": None if np.isnan(rho) else rho,
            "correlates": (
                "Spearman's rho between the predicted delta (a fresh mask's chunks times their "
                "Gate A betas, C^T beta) and the measured delta (the fresh masked run's reward "
                "minus the bare run's), one observation per fresh mask and task"
            ),
            **percentile_interval(distribution, 0.95),
            "interval": "percentile bootstrap resampling whole tasks",
            "n_observations": int(measured.size),
            "n_tasks": len(set(tasks)),
            "n_resamples": n_resamples,
            "seed": seed,
            "rng": rng_record(seed),
            "beta_sha256": beta.content_sha256(),
            "provenance": provenance(),
        }
    )
    result.write(output)
    return result
