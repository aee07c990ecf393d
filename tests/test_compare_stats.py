"""The decision rule on synthetic value sets: false alarms, power, thresholds, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from convbench.compare import stats
from convbench.compare.thresholds import Thresholds, parse_threshold
from convbench.errors import ConvbenchError

TRIALS = 1000


def _times(rng: np.random.Generator, n: int, noise: float, shift: float = 0.0) -> np.ndarray:
    """Per-call times around 1 ms: log-normal noise (times are skewed to the right)."""
    return 1e-3 * (1.0 + shift) * np.exp(noise * rng.standard_normal(n))


def _flag_rate(n: int, noise: float, shift: float, threshold: float) -> dict[str, float]:
    rng = np.random.default_rng(12345)
    verdicts = [stats.decide_time(_times(rng, n, noise), _times(rng, n, noise, shift),
                                  threshold=threshold).verdict for _ in range(TRIALS)]
    return {v: verdicts.count(v) / TRIALS for v in stats.VERDICTS}


# Same distribution on both sides: every flag is a false alarm.  threshold 0 isolates the
# test itself, whose rate must stay at or below alpha; the default threshold only lowers it.
@pytest.mark.parametrize(("n", "noise", "threshold"), [
    (10, 0.05, 0.0),
    (20, 0.03, 0.0),
    (10, 0.05, stats.DEFAULT_THRESHOLD),
])
def test_false_alarm_rate_at_most_alpha(n: int, noise: float, threshold: float) -> None:
    rates = _flag_rate(n, noise, 0.0, threshold)
    assert rates[stats.SLOWER] + rates[stats.FASTER] <= stats.DEFAULT_ALPHA


# A 10% slower median with default settings: detected almost always at 15 values and 3%
# noise; at 10 values and 5% noise the power is lower (about 0.8), still most of the time.
@pytest.mark.parametrize(("n", "noise", "min_power"), [(15, 0.03, 0.97), (10, 0.05, 0.7)])
def test_ten_percent_slowdown_detected(n: int, noise: float, min_power: float) -> None:
    rates = _flag_rate(n, noise, 0.10, stats.DEFAULT_THRESHOLD)
    assert rates[stats.SLOWER] >= min_power
    assert rates[stats.FASTER] == 0.0


def test_faster_is_symmetric() -> None:
    rng = np.random.default_rng(1)
    d = stats.decide_time(_times(rng, 15, 0.02), _times(rng, 15, 0.02, -0.15))
    assert d.verdict == stats.FASTER
    assert d.ci_low <= d.ratio <= d.ci_high < 1.0


def test_significant_but_small_is_no_change() -> None:
    rng = np.random.default_rng(2)
    base, cur = _times(rng, 20, 0.002), _times(rng, 20, 0.002, 0.02)
    d = stats.decide_time(base, cur)  # 2% with 0.2% noise: significant, under 5%
    assert d.p_value < 1e-6 and d.ci_low > 1.0
    assert d.verdict == stats.NO_CHANGE
    assert stats.decide_time(base, cur, threshold=0.01).verdict == stats.SLOWER


def test_too_few_values_cannot_flag() -> None:
    d = stats.decide_time([1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0])
    assert d.verdict == stats.NO_CHANGE and "too few values" in d.note
    assert d.ratio == 2.0
    empty = stats.decide_time([], [1.0, 2.0])
    assert empty.verdict == stats.NO_CHANGE and empty.note


def test_decision_is_reproducible() -> None:
    rng = np.random.default_rng(3)
    base, cur = _times(rng, 12, 0.05), _times(rng, 12, 0.05, 0.07)
    assert stats.decide_time(base, cur) == stats.decide_time(base, cur)


@pytest.mark.parametrize(("base", "cur", "verdict"), [
    (1_000_000, 1_000_000, stats.NO_CHANGE),
    (1_000_000, 1_009_999, stats.NO_CHANGE),
    (1_000_000, 1_010_000, stats.SLOWER),
    (1_000_000, 980_000, stats.FASTER),
])
def test_instructions_deterministic(base: float, cur: float, verdict: str) -> None:
    d = stats.decide_instructions(base, cur, column="sim_instructions")
    assert d is not None and d.verdict == verdict


def test_instructions_missing_gives_none() -> None:
    assert stats.decide_instructions(float("nan"), 1.0, column="x") is None


def test_thresholds_precedence(tmp_path) -> None:
    path = tmp_path / "thresholds.yaml"
    path.write_text("time: 3%\ninstructions: 0.002\nsuites: {smoke: 0.08}\n"
                    "layers: {'conv1*': 10%, 'conv*': 0.2}\nvariants: {'direct/*': 0.5}\n")
    th = Thresholds.load(path)
    assert th.instructions == 0.002
    assert th.for_variant("smoke", "conv1_a", "direct/nchw") == 0.5
    assert th.for_variant("smoke", "conv1_a", "im2col/nchw") == 0.10  # first match wins
    assert th.for_variant("smoke", "conv2", "im2col/nchw") == 0.2
    assert th.for_variant("smoke", "fc", "im2col/nchw") == 0.08
    assert th.for_variant("other", "fc", "im2col/nchw") == 0.03
    assert Thresholds.load(path, time=0.07).for_variant("x", "fc", "v") == 0.07


@pytest.mark.parametrize("text", ["layers: [a, b]\n", "bogus: 1\n", "time: lots\n",
                                  "time: -5%\n", "- 1\n"])
def test_bad_thresholds_file(tmp_path, text: str) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(ConvbenchError):
        Thresholds.load(path)


def test_parse_threshold() -> None:
    assert parse_threshold("5%", "x") == pytest.approx(0.05)
    assert parse_threshold(0.1, "x") == 0.1
