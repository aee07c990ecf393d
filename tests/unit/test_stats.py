"""Generic statistics: figures pinned to the last bit.

The expected numbers below were computed by the statistics code as it stood before
``convbench/stats.py`` gathered it (``results/stats.py`` and ``compare/stats.py`` at
1873542), on the fixed inputs here.  Exact equality, not approx: a result file or a verdict
must not change because the code that computes it moved.  The bootstrap is seeded, so these
figures depend on the resampling order and on how the interval's quantiles are spelled;
level 0.991 is one where ``np.percentile(x, 100 * t)`` and ``np.quantile(x, t)`` differ in
the last bit, so it would catch the median CI and the ratio CI being forced into one
spelling.
"""

from __future__ import annotations

import numpy as np
import pytest

from convbench import stats
from convbench.compare import decision

# Per-call times (s) of a baseline and a ~11% slower current run, and the in-run reference
# kernel's times of the same rounds.
BASE = [1.0213, 0.9874, 1.0532, 1.0117, 0.9731, 1.1046, 1.0329, 0.9952, 1.0008, 1.0441,
        1.0815, 0.9637]
CUR = [1.1224, 1.0968, 1.1507, 1.1139, 1.2113, 1.0842, 1.1371, 1.1025, 1.1836, 1.1449,
       1.0733, 1.1658]
REF = [0.5102, 0.4987, 0.5231, 0.4911, 0.5046, 0.5318, 0.5124, 0.5003, 0.4979, 0.5207,
       0.5402, 0.4856]


def test_summary_is_unchanged() -> None:
    assert stats.summarize(BASE) == {
        "median_s": 1.0165000000000002, "mean_s": 1.0224583333333335,
        "stdev_s": 0.04285564476097387, "min_s": 0.9637, "max_s": 1.1046,
        "iqr_s": 0.05312500000000009, "ci_low_s": 0.9913000000000001,
        "ci_high_s": 1.0486499999999999}


def test_ratio_summary_is_unchanged() -> None:
    assert stats.ratio_summary(BASE, REF) == {
        "ref_ratio": 2.0036108051510126, "ref_ratio_ci_low": 1.9868808327853371,
        "ref_ratio_ci_high": 2.014594862549286}
    assert stats.ratio_summary(BASE[:6], REF[:6]) == {
        "ref_ratio": 2.0075728883407056, "ref_ratio_ci_low": 1.9542030245741584,
        "ref_ratio_ci_high": 2.068582942606297}


def test_bootstrap_intervals_are_unchanged_at_an_odd_level() -> None:
    ratios = np.asarray(BASE) / np.asarray(REF)
    assert stats.bootstrap_median_ci(ratios, level=0.991) == (
        1.9845448229750728, 2.0310782849262354)
    assert stats.bootstrap_ratio_ci(np.asarray(BASE), np.asarray(CUR), 0.991) == (
        1.0513517379487916, 1.1709280209427595)


def test_mann_whitney_p_is_unchanged() -> None:
    assert stats.mann_whitney_p(np.asarray(CUR), np.asarray(BASE)) == 0.00012334575440397442
    assert stats.mann_whitney_p(np.asarray(CUR[:7]), np.asarray(BASE[:5])) == (
        0.0025252525252525255)


def test_bootstrap_interval_is_seeded_and_brackets_the_median() -> None:
    rng = np.random.default_rng(3)
    values = rng.lognormal(0, 0.2, 15)
    low, high = stats.bootstrap_median_ci(values)
    assert (low, high) == stats.bootstrap_median_ci(values)
    assert low <= np.median(values) <= high
    summary = stats.summarize([1.0, 2.0, 3.0, 4.0])
    assert summary["median_s"] == 2.5 and summary["iqr_s"] == 1.5 and summary["min_s"] == 1


def test_min_attainable_p() -> None:
    assert stats.min_attainable_p(5, 5) == pytest.approx(2 / 252)
    assert stats.min_attainable_p(4, 4) > decision.DEFAULT_ALPHA


def test_one_process_keeps_the_pooled_interval() -> None:
    assert stats.summarize(BASE, [0] * len(BASE)) == stats.summarize(BASE)
    assert stats.ratio_summary(BASE, REF, [4] * len(BASE)) == stats.ratio_summary(BASE, REF)


def test_several_processes_are_the_resampled_unit() -> None:
    # one of five processes ran 8% slow for its whole life.  Pooled, its 10 values of 50
    # never carry the median; resampled as units, 6% of the draws hold it three times or
    # more (the next run may have that many slow processes), so the interval reaches it
    rng = np.random.default_rng(7)
    values = np.concatenate([1.0 + 0.002 * rng.standard_normal(10) for _ in range(4)]
                            + [1.08 + 0.002 * rng.standard_normal(10)])
    groups = np.repeat([0, 1, 2, 3, 4], 10)
    pooled = stats.bootstrap_median_ci(values)
    low, high = stats.bootstrap_median_ci(values, groups=groups)
    assert pooled[1] < 1.01 and high > 1.07
    assert low <= np.median(values) <= high
    summary = stats.summarize(values, groups)
    assert (summary["ci_low_s"], summary["ci_high_s"]) == (low, high)


def test_groups_of_unequal_size_are_drawn_at_their_own_size() -> None:
    # process 0 left one value, process 1 four: a resample draws 1 value for each slot
    # process 0 fills and 4 for each slot process 1 fills, so its median is 0 exactly when
    # both slots drew process 0 (1 in 4), else 1; padding drawn as a value would give 0.5
    medians = stats._resampled_grouped_medians(
        np.random.default_rng(1), np.array([0.0, 1, 1, 1, 1]), np.array([0, 1, 1, 1, 1]),
        4000)
    assert set(np.unique(medians)) == {0.0, 1.0}
    assert abs(np.mean(medians == 0.0) - 0.25) < 0.03
