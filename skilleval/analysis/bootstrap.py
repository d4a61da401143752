"""Task-aligned paired bootstrap of a difference in means.

Modelled on ``scipy.stats.bootstrap``: the generator is injected, bad input raises, and
the result keeps the resample distribution. Four intervals (docs/statistics.md compares
their coverage): percentile and bootstrap-t (studentized) are computed here in vectorised
numpy, BCa delegates to scipy.stats.bootstrap and the paired t interval to
scipy.stats.ttest_rel. Every method draws the same resamples of whole tasks, from which the
standard error and, for the bootstrap methods, the p-value come; the t interval's p-value
is its test's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skilleval.analysis.rng import rng_record
from skilleval.config.model import INTERVAL_METHODS, IntervalMethod
from skilleval.errors import ComparisonError

Method = IntervalMethod
BATCH = 2000


@dataclass(frozen=True)
class AlignedPairs:
    task_ids: tuple[str, ...]
    control: np.ndarray
    treatment: np.ndarray

    @property
    def deltas(self) -> np.ndarray:
        deltas: np.ndarray = self.treatment - self.control
        return deltas


def per_task_means(
    records: Iterable[Mapping[str, Any]], metric: str, label: str
) -> dict[str, float]:
    """Average repeats per task; refuse duplicate (task, repeat) rows and missing metrics."""
    values: dict[str, list[float]] = defaultdict(list)
    seen: set[tuple[str, int]] = set()
    for record in records:
        key = (str(record["task_id"]), int(record.get("repeat", 0)))
        if key in seen:
            raise ComparisonError(f"{label}: duplicate record for task {key[0]} repeat {key[1]}")
        seen.add(key)
        if metric not in record:
            available = sorted(k for k in record if k == "reward" or k.startswith("r_"))
            raise ComparisonError(f"{label}: no metric {metric!r}; runs record {available}")
        values[key[0]].append(float(record[metric]))
    repeats = {len(v) for v in values.values()}
    if len(repeats) > 1:
        raise ComparisonError(f"{label}: tasks have unequal repeat counts {sorted(repeats)}")
    return {task: float(np.mean(v)) for task, v in values.items()}


def align(
    control: Mapping[str, float], treatment: Mapping[str, float], labels: tuple[str, str]
) -> AlignedPairs:
    if set(control) != set(treatment):
        only_c = sorted(set(control) - set(treatment))
        only_t = sorted(set(treatment) - set(control))
        raise ComparisonError(
            f"task sets differ: {len(only_c)} task(s) only in {labels[0]} "
            f"(e.g. {only_c[:3]}), {len(only_t)} only in {labels[1]} (e.g. {only_t[:3]}); "
            "compare runs over the same split"
        )
    if not control:
        raise ComparisonError("no tasks to compare")
    ids = tuple(sorted(control))
    return AlignedPairs(
        ids,
        np.array([control[t] for t in ids], dtype=np.float64),
        np.array([treatment[t] for t in ids], dtype=np.float64),
    )


@dataclass(frozen=True)
class PairedBootstrapResult:
    estimate: float
    ci_low: float
    ci_high: float
    confidence: float
    n_pairs: int
    n_resamples: int
    seed: int | None
    method: str
    standard_error: float
    control_mean: float
    treatment_mean: float
    p_value: float
    distribution: np.ndarray = field(repr=False)

    def as_json(self) -> dict[str, Any]:
        return {
            "estimate": self.estimate,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "confidence": self.confidence,
            "n_pairs": self.n_pairs,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "rng": rng_record(self.seed),
            "method": self.method,
            "standard_error": self.standard_error,
            "p_value": self.p_value,
            "control_mean": self.control_mean,
            "treatment_mean": self.treatment_mean,
        }


def paired_bootstrap(
    pairs: AlignedPairs,
    *,
    rng: np.random.Generator,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    method: Method = "percentile",
    seed: int | None = None,
) -> PairedBootstrapResult:
    """Bootstrap CI of mean(treatment - control) resampling whole tasks."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 100:
        raise ValueError(f"n_resamples must be >= 100 for a usable interval, got {n_resamples}")
    deltas = pairs.deltas
    n = deltas.size
    if n < 2:
        raise ValueError(f"need at least 2 paired tasks, got {n}")
    if not np.all(np.isfinite(deltas)):
        raise ValueError("deltas contain NaN or infinite values")
    if method not in INTERVAL_METHODS:
        raise ValueError(f"method must be one of {', '.join(INTERVAL_METHODS)}, got {method!r}")
    if method == "BCa":
        import scipy.stats  # lazy: 1.7 s of import that the other methods do not need

        res = scipy.stats.bootstrap(
            (deltas,),
            np.mean,
            n_resamples=n_resamples,
            confidence_level=confidence,
            method="BCa",
            rng=rng,
            vectorized=True,
        )
        distribution = res.bootstrap_distribution
        low, high = res.confidence_interval.low, res.confidence_interval.high
        p_value = bootstrap_p_value(distribution)
    else:
        distribution, spreads = resample_means(deltas, rng, n_resamples, method == "studentized")
        low, high, p_value = INTERVALS[method](deltas, distribution, spreads, confidence)
    return PairedBootstrapResult(
        estimate=float(deltas.mean()),
        ci_low=float(low),
        ci_high=float(high),
        confidence=confidence,
        n_pairs=n,
        n_resamples=n_resamples,
        seed=seed,
        method=method,
        standard_error=float(np.std(distribution, ddof=1)),
        control_mean=float(pairs.control.mean()),
        treatment_mean=float(pairs.treatment.mean()),
        p_value=p_value,
        distribution=distribution,
    )


