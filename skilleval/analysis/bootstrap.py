"""Task-aligned paired bootstrap of a difference in means.

Modelled on ``scipy.stats.bootstrap``: the generator is injected, bad input raises, and
the result keeps the resample distribution. Percentile intervals are computed here in
vectorised numpy (fast enough for 10,000 resamples of every contrast in well under a
second); BCa delegates to scipy.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from skilleval.analysis.rng import rng_record
from skilleval.errors import ComparisonError

Method = Literal["percentile", "BCa"]
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
    distribution: np.ndarray = field(repr=False)

    @property
    def p_value(self) -> float:
        """Two-sided bootstrap p-value of "no difference": twice the smaller share of the
        resample distribution on either side of 0, with the +1 correction that keeps it
        above 0 ((count + 1) / (B + 1), Davison & Hinkley 1997, eq. 4.11)."""
        below = int(np.count_nonzero(self.distribution <= 0))
        above = int(np.count_nonzero(self.distribution >= 0))
        tail = (min(below, above) + 1) / (self.distribution.size + 1)
        return min(1.0, 2 * tail)

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
    alpha = 1 - confidence
    if method == "percentile":
        distribution = np.empty(n_resamples)
        for start in range(0, n_resamples, BATCH):
            stop = min(start + BATCH, n_resamples)
            idx = rng.integers(0, n, size=(stop - start, n))
            distribution[start:stop] = deltas[idx].mean(axis=1)
        low, high = np.quantile(distribution, [alpha / 2, 1 - alpha / 2])
    elif method == "BCa":
        import scipy.stats  # lazy: 1.7 s of import that a percentile contrast does not need

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
    else:
        raise ValueError(f"method must be 'percentile' or 'BCa', got {method!r}")
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
        distribution=distribution,
    )
