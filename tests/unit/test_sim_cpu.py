"""The CPU numba compiles for under valgrind: probed once, kept, and turned into the
environment and compile width of a counting pass (harness/counters/sim_cpu.py)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from convbench import host
from convbench.harness.counters import sim_cpu


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_the_probe_runs_once_and_its_answer_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cpu = sim_cpu.simulated_cpu()
    assert cpu is not None
    name, features = cpu
    assert name and "+" in features and "," in features
    assert "+avx512f" not in features.split(",")   # valgrind executes no AVX-512
    assert list(tmp_path.glob("convbench/sim-cpu-*.json"))

    real_run = subprocess.run

    def no_probe(argv, *args, **kwargs):
        assert "--tool=none" not in argv, "probed again"
        return real_run(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", no_probe)
    assert sim_cpu.simulated_cpu() == cpu


def test_the_width_names_the_cpu_and_its_features():
    a = sim_cpu.compile_width(("haswell", "+avx2,+fma"))
    assert a.startswith(host.SIM_WIDTH_PREFIX + "haswell-")
    assert sim_cpu.compile_width(("haswell", "+avx2,-fma")) != a   # other code, other stamp
    assert sim_cpu.compile_width(None) == ""
    assert sim_cpu.compile_env(("haswell", "+avx2")) == {"NUMBA_CPU_NAME": "haswell",
                                                          "NUMBA_CPU_FEATURES": "+avx2"}
