"""``convbench run`` end to end on a tiny suite: the results directory and pyperf on it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pandas as pd
import pytest

from convbench.harness import affinity, runner, supervise
from convbench.harness.plan import build_plan
from convbench.harness.threads import SETTLE_N
from convbench.kernels import layouts
from convbench.machine import store as machine_store
from convbench.machine.store import fastest_width
from convbench.report import units
from convbench.report.summary import run_summary
from convbench.results import schema, store
from convbench.spec.suite import load_suite
from tests.conftest import convbench_process

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "data" / "tiny_suite.yaml"


convbench = convbench_process


# Stored limits for this host, as `convbench machine` would write them (figures made up).
LIMITS = {"format_version": machine_store.FORMAT_VERSION,
          "peak_gflops": {"1": {"256": 50.0, "512": 100.0}},
          "bandwidth_curve": {"1": [[16 << 10, 200.0], [1 << 20, 100.0], [32 << 20, 50.0],
                                    [128 << 20, 20.0]]},
          "bandwidth_gbs": {"L1": {"1": 200.0}, "L2": {"1": 100.0}, "L3": {"1": 50.0},
                            "DRAM": {"1": 20.0}},
          "caches": {"L1": {"size_bytes": 32 << 10, "shared_by": 1},
                     "L2": {"size_bytes": 1 << 20, "shared_by": 1},
                     "L3": {"size_bytes": 32 << 20, "shared_by": 2}}}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny") / "run"
    machine_dir = tmp_path_factory.mktemp("machine")
    mp = pytest.MonkeyPatch()
    mp.setenv("CONVBENCH_MACHINE_DIR", str(machine_dir))
    try:
        machine_store.save({**LIMITS, "host": machine_store.host_identity()})
        outcome = runner.run_suite(TINY, out, quiet=True)
    finally:
        mp.undo()
    assert not outcome.interrupted
    return out


def test_directory_has_every_file(tiny_run):
    for name in (*schema.REQUIRED_FILES, schema.RESULTS_CSV, schema.PYPERF_JSON,
                 schema.SUITE_COPY):
        assert (tiny_run / name).is_file(), name
    manifest = json.loads((tiny_run / schema.MANIFEST).read_text())
    assert manifest["status"] == "complete"
    assert manifest["format_version"] == schema.FORMAT_VERSION
    env = json.loads((tiny_run / schema.ENVIRONMENT_JSON).read_text())
    for key in ("host", "cpu_model", "cpu_flags", "cores", "kernel", "governor", "libraries",
                "load_before", "load_after", "steal_share", "perf_binary", "system",
                "busy_warning"):
        assert key in env, key
    assert env["workers"]["t1/vauto"]["numba_threads"] == 1
    # pinned by default to one CPU per thread, reported by the worker and on every row
    pinned = env["workers"]["t1/vauto"]["cpus"]
    assert len(affinity.parse_cpu_list(pinned)) == 1
    measured = pd.read_parquet(tiny_run / schema.RESULTS_PARQUET).query("status != 'skip'")
    assert set(measured["cpus"]) == {pinned}
    assert env["workers"]["t1/vauto"]["numba_threading_layer"]
    # numba's code settings, which compare watches (NUMBA_OPT=0 compiles scalar code)
    assert env["workers"]["t1/vauto"]["numba_config"]["OPT"] == int(numba.config.OPT)
    # every BLAS/OpenMP pool at the case's thread count, OpenBLAS settled before timing
    assert {lib["num_threads"] for lib in env["workers"]["t1/vauto"]["blas"]} == {"1"}
    assert env["workers"]["t1/vauto"]["blas_settled_by"] == f"sgemm {SETTLE_N}^3"
    # idle threads of one library must not spin into the next variant's time
    spin = env["workers"]["t1/vauto"]["spin"]
    for key, value in supervise.QUIET_SPIN_ENV.items():
        assert spin[key] == os.environ.get(key, value)


def test_table_has_documented_columns_and_dtypes(tiny_run):
    table = store.load(tiny_run).table
    assert list(table.columns[:len(schema.COLUMNS)]) == list(schema.COLUMNS)
    for col, (dtype, _) in schema.COLUMNS.items():
        kind = {"string": pd.api.types.is_string_dtype, "bool": pd.api.types.is_bool_dtype,
                "int64": pd.api.types.is_integer_dtype,
                "float64": pd.api.types.is_float_dtype}[dtype]
        assert kind(table[col]), (col, table[col].dtype)
    plan = build_plan(load_suite(TINY))
    assert set(table["case_id"]) == {c.case_id for c in plan.cases}
    assert (table["status"] == "ok").all()
    ok = table
    assert (ok["min_s"] <= ok["median_s"]).all() and (ok["median_s"] <= ok["max_s"]).all()
    assert (ok["ci_low_s"] <= ok["median_s"]).all() and (ok["median_s"] <= ok["ci_high_s"]).all()
    assert (ok["processes"] == 1).all()      # the tiny suite's timing.processes
    assert (ok["n_values"] == 3).all() and (ok["loops"] >= 1).all()
    assert np.allclose(ok["gflops"], ok["flops"] / ok["median_s"] / 1e9)
    # shares of peak and of the roofline follow the limits stored for this host
    env = json.loads((tiny_run / schema.ENVIRONMENT_JSON).read_text())
    assert env["machine"]["peak_gflops"] == LIMITS["peak_gflops"]
    # auto compiled for the fastest width this CPU runs: 512 where it has AVX-512
    assert (ok["compile_width"] == fastest_width(LIMITS)).all()
    peak = LIMITS["peak_gflops"]["1"][fastest_width(LIMITS)]
    assert np.allclose(ok["peak_share"], ok["gflops"] / peak)
    assert np.allclose(ok["gbs"], ok["compulsory_bytes"] / ok["median_s"] / 1e9)
    # the tiny layers' footprints lie below the curve's first point: 200 GB/s, the L1 plateau
    assert (ok["roofline_gbs"] == 200.0).all()
    memory = ok["flops"] / ok["compulsory_bytes"] * 200.0
    assert (ok["roofline_level"] == np.where(memory < peak, "L1", "peak")).all()
    assert (ok["performed_flops"] == ok["flops"]).all()   # direct and im2col: nominal
    shares = ok["gflops"] / np.minimum(peak, memory)
    assert np.allclose(ok["roofline_share"].fillna(shares), shares)
    assert (ok["roofline_share"].isna() == (ok["share_flag"] != "")).all()
    assert (ok["ref_ratio"] > 0).all() and (ok["err_bound_ratio"] <= 1).all()
    assert (ok["compile_s"] >= 0).all() and (ok["prepare_s"] > 0).all()
    csv = pd.read_csv(tiny_run / schema.RESULTS_CSV)
    assert list(csv["case_id"]) == list(table["case_id"])


def test_each_case_carries_the_static_profile_of_the_code_it_ran(tiny_run):
    """Read by the timing worker from the code its run called (kernels/asm.py): direct's
    one kernel with packed FMAs; im2col's BLAS variant, whose arithmetic is BLAS's, only its
    unfold on the 3x3 layer and nothing of ours on the 1x1 (no unfold there)."""
    table = store.load(tiny_run).table.set_index(["layer", "variant"])
    for layer in ("conv3x3", "conv1x1"):
        for layout in ("nchw", "nhwc"):
            row = table.loc[(layer, f"direct/{layout}")]
            assert row["asm_kernels"] == f"_direct_{layout}:vectorised", row["asm_kernels"]
            assert row["asm_vectorisation"] == "vectorised"
            assert row[["asm_packed_fma_128", "asm_packed_fma_256",
                        "asm_packed_fma_512"]].sum() > 0
            assert row["asm_profile"].startswith("vectorised: ")
            assert re.search(r"\d+ x \d+-bit FMA", row["asm_profile"]), row["asm_profile"]
    assert table.loc[("conv3x3", "im2col/nhwc/gemm=blas"), "asm_kernels"].startswith(
        "_unfold_nhwc:")
    blas_1x1 = table.loc[("conv1x1", "im2col/nhwc/gemm=blas")]
    assert blas_1x1["asm_vectorisation"] == "no jitted kernel" and blas_1x1["asm_kernels"] == ""


def test_values_long_form(tiny_run):
    res = store.load(tiny_run)
    values = res.values
    assert list(values.columns) == list(schema.VALUE_COLUMNS)
    assert len(values) == res.table["n_values"].sum()
    for case_id, group in values.groupby("case_id"):
        row = res.table.set_index("case_id").loc[case_id]
        assert np.isclose(np.median(group["value"]), row["median_s"])
        ratio = np.median(group["value"] / group["ref_value"])
        assert np.isclose(ratio, row["ref_ratio"])
        assert list(group["process"]) == [0, 0, 0]   # one process (tests/test_processes.py
        assert list(group["round"]) == [0, 1, 2]      # covers several)


@pytest.mark.parametrize("cmd", ["stats", "show"])
def test_pyperf_reads_the_suite(tiny_run, cmd):
    out = subprocess.run([sys.executable, "-m", "pyperf", cmd, str(tiny_run / "pyperf.json")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "conv3x3/im2col/nchw/gemm=blas/t1/vauto" in out.stdout


def test_pyperf_metadata(tiny_run):
    import pyperf

    suite = pyperf.BenchmarkSuite.load(str(tiny_run / "pyperf.json"))
    bench = suite.get_benchmark("conv1x1/direct/nhwc/t1/vauto")
    meta = bench.get_metadata()
    assert meta["threads"] == 1 and meta["vector_width"] == "auto"
    assert meta["flops"] == 2 * 8 * 8 * 8 * 16 and meta["loops"] >= 1
    assert bench.get_nrun() == 1 and bench.get_nvalue() == 3   # a pyperf run per process


def test_summary_names_best_variant_per_layer(tiny_run):
    text = run_summary(store.load(tiny_run).table)
    assert "conv3x3" in text and "conv1x1" in text and "network total" in text


def test_resume_after_kill_completes_the_same_cases(tiny_run, tmp_path):
    import os

    out = tmp_path / "killed"
    env = {**os.environ, runner.KILL_AFTER_ENV: "2"}
    first = convbench("run", str(TINY), "-o", str(out), "-q", env=env)
    assert first.returncode == -9, first.stderr
    partial = store.load(out)
    assert partial.manifest["status"] == "running"
    assert len(partial.table) == 2
    second = convbench("run", "--resume", str(out), "-q")
    assert second.returncode == 0, second.stderr
    done = store.load(out)
    assert done.complete
    full = store.load(tiny_run)
    assert sorted(done.table["case_id"]) == sorted(full.table["case_id"])
    assert len(done.values) == done.table["n_values"].sum()
    # the two runs compare with pyperf
    compare = subprocess.run([sys.executable, "-m", "pyperf", "compare_to",
                              str(tiny_run / "pyperf.json"), str(out / "pyperf.json")],
                             capture_output=True, text=True)
    assert compare.returncode == 0, compare.stderr
    assert "conv3x3/direct/nchw/t1/vauto" in compare.stdout


def test_resume_of_a_complete_run_measures_nothing(tiny_run, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(tiny_run, copy)
    outcome = runner.resume(copy, quiet=True)
    assert len(outcome.rows) == len(store.load(tiny_run).table)


def test_cli_dry_run_and_user_errors():
    dry = convbench("run", str(TINY), "--dry-run", "--only", "layer=conv3x3")
    assert dry.returncode == 0, dry.stderr
    assert "4 cases" in dry.stdout and "estimate" in dry.stdout
    for args, message in [(["--counters", "pmu"], "Invalid value"),
                          (["--only", "colour=red"], "unknown key")]:
        bad = convbench("run", str(TINY), "--dry-run", *args)
        assert bad.returncode == 2 and message in bad.stderr, bad.stderr


def test_cli_rejects_more_threads_than_cores(tmp_path):
    import os

    text = TINY.read_text().replace("threads: [1]", f"threads: [{(os.cpu_count() or 1) + 1}]")
    suite = tmp_path / "many.yaml"
    suite.write_text(text)
    bad = convbench("run", str(suite), "--dry-run")
    assert bad.returncode == 2 and "exceed" in bad.stderr


def test_sigterm_leaves_an_interrupted_run_that_resumes(tmp_path):
    import os
    import signal
    import time

    out = tmp_path / "term"
    proc = subprocess.Popen([sys.executable, "-m", "convbench", "run", str(TINY), "-o",
                             str(out), "-q", "--values", "30", "--min-time", "0.01"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not (out / schema.MANIFEST).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert store.load(out).manifest["status"] == "interrupted"
    assert "--resume" in err.decode()


def test_help_documents_filters():
    out = convbench("run", "--help")
    assert out.returncode == 0 and "KEY=GLOB" in out.stdout and "--resume" in out.stdout


def test_timed_buffers_start_on_a_page() -> None:
    """The kernels' input and output never start at a process-dependent offset."""
    from convbench.harness.inputs import make_inputs
    from convbench.harness.verify import prepare
    from convbench.kernels.base import Variant
    from convbench.kernels.buffers import PAGE_BYTES
    from convbench.spec.descriptor import parse_descriptor

    problem = parse_descriptor("mb1ic5ih7oc3oh7kh3ph1")
    x, w = make_inputs(problem)
    for layout in ("nchw", "nhwc"):
        ex = prepare(problem, Variant("direct", layout, ()), x, w)
        assert ex.x.ctypes.data % PAGE_BYTES == 0 and ex.y.ctypes.data % PAGE_BYTES == 0
        assert ex.x.flags.c_contiguous and np.isnan(ex.y).all()
        assert np.array_equal(layouts.from_layout(ex.x, layout, problem.ic), x)


