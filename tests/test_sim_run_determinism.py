"""`convbench run --counters sim` gives the same simulated counts twice (the deterministic
gate of `convbench compare` relies on it)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

TINY = Path(__file__).parent / "data" / "tiny_suite.yaml"


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_two_sim_runs_count_the_same(tmp_path):
    only = ["--only", "layer=conv1x1,variant=im2col/nhwc*"]
    # A first run fills numba's on-disk cache for the CPU valgrind emulates: a process that
    # compiles leaves a different heap behind than one that loads, shifting counts by ~0.2%.
    warm = subprocess.run([sys.executable, "-m", "convbench", "run", str(TINY), "-o",
                           str(tmp_path / "warm"), "--counters", "sim", "-q", *only],
                          capture_output=True, text=True, timeout=300)
    assert warm.returncode == 0, warm.stderr
    tables = []
    for name in ("a", "b"):
        out = tmp_path / name
        r = subprocess.run([sys.executable, "-m", "convbench", "run", str(TINY), "-o", str(out),
                            "--counters", "sim", "-q", *only],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        tables.append(pd.read_parquet(out / "results.parquet"))
    cols = ["sim_ir", "sim_dr", "sim_dw", "sim_d1mr", "sim_d1mw", "sim_dlmr", "sim_dlmw"]
    a, b = (t.set_index("case_id")[cols] for t in tables)
    assert len(a) == 1 and a.notna().all().all()
    pd.testing.assert_frame_equal(a, b)
    gate = subprocess.run([sys.executable, "-m", "convbench", "compare", str(tmp_path / "a"),
                           str(tmp_path / "b"), "--fail-on", "instructions"],
                          capture_output=True, text=True, timeout=120)
    assert gate.returncode == 0, gate.stdout + gate.stderr
