"""A worker that compiled numba kernels is thrown away and its job restarted
(harness/compiled.py); it must not build the group's library baselines first: they compile
nothing, and building one imports its library (torch: ~4.7 s of the smoke suite's cold run
per group).  The restarted worker verifies and times them."""

from __future__ import annotations

import json
import os
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


def test_the_compiling_worker_builds_no_library_baseline(tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    log = tmp_path / "builds.txt"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"),
           "CONVBENCH_EXTRA_KERNELS": "tests.library_kernels", BUILD_LOG_ENV: str(log)}
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "convbench", "run", str(suite), "-o",
                           str(out), "-q"], capture_output=True, text=True, timeout=600,
                          env=env, cwd=os.getcwd())
    assert done.returncode == 0, done.stderr
    environment = json.loads((out / "environment.json").read_text())
    assert environment["restarted_after_compile"], environment   # the cache was cold
    builds = log.read_text().split()
    assert len(set(builds)) == 1, builds          # only the worker that measured built it
    table = pd.read_parquet(out / "results.parquet").set_index("algorithm")
    assert set(table["status"]) == {"ok"} and {"direct", "t_library"} <= set(table.index)