def bootstrap_p_value(distribution: np.ndarray) -> float:
    """Two-sided bootstrap p-value of "no difference": twice the smaller share of the
    resample distribution on either side of 0, with the +1 correction that keeps it
    above 0 ((count + 1) / (B + 1), Davison & Hinkley 1997, eq. 4.11)."""
    below = int(np.count_nonzero(distribution <= 0))
    above = int(np.count_nonzero(distribution >= 0))
    tail = (min(below, above) + 1) / (distribution.size + 1)
    return min(1.0, 2 * tail)


def resample_means(
    deltas: np.ndarray, rng: np.random.Generator, n_resamples: int, spread: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The mean of each resample of whole tasks and, where ``spread`` asks, its standard
    deviation (else zeros)."""
    n = deltas.size
    means, spreads = np.empty(n_resamples), np.zeros(n_resamples)
    for start in range(0, n_resamples, BATCH):
        stop = min(start + BATCH, n_resamples)
        resampled = deltas[rng.integers(0, n, size=(stop - start, n))]
        means[start:stop] = resampled.mean(axis=1)
        if spread:
            spreads[start:stop] = resampled.std(axis=1, ddof=1)
    return means, spreads


Interval = tuple[float, float, float]  # low, high, p-value


def percentile_interval(
    deltas: np.ndarray, means: np.ndarray, spreads: np.ndarray, confidence: float
) -> Interval:
    alpha = 1 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high), bootstrap_p_value(means)


def studentized_interval(
    deltas: np.ndarray, means: np.ndarray, spreads: np.ndarray, confidence: float
) -> Interval:
    """Bootstrap-t: the quantiles of each resample's t statistic about the sample mean,
    scaled by the sample's standard error (Efron & Tibshirani 1993, §12.5). A resample of
    one repeated value has no spread; its statistic is 0 when its mean is the sample's and
    infinite otherwise, as the limit gives."""
    n, alpha = deltas.size, 1 - confidence
    mean, error = float(deltas.mean()), float(deltas.std(ddof=1)) / np.sqrt(n)
    offset = means - mean
    with np.errstate(divide="ignore", invalid="ignore"):
        unspread = np.where(offset == 0, 0.0, np.sign(offset) * np.inf)
        t = np.where(spreads > 0, offset / (spreads / np.sqrt(n)), unspread)
    t_low, t_high = np.quantile(t, [alpha / 2, 1 - alpha / 2])
    return mean - t_high * error, mean - t_low * error, bootstrap_p_value(means)


def t_interval(
    deltas: np.ndarray, means: np.ndarray, spreads: np.ndarray, confidence: float
) -> Interval:
    """The paired t interval and test (scipy.stats.ttest_rel on the aligned pairs); no
    spread at all gives the point interval and p = 1 or 0."""
    import scipy.stats

    mean = float(deltas.mean())
    if float(deltas.std()) == 0:
        return mean, mean, 1.0 if mean == 0 else 0.0
    test = scipy.stats.ttest_rel(deltas, np.zeros_like(deltas))
    interval = test.confidence_interval(confidence)
    return float(interval.low), float(interval.high), float(test.pvalue)


INTERVALS = {
    "percentile": percentile_interval,
    "studentized": studentized_interval,
    "t": t_interval,
}
