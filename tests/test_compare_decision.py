"""The decision rule on synthetic value sets: false alarms, power, thresholds, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from convbench.compare import decision
from convbench.compare.thresholds import Thresholds, parse_threshold
from convbench.errors import ConvbenchError
from tests.unit.test_stats import BASE, CUR, REF

TRIALS = 1000


def _times(rng: np.random.Generator, n: int, noise: float, shift: float = 0.0) -> np.ndarray:
    """Per-call times around 1 ms: log-normal noise (times are skewed to the right)."""
    return 1e-3 * (1.0 + shift) * np.exp(noise * rng.standard_normal(n))


def _flag_rate(n: int, noise: float, shift: float, threshold: float) -> dict[str, float]:
    rng = np.random.default_rng(12345)
    verdicts = [decision.decide_time(_times(rng, n, noise), _times(rng, n, noise, shift),
                                     threshold=threshold).verdict for _ in range(TRIALS)]
    return {v: verdicts.count(v) / TRIALS for v in decision.VERDICTS}


# Same distribution on both sides: every flag is a false alarm.  threshold 0 isolates the
# test itself, whose rate must stay at or below alpha; the default threshold only lowers it.
@pytest.mark.parametrize(("n", "noise", "threshold"), [
    (10, 0.05, 0.0),
    (20, 0.03, 0.0),
    (10, 0.05, decision.DEFAULT_THRESHOLD),
])
def test_false_alarm_rate_at_most_alpha(n: int, noise: float, threshold: float) -> None:
    rates = _flag_rate(n, noise, 0.0, threshold)
    assert rates[decision.SLOWER] + rates[decision.FASTER] <= decision.DEFAULT_ALPHA


# A 10% slower median with default settings: detected almost always at 15 values and 3%
# noise; at 10 values and 5% noise the power is lower (about 0.8), still most of the time.
@pytest.mark.parametrize(("n", "noise", "min_power"), [(15, 0.03, 0.97), (10, 0.05, 0.7)])
def test_ten_percent_slowdown_detected(n: int, noise: float, min_power: float) -> None:
    rates = _flag_rate(n, noise, 0.10, decision.DEFAULT_THRESHOLD)
    assert rates[decision.SLOWER] >= min_power
    assert rates[decision.FASTER] == 0.0


def test_faster_is_symmetric() -> None:
    rng = np.random.default_rng(1)
    d = decision.decide_time(_times(rng, 15, 0.02), _times(rng, 15, 0.02, -0.15))
    assert d.verdict == decision.FASTER
    assert d.ci_low <= d.ratio <= d.ci_high < 1.0


def test_significant_but_small_is_no_change() -> None:
    rng = np.random.default_rng(2)
    base, cur = _times(rng, 20, 0.002), _times(rng, 20, 0.002, 0.02)
    d = decision.decide_time(base, cur)  # 2% with 0.2% noise: significant, under 5%
    assert d.p_value < 1e-6 and d.ci_low > 1.0
    assert d.verdict == decision.NO_CHANGE
    assert decision.decide_time(base, cur, threshold=0.01).verdict == decision.SLOWER


def test_too_few_values_cannot_flag() -> None:
    d = decision.decide_time([1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0])
    assert d.verdict == decision.NO_CHANGE and "too few values" in d.note
    assert d.ratio == 2.0
    empty = decision.decide_time([], [1.0, 2.0])
    assert empty.verdict == decision.NO_CHANGE and empty.note


def test_decision_is_reproducible() -> None:
    rng = np.random.default_rng(3)
    base, cur = _times(rng, 12, 0.05), _times(rng, 12, 0.05, 0.07)
    assert decision.decide_time(base, cur) == decision.decide_time(base, cur)


# Figures computed by the decision rule before the statistics moved to convbench.stats
# (see tests/unit/test_stats.py): exact, so the move is proven not to change a verdict.
def test_time_decisions_are_unchanged() -> None:
    raw = decision.decide_time(BASE, CUR)
    assert (raw.verdict, raw.ratio, raw.ci_low, raw.ci_high, raw.p_value) == (
        decision.SLOWER, 1.1114117068371863, 1.0513517379487916, 1.167982147411374,
        0.00012334575440397442)
    normalised = decision.decide_time(np.asarray(BASE) / REF, np.asarray(CUR) / REF,
                                      basis="ref-normalised", alpha=0.009)
    assert (normalised.verdict, normalised.ratio, normalised.ci_low, normalised.ci_high,
            normalised.p_value) == (decision.SLOWER, 1.0989158626455153,
                                    1.05843571977708, 1.192674414603674,
                                    0.0004776817289569815)


@pytest.mark.parametrize(("base", "cur", "verdict"), [
    (1_000_000, 1_000_000, decision.NO_CHANGE),
    (1_000_000, 1_009_999, decision.NO_CHANGE),
    (1_000_000, 1_010_000, decision.SLOWER),
    (1_000_000, 980_000, decision.FASTER),
])
def test_instructions_deterministic(base: float, cur: float, verdict: str) -> None:
    d = decision.decide_instructions(base, cur, column="sim_instructions")
    assert d is not None and d.verdict == verdict


def test_instructions_missing_gives_none() -> None:
    assert decision.decide_instructions(float("nan"), 1.0, column="x") is None


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
