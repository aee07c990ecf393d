"""Results written by older formats still load in report and compare (the upgrade chain).

``tests/data/results_format1`` was written by ``convbench run`` at format 1 (main at
1873542): ok, fail and skip cases of two layers.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from convbench.results import schema
from convbench.results.load import ResultsError, load_results
from tests.conftest import DATA, convbench_process

FORMAT1 = DATA / "results_format1"


def test_format1_loads_as_the_current_format():
    assert json.loads((FORMAT1 / schema.MANIFEST).read_text())["format_version"] == 1
    run = load_results(FORMAT1)
    assert run.manifest["format_version"] == schema.FORMAT_VERSION
    assert run.manifest["upgraded_from"] == 1
    assert run.table["kernel_version"].isna().all()
    assert run.table["cpus"].isna().all()     # format 3 added it: workers were not pinned before
    assert (run.table["cache_model"] == "host").all()   # format 6: the host's caches
    assert set(run.table["status"]) == {"ok", "fail", "skip"}
    assert [c for c in schema.COLUMNS if c in run.table.columns] == list(schema.COLUMNS)
    assert (run.table["cache"] == "warm").all()


def test_format1_in_report_and_compare(tmp_path, cli):
    code, out, err = cli("report", FORMAT1, "-o", tmp_path / "rep", "--format", "md")
    assert code == 0, err
    assert "winograd2x2" in (tmp_path / "rep" / "report.md").read_text()
    code, out, err = cli("compare", FORMAT1, FORMAT1, "--format", "json")
    assert code == 0, err
    variants = json.loads(out)["variants"]
    assert variants and {v["kernel_code"] for v in variants} == {"unknown"}


def test_format1_against_a_current_run_of_its_suite(tmp_path, cli):
    """Old baseline, new run: the pairs match (same problems), the code is unknown."""
    new = tmp_path / "new"
    convbench_process("run", FORMAT1 / "suite.yaml", "-q", "--only", "algorithm=direct",
                      "-o", new, env={**os.environ,
                                      "CONVBENCH_EXTRA_KERNELS": "tests.fault_kernels"},
                      check=True)
    code, out, err = cli("compare", FORMAT1, new, "--format", "json")
    assert code in (0, 1), err      # timing may differ between sessions; input is fine
    paired = [v for v in json.loads(out)["variants"] if v["baseline"] and v["current"]]
    assert {v["variant"] for v in paired} == {"direct/nchw", "direct/nhwc"}
    assert len(paired) == 4


@pytest.mark.parametrize("version", [0, 99, "1", None])
def test_unknown_format_versions_are_refused(tmp_path, version):
    copy = tmp_path / "run"
    shutil.copytree(FORMAT1, copy)
    manifest = json.loads((copy / schema.MANIFEST).read_text())
    manifest["format_version"] = version
    (copy / schema.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ResultsError, match="results format version"):
        load_results(copy)


def test_format3_shares_above_one_are_flagged_on_load(tmp_path):
    """Formats up to 3 read bandwidth off sysfs levels and divided nominal FLOPs: a stored
    share above 1 loads flagged and left out, as format 4 writes it."""
    import pandas as pd

    from tests.results_factory import write_results

    run = write_results(tmp_path / "run", [
        dict(layer="L", algorithm="direct", layout="nchw", median=1e-3),
        dict(layer="L", algorithm="winograd2x2", layout="nhwc", median=1e-3)])
    table = pd.read_parquet(run / schema.RESULTS_PARQUET)
    table = table.drop(columns=["performed_flops", "roofline_gbs", "share_flag", "processes",
                                "process_spread", "compile_width", "vector_width_bits",
                                "cache_model"])   # format 6
    values = pd.read_parquet(run / schema.VALUES_PARQUET).drop(columns=["process"])
    values.to_parquet(run / schema.VALUES_PARQUET)
    table["peak_share"] = [0.5, 1.7]
    table["roofline_share"] = [0.9, 2.3]
    table.to_parquet(run / schema.RESULTS_PARQUET)
    manifest = json.loads((run / schema.MANIFEST).read_text())
    (run / schema.MANIFEST).write_text(json.dumps({**manifest, "format_version": 3}))
    loaded = load_results(run).table
    assert list(loaded.columns[:len(schema.COLUMNS)]) == list(schema.COLUMNS)
    assert list(loaded["share_flag"].fillna("").map(bool)) == [False, True]
    assert "peak_share 1.70" in loaded["share_flag"].iloc[1]
    assert loaded["peak_share"].iloc[0] == 0.5 and pd.isna(loaded["peak_share"].iloc[1])