def _seconds(text: str) -> float:
    value, unit = text.split()
    return float(value) * {"s": 1.0, "ms": 1e-3, "us": 1e-6}[unit]


def test_terminal_network_totals_equal_the_reports(tmp_path):
    """After --threads 1,2 the summary's totals are per thread count, as in the report."""
    out, rep = tmp_path / "run", tmp_path / "rep"
    run = convbench("run", str(TINY), "--threads", "1,2", "--only", "algorithm=direct",
                    "-o", str(out), "-q")
    assert run.returncode == 0, run.stderr
    printed = {int(m[1]): _seconds(m[2]) for m in re.finditer(
        r"network total at (\d+) thread\(s\), best plan \(fastest variant per layer x "
        r"count\) over 2/2 layers: ([\d.]+ \w+)",
        run.stdout)}
    assert set(printed) == {1, 2}, run.stdout
    made = convbench("report", str(out), "--format", "md", "-o", str(rep))
    assert made.returncode == 0, made.stderr
    text = (rep / "report.md").read_text()
    network = text[text.index("## Network totals"):]
    in_report = {int(m[1]): units.parse(m[2]) for m in re.finditer(
        r"^\| (\d+) \| best plan \| 2/2 \| ([^|]+) \|", network, re.M)}
    assert set(in_report) == {1, 2}
    for threads, seconds in printed.items():
        assert seconds == pytest.approx(in_report[threads], rel=2e-3)
    assert printed[1] != printed[2]
