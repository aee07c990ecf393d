"""The per-variant decision: is the current run slower, faster, or not significantly changed?

Timing (noisy): a change counts only when it is both *significant* and *large*:

- significant: a two-sided Mann-Whitney U test on the two value sets gives p < ``alpha``
  AND the bootstrap confidence interval (level ``1 - alpha``) of the median ratio
  current / baseline excludes 1.  When both runs timed the variant in several worker
  processes, the interval resamples processes first, then values within them: values of
  one process are not independent (a process can carry a bias of its own, 5-10% seen on
  the Intel host), so such a bias widens the interval instead of raising a false alarm;
- large: the median ratio is at least ``1 + threshold`` (slower) or at most
  ``1 / (1 + threshold)`` (faster; symmetric on a log scale).

The values are seconds per call, or, when both runs timed the in-run reference kernel in
the same rounds, value / ref_value per round: co-tenant contention slows both kernels of a
round alike, so the ratio is far less noisy than the raw time.

Instructions (deterministic): simulated instruction counts per call are compared directly
against their own threshold; no test is needed because they do not depend on noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from convbench import stats

SLOWER = "slower"
FASTER = "faster"
NO_CHANGE = "no significant change"
VERDICTS = (SLOWER, FASTER, NO_CHANGE)

DEFAULT_ALPHA = 0.01                   # per-variant false-alarm level of the timing test
DEFAULT_THRESHOLD = 0.05               # minimum timing effect: 5% slower or faster
DEFAULT_INSTRUCTION_THRESHOLD = 0.01   # minimum instruction-count change: 1%


@dataclass(frozen=True)
class TimeDecision:
    """The timing verdict of one variant, with the figures behind it."""

    verdict: str
    ratio: float      # median(current) / median(baseline) of the compared values
    ci_low: float     # bootstrap CI of that ratio, level 1 - alpha
    ci_high: float
    p_value: float    # two-sided Mann-Whitney U
    n_baseline: int
    n_current: int
    basis: str        # "ref-normalised" or "raw"
    threshold: float
    note: str = ""    # why no test could be made, or that processes were the unit

    @property
    def change(self) -> float:
        """Relative change of the median: +0.10 is 10% slower."""
        return self.ratio - 1.0


@dataclass(frozen=True)
class InstructionDecision:
    """The deterministic verdict on simulated instructions per call."""

    verdict: str
    ratio: float
    baseline: float
    current: float
    column: str
    threshold: float


def _classify(ratio: float, threshold: float) -> str:
    if ratio >= 1.0 + threshold:
        return SLOWER
    if ratio <= 1.0 / (1.0 + threshold):
        return FASTER
    return NO_CHANGE


def decide_time(baseline: np.ndarray, current: np.ndarray, *,
                threshold: float = DEFAULT_THRESHOLD, alpha: float = DEFAULT_ALPHA,
                basis: str = "raw", resamples: int = stats.BOOTSTRAP_RESAMPLES,
                baseline_processes: np.ndarray | None = None,
                current_processes: np.ndarray | None = None) -> TimeDecision:
    """Verdict on two sets of per-call times (or reference-normalised times); larger = slower.
    ``*_processes``: the worker process of each value (None: all from one process)."""
    baseline = np.asarray(baseline, dtype=float)
    current = np.asarray(current, dtype=float)
    b_proc = _processes(baseline_processes, baseline.size)
    c_proc = _processes(current_processes, current.size)
    keep_b, keep_c = np.isfinite(baseline), np.isfinite(current)
    baseline, b_proc = baseline[keep_b], b_proc[keep_b]
    current, c_proc = current[keep_c], c_proc[keep_c]
    n1, n2 = baseline.size, current.size
    nan = float("nan")
    if n1 == 0 or n2 == 0:
        return TimeDecision(NO_CHANGE, nan, nan, nan, nan, n1, n2, basis, threshold,
                            note="no values on one side")
    ratio = float(np.median(current) / np.median(baseline))
    if min(n1, n2) < 2 or stats.min_attainable_p(n1, n2) >= alpha:
        return TimeDecision(NO_CHANGE, ratio, nan, nan, nan, n1, n2, basis, threshold,
                            note=f"too few values ({n1} and {n2}) to reach p < {alpha:g}")
    p_value = stats.mann_whitney_p(current, baseline)
    by_process = len(np.unique(b_proc)) > 1 and len(np.unique(c_proc)) > 1
    if by_process:
        lo, hi = stats.bootstrap_ratio_ci_grouped(baseline, b_proc, current, c_proc,
                                                  1.0 - alpha, resamples)
    else:
        lo, hi = stats.bootstrap_ratio_ci(baseline, current, 1.0 - alpha, resamples)
    significant = p_value < alpha and (lo > 1.0 or hi < 1.0)
    verdict = _classify(ratio, threshold) if significant else NO_CHANGE
    note = (f"processes as units ({len(np.unique(b_proc))} and {len(np.unique(c_proc))})"
            if by_process else "")
    return TimeDecision(verdict, ratio, lo, hi, p_value, n1, n2, basis, threshold, note)


def _processes(labels: np.ndarray | None, size: int) -> np.ndarray:
    """The worker-process label of each value (all 0 when unknown)."""
    if labels is None or len(labels) != size:
        return np.zeros(size, dtype=int)
    return np.asarray(labels)


def decide_instructions(baseline: float, current: float, *, column: str,
                        threshold: float = DEFAULT_INSTRUCTION_THRESHOLD
                        ) -> InstructionDecision | None:
    """Deterministic verdict on instructions per call; None when either count is missing."""
    if not (np.isfinite(baseline) and np.isfinite(current)) or baseline <= 0:
        return None
    ratio = float(current / baseline)
    return InstructionDecision(_classify(ratio, threshold), ratio, float(baseline),
                               float(current), column, threshold)
