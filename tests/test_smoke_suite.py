"""The shipped smoke suite, run for real once: every registered algorithm family gets an ok
case, the library baselines an ok case or a "not installed" skip, and the run's closing
summary says what a new user needs next.

One run is shared by the session (tests/conftest.py's ``smoke_run``; a cold one compiles
every kernel: a minute or more on 2 cores).  Its duration is the lead's benchmark, never
asserted here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest


@pytest.fixture(scope="module")
def smoke(smoke_run) -> tuple[subprocess.CompletedProcess, pd.DataFrame, Path]:
    done, out = smoke_run
    return done, pd.read_parquet(out / "results.parquet"), out


def test_every_algorithm_family_runs(smoke):
    from convbench.kernels import registry

    _done, frame, _out = smoke
    ok = set(frame[frame["status"] == "ok"]["algorithm"])
    for name, alg in registry.algorithms().items():
        if name in ok:
            continue
        reasons = set(frame[frame["algorithm"] == name]["reason"])
        assert alg.baseline, f"own algorithm {name} has no ok case: {reasons}"
        assert reasons and all("not installed" in r for r in reasons), (name, reasons)


def test_every_own_ok_case_has_vectorised_code_and_no_library_is_read(smoke):
    """The static profile of each own variant the smoke suite runs (BLAS-only ones
    excepted: "no jitted kernel", or "no FP" where their jitted part is an im2col unfold,
    which LLVM may copy with integer vector moves, as on zmm hosts); library baselines are
    not numba code and have none."""
    from convbench.kernels import registry

    _done, frame, _out = smoke
    ok = frame[frame["status"] == "ok"]
    library = ok["algorithm"].map(lambda name: registry.get(name).baseline)
    assert ok.loc[library, "asm_vectorisation"].isna().all()
    own = ok[~library]
    verdicts = set(own["asm_vectorisation"])
    assert verdicts <= {"vectorised", "no jitted kernel", "no FP"}, own[
        ["variant", "asm_profile"]]
    blas_only = own[own["asm_vectorisation"] == "no jitted kernel"]
    assert len(blas_only) and blas_only["variant"].str.contains("gemm=blas").all(), blas_only
    copies = own[own["asm_vectorisation"] == "no FP"]
    assert copies["variant"].str.contains("gemm=blas").all(), copies[["variant", "asm_kernels"]]
    assert copies["asm_kernels"].str.fullmatch(r"(_unfold_\w+:no FP,?)+").all(), copies[
        ["variant", "asm_kernels"]]


def test_own_gemm_and_blas_both_run(smoke):
    """im2col is two families in one: BLAS sgemm and convbench's own packed GEMM."""
    _done, frame, _out = smoke
    im2col = frame[(frame["algorithm"] == "im2col") & (frame["status"] == "ok")]
    assert {"gemm=own", "gemm=blas"} <= {v.rpartition("/")[2] for v in im2col["variant"]}


def test_nothing_breaks(smoke):
    _done, frame, _out = smoke
    assert set(frame["status"]) <= {"ok", "skip"}, frame[["variant", "status", "reason"]]


def test_summary_says_where_and_what_next(smoke):
    done, frame, out = smoke
    text = done.stdout
    for layer in frame["layer"].unique():
        assert layer in text
    assert f"results: {out}" in text
    assert f"convbench report {out}" in text
    assert "e-0" not in text      # human units, never 9.055e-05 s
