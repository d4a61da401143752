from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from skilleval.analysis.bootstrap import AlignedPairs, align, paired_bootstrap, per_task_means
from skilleval.errors import ComparisonError


def make_pairs(n: int = 400, effect: float = 0.03, seed: int = 1) -> AlignedPairs:
    rng = np.random.default_rng(seed)
    control = rng.binomial(1, 0.5, n).astype(float)
    flip = rng.random(n) < 0.15
    treatment = np.where(flip, rng.binomial(1, 0.5 + effect, n), control).astype(float)
    return AlignedPairs(tuple(f"t{i}" for i in range(n)), control, treatment)


def test_percentile_ci_matches_scipy_paired_bootstrap() -> None:
    pairs = make_pairs()
    ours = paired_bootstrap(pairs, rng=np.random.default_rng(7), n_resamples=20_000)
    theirs = scipy.stats.bootstrap(
        (pairs.treatment, pairs.control),
        lambda t, c, axis: np.mean(t, axis=axis) - np.mean(c, axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=20_000,
        method="percentile",
        rng=np.random.default_rng(8),
    )
    se = theirs.standard_error
    # Monte-Carlo sd of a 2.5% quantile from 20k resamples is ~0.02 SE per estimate; allow
    # 4 sd of the difference of two, plus one step of the lattice that 0/1 rewards live on.
    tolerance = 0.11 * se + 1 / pairs.deltas.size
    assert ours.ci_low == pytest.approx(theirs.confidence_interval.low, abs=tolerance)
    assert ours.ci_high == pytest.approx(theirs.confidence_interval.high, abs=tolerance)
    assert ours.standard_error == pytest.approx(se, rel=0.05)
    assert ours.estimate == pytest.approx(pairs.treatment.mean() - pairs.control.mean())


def test_result_keeps_distribution_and_is_reproducible_from_seed() -> None:
    pairs = make_pairs()
    a = paired_bootstrap(pairs, rng=np.random.default_rng(3), n_resamples=500, seed=3)
    b = paired_bootstrap(pairs, rng=np.random.default_rng(3), n_resamples=500, seed=3)
    assert a.distribution.shape == (500,)
    np.testing.assert_array_equal(a.distribution, b.distribution)
    assert a.ci_low <= a.estimate <= a.ci_high


def test_bca_uses_scipy_and_brackets_estimate() -> None:
    result = paired_bootstrap(
        make_pairs(), rng=np.random.default_rng(0), n_resamples=2000, method="BCa"
    )
    assert result.method == "BCa"
    assert result.ci_low < result.estimate < result.ci_high


def test_the_t_interval_is_scipy_s_paired_t() -> None:
    pairs = make_pairs()
    result = paired_bootstrap(pairs, rng=np.random.default_rng(0), n_resamples=500, method="t")
    test = scipy.stats.ttest_rel(pairs.treatment, pairs.control)
    interval = test.confidence_interval(0.95)
    assert (result.ci_low, result.ci_high) == pytest.approx((interval.low, interval.high))
    assert result.p_value == pytest.approx(test.pvalue)


def test_the_studentized_interval_follows_the_skew_of_its_t_statistic() -> None:
    """On symmetric data bootstrap-t is near the t interval; on a right-skewed sample its
    interval reaches further right of the mean than left (Efron & Tibshirani, §12.5),
    where the t interval is symmetric by construction."""
    pairs = make_pairs()
    rng = np.random.default_rng

    def interval(p: AlignedPairs, method: str) -> tuple[float, float, float]:
        r = paired_bootstrap(p, rng=rng(4), n_resamples=20_000, method=method)  # type: ignore[arg-type]
        return r.ci_low, r.estimate, r.ci_high

    low, mean, high = interval(pairs, "studentized")
    t_low, _, t_high = interval(pairs, "t")
    assert low == pytest.approx(t_low, abs=0.1 * (t_high - t_low))
    assert high == pytest.approx(t_high, abs=0.1 * (t_high - t_low))
    skewed = rng(5).exponential(1.0, 60)
    pairs = AlignedPairs(tuple(f"t{i}" for i in range(60)), np.zeros(60), skewed)
    low, mean, high = interval(pairs, "studentized")
    assert high - mean > 1.1 * (mean - low)
    t_low, _, t_high = interval(pairs, "t")
    assert t_high - mean == pytest.approx(mean - t_low)


def test_the_methods_we_compute_give_a_point_interval_on_identical_differences() -> None:
    """(scipy's BCa warns and gives nan on a sample with no spread.)"""
    pairs = AlignedPairs(("a", "b", "c"), np.zeros(3), np.full(3, 0.5))
    for method in ("percentile", "studentized", "t"):
        rng = np.random.default_rng(0)
        r = paired_bootstrap(pairs, rng=rng, n_resamples=200, method=method)
        assert (r.ci_low, r.ci_high) == (0.5, 0.5) and r.p_value < 0.05, method


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"confidence": 1.5}, "confidence"),
        ({"n_resamples": 10}, "n_resamples"),
        ({"method": "basic"}, "method"),
    ],
)
def test_invalid_arguments_raise(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        paired_bootstrap(make_pairs(), rng=np.random.default_rng(0), **kwargs)  # type: ignore[arg-type]


def test_degenerate_input_raises() -> None:
    pairs = AlignedPairs(("a",), np.array([1.0]), np.array([0.0]))
    with pytest.raises(ValueError, match="at least 2"):
        paired_bootstrap(pairs, rng=np.random.default_rng(0))
    nan_pairs = AlignedPairs(("a", "b"), np.array([1.0, np.nan]), np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="NaN"):
        paired_bootstrap(nan_pairs, rng=np.random.default_rng(0))


def test_repeats_are_averaged_per_task_before_alignment() -> None:
    records = [
        {"task_id": "a", "repeat": 0, "reward": 1.0},
        {"task_id": "a", "repeat": 1, "reward": 0.0},
        {"task_id": "b", "repeat": 0, "reward": 1.0},
        {"task_id": "b", "repeat": 1, "reward": 1.0},
    ]
    assert per_task_means(records, "reward", "run") == {"a": 0.5, "b": 1.0}


def test_duplicate_rows_and_missing_metric_are_refused() -> None:
    dup = [
        {"task_id": "a", "repeat": 0, "reward": 1.0},
        {"task_id": "a", "repeat": 0, "reward": 0.0},
    ]
    with pytest.raises(ComparisonError, match="duplicate record for task a"):
        per_task_means(dup, "reward", "run")
    with pytest.raises(ComparisonError, match="no metric 'r_nope'"):
        per_task_means(dup[:1], "r_nope", "run")


def test_unequal_task_sets_are_refused_with_examples() -> None:
    with pytest.raises(ComparisonError, match=r"1 task\(s\) only in ctl .*'c'"):
        align({"a": 1.0, "c": 0.0}, {"a": 1.0, "b": 0.0}, ("ctl", "trt"))
