"""Derived metrics from recorded Intel, AMD and ARM outputs, through the worker's columns."""

import math
from pathlib import Path

import pytest

from convbench.harness.counters import events, metrics, parse
from convbench.harness.counters.perf import column, columns

DATA = Path(__file__).parent / "data" / "perf"


def row(name, emap, peak, calls=10, seconds=1.0):
    readings = parse.accumulate(parse.parse((DATA / name).read_text()))
    return columns(readings, emap, calls, seconds, peak)


def test_intel_metrics():
    r = row("intel_icx_csv.txt", events.intel_map(), events.PeakSpec(512))
    assert r["ctr_cycles"] == 4e8                       # per call
    assert r["ipc"] == pytest.approx(2.0)
    assert r["l1d_miss_rate"] == pytest.approx(0.05)
    assert r["llc_miss_rate"] == pytest.approx(0.25)
    fp = 1000 + 1e8 * 16
    assert r["ctr_fp_ops"] == pytest.approx(fp / 10)
    assert r["fma_utilization"] == pytest.approx(fp / (4e9 * 64))
    assert r["counted_gflops"] == pytest.approx(fp / 1.0 / 1e9)
    assert r["dram_bandwidth_gbs"] == pytest.approx(5e5 * 64 / 1.0 / 1e9)
    assert r["ctr_running_share"] == pytest.approx(0.5)
    assert not [k for k in r if k.endswith("_reason")]


def test_amd_missing_fp_event_and_uncore_llc():
    r = row("amd_zen3_csv.txt", events.amd_map(), events.PeakSpec(256))
    assert r["ipc"] == pytest.approx(2.0) and r["l1d_miss_rate"] == pytest.approx(0.01)
    assert math.isnan(r["fma_utilization"]) and "not counted" in r["fma_utilization_reason"]
    assert math.isnan(r["llc_miss_rate"]) and "amd_l3" in r["llc_miss_rate_reason"]
    assert r["ctr_context_switches_reason"] == "not counted"
    z4 = row("amd_zen4_json.txt", events.amd_map(), events.PeakSpec(512, 2, 256))
    assert z4["fma_utilization"] == pytest.approx(5.6e10 / (3.5e9 * 32))
    assert z4["ctr_running_share"] == pytest.approx(0.8)


def test_arm_metrics():
    n1 = row("arm_n1_csv.txt", events.arm_map(0xD0C), events.PeakSpec(128))
    assert n1["l1d_miss_rate"] == pytest.approx(0.05)
    assert n1["llc_miss_rate"] == pytest.approx(0.25)
    assert n1[column("ase_spec")] == pytest.approx(9e7)
    assert "not FP operations" in n1["counted_gflops_reason"]
    v1 = row("arm_v1_json.txt", events.arm_map(0xD40, sve_bits=256), events.PeakSpec(256))
    fp = 1e10 * 2 + 4e9
    assert v1["fma_utilization"] == pytest.approx(fp / (2.6e9 * 32))
    assert "not supported" in v1["llc_miss_rate_reason"]


def test_vm_row_counts_software_events_only():
    emap = events.EventMap("vm", {"cycles": "cycles"})
    r = row("vm_interval_csv.txt", emap, events.PeakSpec(256), calls=1)
    assert r["ctr_page_faults"] == 932 + 841
    assert math.isnan(r["ctr_cycles"]) and "not supported" in r["ctr_cycles_reason"]
    assert r["ipc_reason"] == "instructions: no event for it in the vm event map"
    assert r["fma_utilization_reason"] == "fp_ops: no FP events in the event map"


def test_everything_missing_when_perf_cannot_count():
    r = columns({}, events.intel_map(), 5, 1.0, events.PeakSpec(512), "perf not installed")
    values = [v for k, v in r.items() if k.startswith("ctr_") and not k.endswith("_reason")
              and k != "ctr_running_share"]
    assert values and all(math.isnan(v) for v in values)
    assert r["ctr_task_clock_reason"] == "perf not installed"


def test_metric_reasons_name_the_missing_input():
    out = metrics.derive({"cycles": 10.0}, {"instructions": "not supported"})
    assert math.isnan(out["ipc"]) and out["ipc_reason"] == "instructions: not supported"
    assert metrics.derive({"cycles": 0.0, "instructions": 5.0}, {})["ipc_reason"] == \
        "cycles is zero"
