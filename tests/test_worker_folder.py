"""A worker starts in a folder of its own (its sys.path then holds nothing the runner's
folder holds, which moved simulated counts: counters/sim.py), so what its environment
names relative to the runner's folder is made absolute first."""

from __future__ import annotations

import os

from convbench.harness import supervise
from convbench.harness.plan import build_plan
from convbench.harness.protocol import Result
from convbench.kernels import registry
from convbench.spec.suite import load_suite
from tests.conftest import DATA


def test_a_relative_numba_cache_is_the_runners_folder(tmp_path, monkeypatch):
    """A real worker compiles into NUMBA_CACHE_DIR=rel-cache, given from the runner's folder:
    the cache lands there, not in the worker's own folder (which is removed with it)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NUMBA_CACHE_DIR", "rel-cache")
    plan = build_plan(load_suite(DATA / "tiny_suite.yaml"),
                      only=["layer=conv1x1,variant=direct/nhwc"])
    job = supervise.job_for(plan.runnable, plan.timing, "none", seed=0,
                            restart_if_compiled=False)
    results: list[Result] = []
    end = supervise.WorkerProcess(job, plan.timing.timeout, scratch=tmp_path).run(
        lambda m: results.append(m) if isinstance(m, Result) else None)
    assert end.status is None and [r.status for r in results] == ["ok"], end
    assert list((tmp_path / "rel-cache").rglob("*.nbi")), "numba cached elsewhere"


def test_the_worker_env_names_the_runners_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    environ = {"PYTHONPATH": os.pathsep.join(["src", "/abs", ""]), "XDG_CACHE_HOME": "c"}
    env = supervise.worker_env(environ)
    assert env["PYTHONPATH"].split(os.pathsep) == [str(tmp_path / "src"), "/abs",
                                                   str(tmp_path)]
    assert env["XDG_CACHE_HOME"] == str(tmp_path / "c")
    assert registry.EXTRA_KERNELS_DIR_ENV not in env    # no extra modules, nothing to find
    env = supervise.worker_env({registry.EXTRA_KERNELS_ENV: "tests.fault_kernels"})
    assert env[registry.EXTRA_KERNELS_DIR_ENV] == str(tmp_path)
    assert env["OPENBLAS_THREAD_TIMEOUT"] == supervise.QUIET_SPIN_ENV["OPENBLAS_THREAD_TIMEOUT"]
