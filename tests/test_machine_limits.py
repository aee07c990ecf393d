"""Machine limits measured on a run's first use, read as a bandwidth curve, and shares that
beat a bound flagged (issue 15 item 6).

Structure, never speed: the machine is shared, and even the curve's shape (non-increasing
beyond L1) does not hold on a noisy host, so the tests check the sizes asked for, the
lookup, the flag rule and the arithmetic counts, plus one real first-use run.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from convbench.kernels.base import PERFORMED_FLOPS
from convbench.kernels.registry import get as get_algorithm
from convbench.machine import store
from convbench.machine.bandwidth import curve_sizes, measure_curve, upper_envelope
from convbench.machine.first_use import MEASURE_ENV
from convbench.results import record, schema
from convbench.results import store as results_store
from convbench.spec.descriptor import parse_descriptor

# not serial: the figures are checked for structure and plausibility, never for speed, so
# a test beside them costs nothing but time (tests/parallel.py)

# --- the curve's sizes and its lookup -----------------------------------------------------


def test_curve_sizes_are_the_geometric_series_asked_for():
    sizes = curve_sizes(64 << 20, points_per_octave_pair=3)
    assert sizes[0] == 16 << 10 and sizes[-1] == 64 << 20
    assert len(sizes) == 3 * 6 + 1              # 16 KiB .. 64 MiB is 6 factors of 4
    ratios = np.array(sizes[1:]) / np.array(sizes[:-1])
    assert np.allclose(ratios, 4 ** (1 / 3), rtol=0.01)
    assert all(s % 64 == 0 for s in sizes)      # whole cache lines
    assert curve_sizes(100 << 20, 2)[-1] >= 100 << 20   # reaches at least the largest
    with pytest.raises(ValueError):
        curve_sizes(1 << 10)


def test_measured_curve_has_one_point_per_size_asked_for():
    sizes = [16 << 10, 64 << 10, 256 << 10]
    points = measure_curve(sizes, 1, min_seconds=0.002, repeats=2)
    assert [p[0] for p in points] == sizes
    assert all(0 < gbs < 1e5 for _, gbs in points)   # GB/s, not B/s


def test_lookup_interpolates_in_log_size_and_uses_the_last_point_beyond():
    curve = [[1 << 10, 100.0], [4 << 10, 40.0], [16 << 10, 10.0]]
    assert store.curve_at(curve, 2 << 10) == pytest.approx(70.0)   # halfway in log size
    assert store.curve_at(curve, 4 << 10) == 40.0
    assert store.curve_at(curve, 1 << 30) == 10.0                  # beyond: the last point
    assert store.curve_at(curve, 10) == 100.0                      # below: the first
    assert math.isnan(store.curve_at([], 1 << 10))
    limits = {"bandwidth_curve": {"2": curve}}
    assert store.bandwidth_at(limits, 2 << 10, 2) == pytest.approx(70.0)
    assert math.isnan(store.bandwidth_at(limits, 2 << 10, 1))


def test_upper_envelope_lifts_dips_to_the_best_larger_size():
    raw = [[1, 70.0], [2, 15.0], [4, 65.0], [8, 40.0], [16, 45.0]]
    assert upper_envelope(raw) == [[1, 70.0], [2, 65.0], [4, 65.0], [8, 45.0], [16, 45.0]]


# --- shares above a bound are flagged ------------------------------------------------------

LIMITS = {"peak_gflops": {"1": {"256": 10.0}},
          "bandwidth_curve": {"1": [[16 << 10, 50.0], [64 << 20, 5.0]]},
          "bandwidth_gbs": {"L1": {"1": 50.0}, "DRAM": {"1": 5.0}}}


def test_a_share_above_one_is_flagged_and_left_out():
    # 2e9 flops in 0.1 s = 20 GFLOP/s on a 10 GFLOP/s peak: impossible
    row = record.derived(2e9, 1e6, 0.1, 1, "auto", LIMITS, resolution_s=1e-8)
    assert "peak_share 2.00" in row["share_flag"] and "measurement error" in row["share_flag"]
    assert math.isnan(row["peak_share"]) and math.isnan(row["roofline_share"])
    assert row["gflops"] == pytest.approx(20.0)          # the measured rate stays


def test_a_share_within_the_timers_resolution_of_one_is_not_flagged():
    # 1.0005 of the peak, with a timer resolution of 0.1% of the median: at the bound
    row = record.derived(1.0005e9, 1e3, 0.1, 1, "256", LIMITS, resolution_s=1e-4)
    assert row["share_flag"] == "" and row["peak_share"] == pytest.approx(1.0005)
    row = record.derived(1.0005e9, 1e3, 0.1, 1, "256", LIMITS, resolution_s=1e-6)
    assert row["share_flag"] and math.isnan(row["peak_share"])


def test_only_the_share_above_one_is_dropped():
    # memory-bound: 1 flop/byte at 64 MiB (5 GB/s) bounds at 5 GFLOP/s; 8 is above it but
    # below the 10 GFLOP/s peak
    nbytes = 64 << 20
    row = record.derived(nbytes, nbytes, nbytes / 8e9, 1, "auto", LIMITS)
    assert row["roofline_level"] == "DRAM" and row["roofline_gbs"] == 5.0
    assert row["peak_share"] == pytest.approx(0.8)
    assert math.isnan(row["roofline_share"]) and "roofline_share 1.60" in row["share_flag"]


# --- Winograd and Strassen: shares from the arithmetic performed --------------------------


def _prepared(algorithm: str, descriptor: str, **params):
    problem = parse_descriptor(descriptor)
    alg = get_algorithm(algorithm)
    w = np.random.default_rng(0).standard_normal(
        (problem.oc, problem.ic // problem.g, problem.kh, problem.kw)).astype(np.float32)
    return problem, alg.build(problem, w, alg.layouts[0], {**alg.defaults, **params})


def test_winograd_2x2_performs_fewer_flops_by_its_tile_count():
    # 56x56 output: 28 x 28 tiles of 2x2, 16 multiplies each instead of 4 x 9 = 36
    problem, prepared = _prepared("winograd2x2", "mb1ic16ih56oc32oh56kh3ph1")
    tiles = 28 * 28
    performed = prepared.info()[PERFORMED_FLOPS]
    assert performed == 2 * 16 * tiles * 16 * 32
    assert problem.flops / performed == pytest.approx(36 / 16)
    # odd 7x7 output: 4 x 4 tiles, the edge tiles computed whole
    problem, prepared = _prepared("winograd2x2", "mb1ic16ih7oc16oh7kh3ph1")
    assert prepared.info()[PERFORMED_FLOPS] == 2 * 16 * 16 * 16 * 16
    assert prepared.info()[PERFORMED_FLOPS] < problem.flops


def test_strassen_performs_seven_eighths_per_level():
    problem, prepared = _prepared("strassen", "mb1ic64ih8oc64oh8kh1", depth=1)
    assert prepared.info()[PERFORMED_FLOPS] == problem.flops * 7 // 8


def test_peak_share_divides_the_performed_flops():
    info = json.dumps({PERFORMED_FLOPS: 4e8})
    performed = record.performed_flops(9e8, info)
    row = record.derived(9e8, 1e3, 0.1, 1, "256", LIMITS, performed)
    assert row["gflops"] == pytest.approx(9.0)                 # effective rate: nominal
    assert row["peak_share"] == pytest.approx(0.4)             # 4 performed GFLOP/s of 10
    assert row["performed_flops"] == 4e8 and row["share_flag"] == ""
    assert record.performed_flops(9e8, "{}") == 9e8


# --- a run on a host without stored limits measures them first ----------------------------

SUITE = """\
name: first_use
description: One small 3x3 layer, direct and Winograd (shape made up).
layers:
  - {name: conv3x3, shape: mb1ic8ih10oc8oh10kh3ph1, count: 1}
