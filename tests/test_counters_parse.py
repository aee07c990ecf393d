"""perf stat output parsing on recorded Intel, AMD, ARM and VM outputs (tests/data/perf)."""

import math
from pathlib import Path

import pytest

from convbench.harness.counters import parse

DATA = Path(__file__).parent / "data" / "perf"


def totals(name: str) -> dict[str, parse.Reading]:
    return parse.accumulate(parse.parse((DATA / name).read_text()))


def test_csv_values_units_and_multiplexing_share():
    got = totals("intel_icx_csv.txt")
    assert got["cycles"].value == 4e9 and got["cycles"].share == 1.0
    assert got["L1-dcache-loads"].share == pytest.approx(0.5)
    assert got["cache-misses"].share == pytest.approx(0.75)
    assert got["task-clock"].unit == "msec" and got["task-clock"].value == 1000.5
    assert got["fp_arith_inst_retired.512b_packed_single"].value == 1e8


def test_unscaled_counts_are_scaled_by_enabled_over_running():
    line = "500,,L1-dcache-loads,1000,50.00,,"
    assert parse.parse_csv(line, scaled=False)[0].value == 1000
    assert parse.parse_csv(line, scaled=True)[0].value == 500


def test_not_counted_and_not_supported_are_missing_with_reason():
    got = totals("amd_zen3_csv.txt")
    fp = got["fp_ret_sse_avx_ops.all"]
    assert math.isnan(fp.value) and fp.reason == "not counted"
    arm = totals("arm_v1_json.txt")
    assert math.isnan(arm["ll_cache_rd"].value)
    assert arm["ll_cache_rd"].reason.startswith("not supported")


def test_json_matches_csv_fields():
    got = totals("amd_zen4_json.txt")
    assert got["instructions"].value == 7e9
    assert got["L1-dcache-load-misses"].share == pytest.approx(0.8)
    assert got["task-clock"].unit == "msec"


def test_interval_blocks_sum_and_skip_disabled_intervals():
    readings = parse.parse((DATA / "vm_interval_csv.txt").read_text())
    assert {r.interval for r in readings} == {0.100778422, 0.201876631, 0.302876631}
    got = parse.accumulate(readings)
    assert got["task-clock"].value == pytest.approx(37.06)
    assert got["page-faults"].value == 932 + 841
    assert got["context-switches"].value == 8
    assert got["cycles"].reason.startswith("not supported")


def test_refusal_reason_names_paranoid_level():
    err = ("Error:\nAccess to performance monitoring and observability operations is "
           "limited.\nConsider adjusting /proc/sys/kernel/perf_event_paranoid setting")
    assert "perf_event_paranoid=3" in parse.refusal_reason(err, 3)
    assert parse.refusal_reason("event syntax error: 'foo'", 2) is None
