"""Statistics of timed values: location, spread and a bootstrap confidence interval."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261123  # fixed: the same values always give the same interval


def bootstrap_median_ci(values: Sequence[float], level: float = 0.95,
                        resamples: int = BOOTSTRAP_RESAMPLES,
                        seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of the median (seeded, so reproducible)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    medians = np.median(v[rng.integers(0, v.size, (resamples, v.size))], axis=1)
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return float(low), float(high)


def summarize(values: Sequence[float]) -> dict[str, float]:
    """The timing columns of schema.COLUMNS (seconds per call) for one case's values."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return {k: float("nan") for k in ("median_s", "mean_s", "stdev_s", "min_s", "max_s",
                                          "iqr_s", "ci_low_s", "ci_high_s")}
    q1, median, q3 = np.percentile(v, [25, 50, 75])
    low, high = bootstrap_median_ci(v)
    return {"median_s": float(median), "mean_s": float(v.mean()),
            "stdev_s": float(v.std(ddof=1)) if v.size > 1 else float("nan"),
            "min_s": float(v.min()), "max_s": float(v.max()), "iqr_s": float(q3 - q1),
            "ci_low_s": low, "ci_high_s": high}


def ratio_summary(values: Sequence[float], ref_values: Sequence[float]) -> dict[str, float]:
    """Median over rounds of value / reference value, with its bootstrap interval."""
    ratios = np.asarray(values, np.float64) / np.asarray(ref_values, np.float64)
    if ratios.size == 0:
        return {"ref_ratio": float("nan"), "ref_ratio_ci_low": float("nan"),
                "ref_ratio_ci_high": float("nan")}
    low, high = bootstrap_median_ci(ratios)
    return {"ref_ratio": float(np.median(ratios)), "ref_ratio_ci_low": low,
            "ref_ratio_ci_high": high}