sweep:
  algorithms: [direct, winograd2x2]
  layouts: [nchw, nhwc]
  threads: [1]
  vector_widths: [auto]
  params: {winograd2x2: {gemm: [blas], tile_block: [64]}}
  timing: {min_time: 0.002, values: 3, warmups: 1, timeout: 60}
"""


@pytest.fixture(scope="module")
def first_use_run(tmp_path_factory):
    from convbench.harness import runner

    root = tmp_path_factory.mktemp("first_use")
    suite = root / "suite.yaml"
    suite.write_text(SUITE)
    mp = pytest.MonkeyPatch()
    mp.setenv("CONVBENCH_MACHINE_DIR", str(root / "machine"))
    mp.setenv(MEASURE_ENV, "1")
    try:
        assert store.machine_limits() is None              # a fresh machine directory
        outcome = runner.run_suite(suite, root / "run")
        stored = store.machine_limits()
    finally:
        mp.undo()
    return outcome.path, stored


def test_a_run_on_a_fresh_host_measures_its_limits_first(first_use_run, capfd):
    path, stored = first_use_run
    assert stored is not None and stored["profile"] == "quick"
    env = json.loads((Path(path) / schema.ENVIRONMENT_JSON).read_text())
    assert env["machine"] == stored                        # the run divided by these
    assert set(env["machine"]["bandwidth_curve"]) >= {"1"}
    table = results_store.load(path).table
    ok = table[table["status"] == "ok"]
    assert len(ok) >= 2
    # every ok row has its shares, or says why not
    assert (ok["peak_share"].notna() | (ok["share_flag"] != "")).all()
    assert (ok["roofline_gbs"] > 0).all() and (ok["roofline_level"] != "").all()
    for col in ("peak_share", "roofline_share"):
        assert not (ok[col] > 1.0).any(), f"{col} above 1 without the flag"


def test_the_run_records_winograds_performed_flops(first_use_run):
    table = results_store.load(first_use_run[0]).table
    wino = table[(table["algorithm"] == "winograd2x2") & (table["status"] == "ok")]
    assert len(wino) == 1
    row = wino.iloc[0]
    assert row["performed_flops"] == 2 * 16 * 5 * 5 * 8 * 8      # 5 x 5 tiles of 2x2
    # the peak of the width the code was compiled for: on a host whose 256- and 512-bit
    # peaks tie (Zen 4) auto compiles 512-bit code even where the 256-bit peak came out a
    # little higher (store.WIDTH_TIE), so the best width's peak is not the divisor
    peak = store.peak_for(json.loads((Path(first_use_run[0]) / schema.ENVIRONMENT_JSON)
                                     .read_text())["machine"], 1, row["compile_width"])
    if row["share_flag"] == "":
        assert row["peak_share"] == pytest.approx(
            row["performed_flops"] / row["median_s"] / 1e9 / peak)


def test_measuring_can_be_turned_off(tmp_path, monkeypatch):
    from convbench.machine.first_use import limits_for_run

    monkeypatch.setenv("CONVBENCH_MACHINE_DIR", str(tmp_path))
    monkeypatch.setenv(MEASURE_ENV, "0")
    assert limits_for_run([1]) is None
    assert limits_for_run([1], measure=False) is None
    assert not any(tmp_path.iterdir())


# --- report and run summary show the flag, not the share -----------------------------------


def test_report_and_summary_show_the_flag_instead_of_the_share(tmp_path):
    from convbench.report.build import build_report
    from convbench.report.summary import run_summary
    from convbench.results.load import load_results
    from tests.report_cases import MACHINE
    from tests.results_factory import write_results

    cases = [dict(layer="L", algorithm="direct", layout="nchw", median=40e-3),
             # 2e8 flops in 0.5 ms: 400 GFLOP/s on a 115 GFLOP/s peak
             dict(layer="L", algorithm="im2col", layout="nchw", median=0.5e-3)]
    run = write_results(tmp_path / "run", cases, machine=MACHINE)
    table = load_results(run).table
    fast = table[table["algorithm"] == "im2col"].iloc[0]
    assert "peak_share" in fast["share_flag"] and pd.isna(fast["peak_share"])
    assert table[table["algorithm"] == "direct"]["share_flag"].iloc[0] == ""
    summary = run_summary(table)
    assert "1 case(s) measured above 100% of a bound" in summary
    text = build_report([run], tmp_path / "md", "md").read_text()
    assert "## Shares flagged as measurement errors" in text
    assert "| im2col/nchw | 1 | auto | 400" in text.split("## Shares flagged")[1].split("\n## ")[0]


# --- auto: the host's fastest measured width ---------------------------------------------
@pytest.mark.parametrize(("peaks", "emitted", "runnable", "expected"), [
    ({"256": 107.0, "512": 187.0}, {"256": 256, "512": 512}, ("256", "512"), "512"),  # Intel
    ({"256": 117.0, "512": 115.0}, {"256": 256, "512": 512}, ("256", "512"), "512"),  # tie
    ({"256": 117.0, "512": 100.0}, {"256": 256, "512": 512}, ("256", "512"), "256"),
    ({"256": 107.0, "512": 187.0}, {"256": 256, "512": 256}, ("256", "512"), "256"),  # no zmm
    ({"256": 31.0, "512": 90.0}, {}, ("256",), "256"),                  # CPU without AVX-512
    ({}, {}, ("256", "512"), None),                                     # never measured
])
def test_fastest_width(peaks, emitted, runnable, expected):
    limits = {"peak_gflops": {"1": peaks}, "asm_width": emitted}
    assert store.fastest_width(limits, runnable) == expected


def test_auto_records_the_width_its_code_uses(first_use_run):
    """The first-use run's auto cases compiled for the measured fastest width, and the
    bits they record are those of the widest packed FMA in the kernel's own code compiled
    under that width's flags (its static profile)."""
    import os
    import subprocess
    import sys

    from convbench import host

    path, stored = first_use_run
    width = store.fastest_width(stored)
    assert width in host.vector_widths()
    table = results_store.load(path).table
    row = table.set_index("variant").loc["direct/nhwc"]
    assert row["vector_width"] == "auto" and row["compile_width"] == width
    probe = ("import json\n"
             "from convbench.harness.inputs import make_inputs\n"
             "from convbench.harness.verify import prepare\n"
             "from convbench.kernels import direct\n"
             "from convbench.kernels.asm import dispatcher_asm, fp_profile\n"
             "from convbench.kernels.base import Variant\n"
             "from convbench.spec.descriptor import parse_descriptor\n"
             f"p = parse_descriptor({row['descriptor']!r})\n"
             "x, w = make_inputs(p)\n"
             "ex = prepare(p, Variant.of('direct', 'nhwc'), x, w)\n"
             "ex.prepared.run(ex.x, ex.y)\n"
             "print(json.dumps(fp_profile(dispatcher_asm(direct._direct_nhwc)).widest))\n")
    static = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            env={**os.environ, host.FEATURES_ENV: host.cpu_features(width)},
                            timeout=600)
    assert static.returncode == 0, static.stderr[-2000:]
    assert row["vector_width_bits"] == json.loads(static.stdout.strip().splitlines()[-1])


