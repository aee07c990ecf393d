"""Every generic statistic convbench computes, in one place.

Owns: the location/spread summary of one case's timed values (the timing columns of
``results.schema``), the median of value / reference ratios, the seeded percentile
bootstrap (CI of a median, CI of a ratio of two medians, each with worker processes as
the resampled unit when the values come from several), the Mann-Whitney U p-value and
the smallest p it can attain.  What counts as "slower" is not a statistic but a rule built
on these; it lives in :mod:`convbench.compare.decision`.

The bootstrap is seeded (one seed, one resample count, for everything): resampling is
random, and an unseeded interval would differ every time it is computed.  Seeded, the same
values always give the same interval, so a results file is reproduced bit for bit from its
raw values and ``convbench compare`` gives the same verdict when it is run again on the
same two runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261123


def _resampled_medians(rng: np.random.Generator, values: np.ndarray,
                       resamples: int) -> np.ndarray:
    """Medians of ``resamples`` resamples of ``values`` (with replacement), drawn from ``rng``.

    Indexing with ``rng.integers(0, n, shape)`` draws exactly what
    ``rng.choice(values, shape, replace=True)`` draws (the ratio CI used the latter before
    the two bootstraps shared this; tests/unit/test_stats.py pins the figures).
    """
    return np.median(values[rng.integers(0, values.size, (resamples, values.size))], axis=1)


def bootstrap_median_ci(values: Sequence[float] | np.ndarray, level: float = 0.95,
                        resamples: int = BOOTSTRAP_RESAMPLES,
                        seed: int = BOOTSTRAP_SEED,
                        groups: Sequence[int] | np.ndarray | None = None
                        ) -> tuple[float, float]:
    """Percentile bootstrap interval of the median; (nan, nan) without values.

    ``groups``: the worker process of each value.  Values from more than one process are
    resampled two-level (:func:`_resampled_grouped_medians`), as the gate resamples them:
    a worker process can run at a speed of its own for its whole life (on the Zen 3 host
    a direct kernel ran ~1.6 or ~4.2 ms a call depending on the process,
    tests/test_processes.py), so its values are not independent draws, and an interval
    that pools them as if they were is too narrow.  Two runs of the same code on that host
    (ResNet-50 res5a_branch2c, cold weights, 3 processes of 5 values) had pooled
    intervals that did not meet, 1264-1282 and 1313-1489 us; two-level, 1262-1343 and
    1304-1551."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    g = None if groups is None else np.asarray(groups)
    if g is not None and g.size == v.size and np.unique(g).size > 1:
        medians = _resampled_grouped_medians(rng, v, g, resamples)
    else:
        medians = _resampled_medians(rng, v, resamples)
    # np.percentile here, np.quantile in bootstrap_ratio_ci: the same interval, but at some
    # levels (0.991, say) tail*100/100 rounds differently from tail, so either spelling
    # forced on both would move the last bit of figures already in results files.
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap_ratio_ci(baseline: np.ndarray, current: np.ndarray, level: float,
                       resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile bootstrap CI of median(current) / median(baseline), each side resampled."""
    rng = np.random.default_rng(seed)
    baseline_medians = _resampled_medians(rng, baseline, resamples)  # baseline drawn first
    current_medians = _resampled_medians(rng, current, resamples)
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(current_medians / baseline_medians, [tail, 1.0 - tail])
    return float(lo), float(hi)


def _resampled_grouped_medians(rng: np.random.Generator, values: np.ndarray,
                                groups: np.ndarray, resamples: int) -> np.ndarray:
    """Medians of two-level resamples: the groups (worker processes) drawn with
    replacement, then each drawn group's values drawn with replacement, pooled.

    All resamples at once (a loop over them cost ~50 ms a case, and every ok case of a run
    takes two such intervals): the groups padded to the largest, each slot's draws bounded
    by its own group's size, the padding left out of the median as NaN."""
    members = [values[groups == g] for g in np.unique(groups)]
    sizes = np.array([m.size for m in members])
    padded = np.full((len(members), sizes.max()), np.nan)
    for j, m in enumerate(members):
        padded[j, :m.size] = m
    picks = rng.integers(0, len(members), (resamples, len(members)))
    drawn_sizes = sizes[picks][:, :, None]                       # (resamples, slots, 1)
    within = rng.integers(0, drawn_sizes, (resamples, len(members), sizes.max()))
    drawn = padded[picks[:, :, None], within]
    if sizes.min() != sizes.max():
        drawn[np.arange(sizes.max()) >= drawn_sizes] = np.nan     # beyond the group's size
        return np.nanmedian(drawn.reshape(resamples, -1), axis=1)
    return np.median(drawn.reshape(resamples, -1), axis=1)


def bootstrap_ratio_ci_grouped(baseline: np.ndarray, baseline_groups: np.ndarray,
                               current: np.ndarray, current_groups: np.ndarray,
                               level: float, resamples: int = BOOTSTRAP_RESAMPLES,
                               seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile CI of median(current) / median(baseline) with the groups (the worker
    processes each value came from) as the resampled unit: a bias that one process carries
    widens the interval instead of passing for a change (hierarchical bootstrap)."""
    rng = np.random.default_rng(seed)
    baseline_medians = _resampled_grouped_medians(rng, baseline, baseline_groups, resamples)
    current_medians = _resampled_grouped_medians(rng, current, current_groups, resamples)
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(current_medians / baseline_medians, [tail, 1.0 - tail])
    return float(lo), float(hi)


def summarize(values: Sequence[float] | np.ndarray,
              groups: Sequence[int] | np.ndarray | None = None) -> dict[str, float]:
    """The timing columns of schema.COLUMNS (seconds per call) for one case's values;
    ``groups``, the worker process of each value, for the interval
    (:func:`bootstrap_median_ci`)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return {k: float("nan") for k in ("median_s", "mean_s", "stdev_s", "min_s", "max_s",
                                          "iqr_s", "ci_low_s", "ci_high_s")}
    q1, median, q3 = np.percentile(v, [25, 50, 75])
    low, high = bootstrap_median_ci(v, groups=groups)
    return {"median_s": float(median), "mean_s": float(v.mean()),
            "stdev_s": float(v.std(ddof=1)) if v.size > 1 else float("nan"),
            "min_s": float(v.min()), "max_s": float(v.max()), "iqr_s": float(q3 - q1),
            "ci_low_s": low, "ci_high_s": high}


def ratio_summary(values: Sequence[float] | np.ndarray,
                  ref_values: Sequence[float] | np.ndarray,
                  groups: Sequence[int] | np.ndarray | None = None) -> dict[str, float]:
    """Median over rounds of value / reference value, with its bootstrap interval
    (``groups`` as for :func:`summarize`)."""
    ratios = np.asarray(values, np.float64) / np.asarray(ref_values, np.float64)
    if ratios.size == 0:
        return {"ref_ratio": float("nan"), "ref_ratio_ci_low": float("nan"),
                "ref_ratio_ci_high": float("nan")}
    low, high = bootstrap_median_ci(ratios, groups=groups)
    return {"ref_ratio": float(np.median(ratios)), "ref_ratio_ci_low": low,
            "ref_ratio_ci_high": high}


def mann_whitney_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of the Mann-Whitney U test of ``a`` against ``b``."""
    from scipy.stats import mannwhitneyu  # here, so that the harness never loads scipy

    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def min_attainable_p(n1: int, n2: int) -> float:
    """Smallest two-sided p-value an exact Mann-Whitney U test can give for these sizes.

    With few values the test cannot reach ``alpha`` at all (5 and 5 values: 0.0079; 4 and
    4: 0.029), so a variant measured that sparsely can never be flagged.
    """
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))
