"""Several worker processes per group: values pooled per case, processes recorded, and the
gate treating the process as the unit (issue 15, item 1), on real runs of the gate suite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from convbench import stats
from convbench.compare import decision
from convbench.compare.match import load_pair, match
from tests import gate_kernels

# the gate judges real timings of back-to-back runs: no other test beside those (the
# tests that count values and processes judge no timing and share the CPUs)
JUDGES_TIMINGS = pytest.mark.serial

GATE_SUITE = Path(__file__).parent / "data" / "gate_suite.yaml"
GATED = "conv3x3|t_gated/nchw|t1|vauto"


def _run(out: Path, env: dict[str, str], *args: str, suite: Path = GATE_SUITE) -> Path:
    done = subprocess.run([sys.executable, "-m", "convbench", "run", str(suite), "-q",
                           "--output", str(out), *args], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def _gate_suite_with_processes(tmp_path: Path, processes: int) -> Path:
    """A copy of the gate suite whose timing options ask for `processes` worker processes."""
    text = GATE_SUITE.read_text()
    assert text.count("timeout: 60}") == 1, "the gate suite's timing line changed"
    suite = tmp_path / f"gate_{processes}p.yaml"
    suite.write_text(text.replace("timeout: 60}", f"timeout: 60, processes: {processes}}}"))
    return suite


@pytest.fixture
def gated_env(monkeypatch) -> dict[str, str]:
    import os

    monkeypatch.setenv("CONVBENCH_EXTRA_KERNELS", "tests.gate_kernels")
    return dict(os.environ)


def test_values_are_pooled_from_every_process(tmp_path: Path, gated_env) -> None:
    run = _run(tmp_path / "a", gated_env, "--only", "algorithm=t_gated")
    table = pd.read_parquet(run / "results.parquet")
    values = pd.read_parquet(run / "values.parquet")
    row = table.set_index("case_id").loc[GATED]
    assert row["processes"] == 3                           # the default
    assert row["n_values"] == 3 * 12                       # gate suite: 12 values each
    assert sorted(values["process"].unique()) == [0, 1, 2]
    assert values.groupby("process").size().tolist() == [12, 12, 12]
    assert np.isfinite(row["process_spread"])
    # the intervals are reproduced from the raw values with the processes as the unit
    mine = values[values["case_id"] == GATED]
    per_call = mine["value"]   # seconds per call
    assert (row["ci_low_s"], row["ci_high_s"]) == stats.bootstrap_median_ci(
        per_call, groups=mine["process"])
    assert (row["ci_low_s"], row["ci_high_s"]) != stats.bootstrap_median_ci(per_call)
    bench = json.loads((run / "pyperf.json").read_text())["benchmarks"][0]
    assert len(bench["runs"]) == 3                         # one pyperf run per process


def test_process_count_from_the_suite(tmp_path: Path, gated_env) -> None:
    suite = _gate_suite_with_processes(tmp_path, 1)
    _run(tmp_path / "r", gated_env, "--only", "algorithm=t_gated", suite=suite)
    row = pd.read_parquet(tmp_path / "r" / "results.parquet").iloc[0]
    assert row["processes"] == 1 and np.isnan(row["process_spread"])


@JUDGES_TIMINGS
def test_a_per_process_bias_is_no_false_alarm(tmp_path: Path, gated_env, cli) -> None:
    """One process of three does 30% more work in the baseline, two of three in the
    current run: pooled, the medians differ by far more than the 5% threshold (the median
    falls in the fast mode of one run and the slow mode of the other); with the process as
    the unit the gate sees no change. Whether a rank test on the pooled values also calls
    it "slower" depends on the machine's noise (p = 0.17 in one CI run), so only the
    median shift, which the bias fixes, is asserted.

    A pair in which the host drifted so far that the pooled medians did not move past 1.1
    (a CI pair: 1.087, interval 0.97-1.19, the host ~15% faster in run b) does not pose the
    question; it is measured again, at most PAIR_ATTEMPTS times, as the 10% test does."""
    shifts = []
    for attempt in range(PAIR_ATTEMPTS):
        runs = []
        for name, bias in (("a", "0,0.3,0"), ("b", "0.3,0,0.3")):
            env = {**gated_env, gate_kernels.PROCESS_BIAS_ENV: bias}
            runs.append(_run(tmp_path / f"{name}{attempt}", env, "--only",
                             "algorithm=t_gated"))
        # the same values with the processes ignored: the medians moved past the threshold
        pairs = match(*load_pair(*runs)).pairs
        base, cur = next(p for p in pairs if p[0].case_id == GATED)
        pooled = decision.decide_time(base.normalised, cur.normalised, alpha=0.05)
        if pooled.ratio > 1.1:
            break
        shifts.append(pooled.ratio)
    else:
        pytest.fail(f"the host drifted between the runs of every pair: pooled {shifts}")
    code, out, _ = cli("compare", *runs, "--format", "json")
    data = json.loads(out)
    assert code == 0, out
    gated = next(v for v in data["variants"] if v["case_id"] == GATED)
    assert "processes as units (3 and 3)" in gated["time"]["note"]
    assert gated["time"]["verdict"] != decision.SLOWER


# The unchanged control: im2col, t_gated's own code path without the extra work.  The
# direct kernel was a second control until 2026-11-27: its ref-normalised time moved outside
# STEADY in all 10 pairs of a serial run on the Zen 3 host (0.70-1.33x; im2col in 4 of
# them, 0.92-1.06x).  Each worker process there ran at one of two speeds for the whole
# process (direct ~1.6 or ~4.2 ms a call, im2col and t_gated ~2x apart, the reference kernel
# only 0.40 vs 0.50 ms), so the share of slow processes in a run moved direct's
# normalised median by up to 47% and im2col's by ~12%: a pair was never steady on direct.
CONTROLS = ("conv3x3|im2col/nchw/gemm=blas|t1|vauto",)
NOT_IN_THE_PAIRS = ("--exclude", "algorithm=direct")
# 6 attempts were not enough on 2026-11-27: a clean-clone CI on the Zen 3 host found no steady
# pair in 6 (the direct control moved 0.71-1.21x between the runs of a pair, im2col
# 0.94-1.08x), while the same host passed the test in the CI before; a steady pair costs
# nothing extra, a noisy stretch costs ~20 s a pair more.
PAIR_ATTEMPTS = 10
AB_PROCESSES = 5
# A pair is steady when the control moved less than this (ref-normalised ratio): a CI
# pair on the Zen 3 host whose controls both came out 4-4.5% faster in run b, each below
# the 5% threshold and so "no change", showed t_gated at 1.068 (interval 0.993-1.144): the
# ~10% effect less the host's drift.  On that host's noisy days the controls moved 0.71-1.32x
# between back-to-back runs, and 2 to 3 of 4 pairs at most 4% (hence several attempts).
STEADY = 0.04


@JUDGES_TIMINGS
def test_a_ten_percent_slower_kernel_still_fails(tmp_path: Path, gated_env, cli) -> None:
    """t_gated does ~10% more work in run b; im2col is the unchanged control.

    A pair of runs counts only when the gate sees no change on the control: on the Zen 3
    host one CI pair had its first run in a slow stretch (direct 8.5 ms there, 4.7 ms in
    the second run; ref-normalised 0.72x), and a 10% effect cannot be resolved against a
    machine that moved 10-30% between the runs. Such a pair is measured again, at most
    PAIR_ATTEMPTS times; the gate must flag t_gated, and only it, on a steady pair (the
    control within STEADY of 1, whatever its verdict).

    Each run has AB_PROCESSES worker processes, not the default 3: with the process as the
    unit, 3 of them resolve a 12-16% slowdown in only 86% of back-to-back pairs on the Zen 3
    host (the interval is close to the span of the process medians; a CI pair missed t_gated
    at 1.14x, interval 0.997-1.29), 5 in all of 49 pairs (7 pairs of 6-process runs,
    subsampled); the false-alarm rate of the A/A pairs was the same for 3 and 5."""
    suite = _gate_suite_with_processes(tmp_path, AB_PROCESSES)
    drifted = []
    for attempt in range(PAIR_ATTEMPTS):
        runs = []
        for name, extra in (("a", "0"), ("b", "0.12")):   # ~10% more time (the GEMM part)
            env = {**gated_env, gate_kernels.EXTRA_WORK_ENV: extra}
            runs.append(_run(tmp_path / f"{name}{attempt}", env, *NOT_IN_THE_PAIRS,
                             suite=suite))
        code, out, _ = cli("compare", *runs, "--format", "json")
        data = json.loads(out)
        by_case = {v["case_id"]: v for v in data["variants"]}
        moved = {c: by_case[c]["time"]["ratio"] for c in CONTROLS
                 if by_case[c]["verdict"] != decision.NO_CHANGE
                 or abs(by_case[c]["time"]["ratio"] - 1) > STEADY}
        if not moved:
            break
        drifted.append(moved)
    else:
        pytest.fail(f"the host drifted between the runs of every pair: {drifted}")
    assert code == 1, out
    assert data["regressions"] == [GATED]
    slow = by_case[GATED]
    assert f"processes as units ({AB_PROCESSES} and {AB_PROCESSES})" in slow["time"]["note"]
    assert slow["time"]["ratio"] > 1.05
