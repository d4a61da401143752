"""The records analysis writes: contrasts, verdicts, Gate A betas and frozen banks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from skilleval.storage.records import Check, Record

VerdictWord = Literal["improves", "regresses", "inconclusive", "descriptive", "invalid"]


class Contrast(Record):
    """``treatment - control`` on one metric; without an estimate when a check failed."""

    kind = "contrast"
    name: str
    causal: bool
    checks: list[Check]
    control: str
    treatment: str
    error: str | None
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    metric: str | None = None
    control_fingerprint: str | None = None
    treatment_fingerprint: str | None = None
    protocol_fingerprint: str | None = None
    control_mean: float | None = None
    treatment_mean: float | None = None
    confidence: float | None = None
    method: str | None = None
    n_pairs: int | None = None
    n_resamples: int | None = None
    seed: int | None = None
    rng: dict[str, Any] | None = None
    standard_error: float | None = None
    p_value: float | None = None
    distribution_quantiles: dict[str, float] | None = None
    provenance: dict[str, Any]


class Verdict(Record):
    kind = "verdict"
    name: str
    control: str
    treatment: str
    metric: str | None
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float | None
    verdict: VerdictWord
    reason: str
    checks: list[Check]
    p_value: float | None = None
    method: str | None = None


class VerdictFamily(Record):
    """The causal verdicts of the paper as one family: Holm-adjusted p-values."""

    kind = "verdict_family"
    method: str
    family_wise_level: float
    members: list[dict[str, Any]]
    excluded: list[dict[str, Any]]
    note: str


class GateBeta(Record):
    """The memo's no-intercept fit (``chunks``, ``covariance``) and, as a sensitivity
    analysis, the same design with an intercept (``intercept_fit``), compared per chunk."""

    kind = "gate_beta"
    chunks: list[dict[str, Any]]
    covariance: dict[str, Any]
    diagnostics: dict[str, Any]
    power: dict[str, Any]
    signed_order: list[str]
    intercept_fit: dict[str, Any]
    comparison: dict[str, Any]
    inputs: dict[str, Any]
    provenance: dict[str, Any]

    def betas(self) -> dict[str, float]:
        return {c["chunk_id"]: float(c["beta"]) for c in self.chunks}

    def combination(
        self, weights: Mapping[str, float], intercept_fit: bool = False
    ) -> tuple[float, float]:
        """(estimate, clustered standard error) of sum_i w_i beta_i, under the memo's fit
        or the intercept fit (whose intercept term a weight may name too)."""
        fit = self.intercept_fit if intercept_fit else self.as_json()
        terms = list(fit["chunks"])
        if intercept_fit:
            terms = [{"chunk_id": fit["covariance"]["chunk_ids"][0], **fit["intercept"]}, *terms]
        coefficients = {c["chunk_id"]: float(c["beta"]) for c in terms}
        ids = fit["covariance"]["chunk_ids"]
        w = np.array([weights.get(c, 0.0) for c in ids])
        beta = np.array([coefficients[c] for c in ids])
        sigma = np.asarray(fit["covariance"]["matrix"])
        return float(w @ beta), float(np.sqrt(max(w @ sigma @ w, 0.0)))


class FrozenBank(Record):
    kind = "frozen_bank"
    name: str
    rule: str
    k: int
    seed: int | None
    rng: dict[str, Any] | None
    chunk_ids: list[str]
    chunks: list[dict[str, str]]
    betas: dict[str, float]
    predicted_effect: dict[str, Any]
    predicted_effect_intercept_fit: dict[str, Any]
    registered: dict[str, Any] | None
    beta_sha256: str
    source_bank: str
    source_bank_hash: str


class GateDesign(Record):
    """Which draft chunks each masked run shows each task (one 0/1 per chunk). The masked
    runs read the file as plain JSON (runs/resolve.py): a model type there would be
    evidence code, and moving it in would change every model run's identity."""

    kind = "gate_design"
    chunk_ids: list[str]
    seed: int
    rng: dict[str, Any]
    inclusion_probability: float
    runs: dict[str, dict[str, list[int]]]


class TruthCheck(Record):
    """Default world only: how the betas of both fits meet the known chunk effects."""

    kind = "truth_check"
    spearman_beta_vs_truth: float
    spearman_p_value: float
    decisive_chunks: int
    decisive_signs_right: int
    covered: int
    chunks: list[dict[str, Any]]
    intercept_fit: dict[str, Any]
    true_common_effect: float
    mean_beta_minus_truth: float
    note: str

    def true_effects(self) -> dict[str, float]:
        return {c["chunk_id"]: float(c["true_effect"]) for c in self.chunks}


class ExperimentB(Record):
    """Spearman of predicted against measured deltas on fresh masks, with its interval."""

    kind = "experiment_b"
    spearman: float | None
    correlates: str
    ci_low: float | None
    ci_high: float | None
    confidence: float
    undefined_resamples: int
    no_interval_because: str | None = None
    interval: str
    n_observations: int
    n_tasks: int
    n_resamples: int
    seed: int
    rng: dict[str, Any]
    beta_sha256: str
    provenance: dict[str, Any]