def test_a_later_run_measures_only_the_thread_counts_it_lacks(first_use_run, tmp_path,
                                                              monkeypatch):
    from convbench.machine.first_use import limits_for_run

    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 CPUs")
    _, stored = first_use_run
    assert store.measured_threads(stored) == {1}           # the run asked for 1 thread only
    monkeypatch.setenv("CONVBENCH_MACHINE_DIR", str(tmp_path))
    store.save(stored)
    grown = limits_for_run([2], measure=True)
    assert store.measured_threads(grown) == {1, 2}
    assert grown["peak_gflops"]["1"] == stored["peak_gflops"]["1"]     # kept, not re-measured
    assert grown["peak_gflops"]["2"] and grown["bandwidth_curve"]["2"]
    assert grown["bandwidth_gbs"]["DRAM"]["1"] == stored["bandwidth_gbs"]["DRAM"]["1"]
    assert "2" in grown["bandwidth_gbs"]["DRAM"] and "threads 2 measured" in grown["notes"][-1]
    assert store.machine_limits() == grown                  # stored for the next run
    before = (tmp_path / store.limits_path().name).stat().st_mtime_ns
    assert limits_for_run([1, 2], measure=True) == grown     # nothing left to measure
    assert (tmp_path / store.limits_path().name).stat().st_mtime_ns == before
