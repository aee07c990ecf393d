"""A segfault, a hang, an exception and a wrong answer cost only their own case; a slow first
call (standing in for a JIT compile) is recorded as compile time, never as a timed value."""

from __future__ import annotations

from pathlib import Path

import pytest

from convbench.harness import memory, runner
from convbench.kernels import registry
from convbench.results import store
from tests import fault_kernels

FAULTS = Path(__file__).parent / "data" / "fault_suite.yaml"
WORKER_MEMORY = "1G"   # below fault_kernels.HOG_CAP_BYTES, enough for numba and BLAS


@pytest.fixture(scope="module")
def fault_table(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv(registry.EXTRA_KERNELS_ENV, "tests.fault_kernels")
    mp.setenv(memory.MEMORY_ENV, WORKER_MEMORY)
    registry.algorithms.cache_clear()
    try:
        out = tmp_path_factory.mktemp("faults") / "run"
        runner.run_suite(FAULTS, out, quiet=True)
    finally:
        mp.undo()
        registry.algorithms.cache_clear()
    table = store.load(out).table.set_index("algorithm")
    table.attrs["path"] = out
    return table


def test_each_fault_is_recorded_with_a_reason(fault_table):
    status = fault_table["status"].to_dict()
    assert status == {"t_good": "ok", "t_segfault": "crash", "t_hang": "timeout",
                      "t_wrong": "fail", "t_raises": "error", "t_slowjit": "ok",
                      "t_lingers": "ok", "t_hog": "error"}
    reason = fault_table["reason"]
    assert "SIGSEGV" in reason["t_segfault"]
    assert "time limit" in reason["t_hang"]
    assert "bound" in reason["t_wrong"] and fault_table.loc["t_wrong", "err_bound_ratio"] > 1
    assert "ValueError" in reason["t_raises"]
    assert reason["t_good"] == ""
    assert "MemoryError" in reason["t_hog"]


def test_a_kernel_that_allocates_without_bound_is_stopped_by_the_limit(fault_table):
    """The worker's RLIMIT_DATA (harness.memory) makes t_hog's allocation fail at 1 GiB,
    long before its 6 GiB cap: the case is an error, the rest of the run goes on."""
    import json

    env = json.loads((fault_table.attrs["path"] / "environment.json").read_text())
    assert env["worker_memory_limit_bytes"] == memory.parse_size(WORKER_MEMORY) == 1 << 30
    assert fault_table.loc["t_good", "status"] == "ok"


def test_failed_cases_carry_no_timing(fault_table):
    bad = fault_table[fault_table["status"] != "ok"]
    assert (bad["n_values"] == 0).all() and bad["median_s"].isna().all()


def test_first_call_is_compile_time_not_a_value(fault_table):
    slow = fault_table.loc["t_slowjit"]
    assert slow["compile_s"] >= fault_kernels.FIRST_CALL_SLEEP_S - 0.05
    assert slow["max_s"] < fault_kernels.FIRST_CALL_SLEEP_S / 3


def test_a_thread_a_library_left_running_does_not_hold_the_worker(fault_table):
    """t_lingers leaves a non-daemon thread behind (a pool a library forgot to shut down):
    the worker still exits as soon as it has closed its channel (it skips the interpreter's
    teardown), so nothing waits for the exit grace or kills it, and its results stand.
    The guard for a worker that does outlive its channel: tests/test_supervise_exit.py."""
    import json

    env = json.loads((fault_table.attrs["path"] / "environment.json").read_text())
    assert "workers_killed_after_closing" not in env
    row = fault_table.loc["t_lingers"]
    assert row["status"] == "ok" and row["n_values"] == 2 * 3   # two processes, 3 values
