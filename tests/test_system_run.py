"""`convbench system` and the run's CPU pinning and busy warning, with real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

from convbench.harness import system
from convbench.results import schema
from tests.conftest import DATA, convbench_process

TINY = DATA / "tiny_suite.yaml"
ONE_CASE = "layer=conv1x1,algorithm=direct,layout=nchw"
ALLOWED = sorted(os.sched_getaffinity(0))


def _environment(run: Path) -> dict:
    return json.loads((run / schema.ENVIRONMENT_JSON).read_text())


def test_system_command_reports_every_item():
    done = convbench_process("system", "--json", "--window", "0.5", check=True)
    checks = json.loads(done.stdout)
    assert {c["item"] for c in checks} >= {"CPU frequency governor", "turbo / boost", "ASLR",
                                           "SMT siblings", "isolated CPUs", "load average",
                                           system.BUSY_ITEM, system.STEAL_ITEM,
                                           "perf_event_paranoid", "NMI watchdog",
                                           "numba threading layer"}
    for check in checks:
        assert check["value"] and check["verdict"] in system.VERDICTS, check
        if check["verdict"] == system.UNKNOWN:
            assert check["advice"], check
    table = convbench_process("system", "--window", "0.2", check=True).stdout
    assert table.splitlines()[0].split() == ["item", "verdict", "value"]
    assert "numba threading layer" in table


def test_run_pins_its_worker_to_the_cpus_given(tmp_path):
    """--cpus N: the worker reports affinity {N} (environment.json) and every row says N."""
    cpu = ALLOWED[-1]
    out = tmp_path / "pinned"
    done = convbench_process("run", TINY, "-q", "--only", ONE_CASE, "--cpus", cpu, "-o", out)
    assert done.returncode == 0, done.stderr
    workers = _environment(out)["workers"]
    assert [w["cpus"] for w in workers.values()] == [str(cpu)]
    assert pd.read_parquet(out / schema.RESULTS_PARQUET)["cpus"].tolist() == [str(cpu)]
    manifest = json.loads((out / schema.MANIFEST).read_text())
    assert manifest["options"]["cpus"] == [cpu]
    import pyperf

    bench = pyperf.BenchmarkSuite.load(str(out / schema.PYPERF_JSON)).get_benchmarks()[0]
    assert bench.get_metadata()["cpu_affinity"] == str(cpu)    # pyperf's own key


def test_resume_pins_to_the_same_cpus(tmp_path):
    """A run killed after one case resumes on the CPUs it started with."""
    cpu = ALLOWED[-1]
    out = tmp_path / "killed"
    killed = convbench_process("run", TINY, "-q", "--only", "layer=conv1x1,algorithm=direct",
                               "--cpus", cpu, "-o", out,
                               env={**os.environ, "CONVBENCH_TEST_KILL_AFTER": "1"})
    assert killed.returncode != 0
    resumed = convbench_process("run", "--resume", out)
    assert resumed.returncode == 0, resumed.stderr
    cpus = pd.read_parquet(out / schema.RESULTS_PARQUET)["cpus"]
    assert cpus.tolist() == [str(cpu)] * 2
    assert "busy_warning" in _environment(out)["resumed"][0]   # checked again at resume


def test_bad_cpus_are_one_line_and_exit_2():
    for args, expected in [(["--cpus", f"0-{ALLOWED[-1] + 64}"], "--cpus: expected CPUs"),
                           (["--cpus", str(ALLOWED[0]), "--threads", "2"],
                            "--cpus: expected at least 2 CPUs for 2 threads, got 1"),
                           (["--cpus", "one"], "--cpus: expected a CPU list")]:
        done = convbench_process("run", TINY, "--dry-run", *args)
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines() == [done.stderr.strip()], done.stderr
        assert expected in done.stderr


@contextmanager
def _busy_loops(cpus: list[int]) -> Iterator[None]:
    """A spinning Python process pinned to each of ``cpus``."""
    loop = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"
    procs = [subprocess.Popen([sys.executable, "-c", loop, str(c)]) for c in cpus]
    try:
        time.sleep(0.5)  # let them start spinning
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


@pytest.mark.serial   # it loads the CPUs
def test_a_busy_machine_gets_one_warning_line_recorded(tmp_path):
    out = tmp_path / "busy"
    with _busy_loops(ALLOWED):
        done = convbench_process("run", TINY, "-q", "--only", ONE_CASE, "-o", out)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "machine busy" in line]
    assert len(warned) == 1, done.stderr
    recorded = _environment(out)["busy_warning"]
    assert recorded and warned[0].endswith(recorded)
    items = {c["item"]: c for c in _environment(out)["system"]}
    assert items[system.BUSY_ITEM]["verdict"] == system.WARNING

