"""A worker that compiled numba kernels is thrown away and its job restarted
(harness/compiled.py); it must not build the group's library baselines first: they compile
nothing, and building one imports its library (torch: ~4.7 s of the smoke suite's cold run
per group).  The restarted worker verifies and times them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pandas as pd

from tests.library_kernels import BUILD_LOG_ENV

SUITE = """
name: restart
description: one layer, an own numba kernel and a library baseline
layers:
  - {name: conv3x3, shape: mb1ic8ih10oc8oh10kh3ph1, count: 1}
sweep:
  algorithms: [direct, t_library]
  layouts: [nchw]
  threads: [1]
  timing: {min_time: 0.002, values: 3, warmups: 1, timeout: 60, processes: 1}
"""


def _run(tmp_path, name: str, numba_cache: str) -> tuple[dict, list[str], pd.DataFrame]:
    """Run SUITE with its own build log; environment.json, the builds, the results."""
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    log = tmp_path / f"builds-{name}.txt"
    log.touch()
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / numba_cache),
           "XDG_CACHE_HOME": str(tmp_path / "xdg"),   # the compile stamps live here
           "CONVBENCH_MACHINE_DIR": str(tmp_path / "machine"),
           "CONVBENCH_EXTRA_KERNELS": "tests.library_kernels", BUILD_LOG_ENV: str(log)}
    out = tmp_path / name
    done = subprocess.run([sys.executable, "-m", "convbench", "run", str(suite), "-o",
                           str(out), "-q", "--no-measure-machine"], capture_output=True,
                          text=True, timeout=600, env=env, cwd=os.getcwd())
    assert done.returncode == 0, done.stderr
    table = pd.read_parquet(out / "results.parquet").set_index("algorithm")
    assert set(table["status"]) == {"ok"} and {"direct", "t_library"} <= set(table.index)
    return (json.loads((out / "environment.json").read_text()), log.read_text().split(),
            table)


def test_cold_cache_compiles_ahead_then_warm_runs_start_no_extra_worker(tmp_path):
    """A cold numba cache is filled by compile-only workers before timing
    (harness/precompile.py): no timing worker compiles, so none is restarted, and the
    compile-only workers build no library baseline.  The next run finds the stamps and
    starts no compile-only worker."""
    cold, builds, _ = _run(tmp_path, "cold", "numba-cache")
    assert cold["compiled_ahead"]["cases"] == 1, cold          # direct; not the library
    assert "restarted_after_compile" not in cold, cold          # every kernel was cached
    assert len(builds) == 1, builds    # only the worker that measured built the baseline
    warm, builds, _ = _run(tmp_path, "warm", "numba-cache")
    assert "compiled_ahead" not in warm and "restarted_after_compile" not in warm, warm
    assert len(builds) == 1, builds


def test_the_compiling_worker_builds_no_library_baseline(tmp_path):
    """When a timing worker compiles after all (numba's cache was wiped behind the
    stamps' back) it is restarted, and builds no library baseline first."""
    _run(tmp_path, "first", "numba-cache")
    shutil.rmtree(tmp_path / "numba-cache")
    environment, builds, _ = _run(tmp_path, "wiped", "numba-cache")
    assert "compiled_ahead" not in environment, environment      # the stamps said cached
    assert environment["restarted_after_compile"], environment   # the cache was cold
    assert len(set(builds)) == 1, builds          # only the worker that measured built it
