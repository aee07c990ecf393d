"""Damaged results directories: ``report`` and ``compare`` succeed or say what is wrong.

Issue 16, item 3.  Hypothesis copies an intact results directory and damages one file
the way disks, copies and hands do (truncated, overwritten, deleted, emptied, not UTF-8),
or one column of a table (dropped, renamed, retyped, nulls, text, huge, NaN, inf) or one
JSON value (a list, number, text, null or deep nesting where something else belongs).  The
only acceptable outcomes: the entry point works, or it raises a ConvbenchError of one line
that names the damaged directory (the CLI's exit 2).  Anything else is a bug; a compare
that crashed would exit 1 and read to a CI gate as a regression.

``CONVBENCH_FUZZ_EXAMPLES`` scales the number of examples (default 150);
``CONVBENCH_FUZZ_STATS=FILE`` writes the tried/handled counts per damage class there.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convbench.compare.gate import compare_runs
from convbench.errors import ConvbenchError
from convbench.report.build import build_report
from convbench.results import schema
from convbench.results.load import load_results, read_pyperf
from tests.conftest import ROOT
from tests.results_factory import write_results

EXAMPLES = int(os.environ.get("CONVBENCH_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
FILES = (schema.MANIFEST, schema.ENVIRONMENT_JSON, schema.RESULTS_PARQUET,
         schema.VALUES_PARQUET)
TABLES = (schema.RESULTS_PARQUET, schema.VALUES_PARQUET)
JSONS = (schema.MANIFEST, schema.ENVIRONMENT_JSON)

# damage class -> [tried, handled with an error]; the rest of tried worked
COUNTS: dict[str, Counter] = {}

MACHINE = {"peak_gflops": {"1": {"256": 90.0}}, "bandwidth_gbs": {"DRAM": {"1": 15.0}}}


def intact(directory: Path) -> Path:
    cases = [dict(layer=layer, algorithm=alg, layout=layout, median=m * k,
                  params={"gemm": "blas"} if alg == "im2col" else {})
             for k, layer in ((1, "conv1"), (2, "conv2"))
             for alg, layout, m in (("direct", "nchw", 4e-3), ("im2col", "nhwc", 2e-3))]
    cases.append(dict(layer="conv2", algorithm="winograd", layout="nchw", median=0,
                      status="skip", reason="3x3 only"))
    return write_results(directory, cases, n_values=6, machine=MACHINE)


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Path:
    return intact(tmp_path_factory.mktemp("fuzz") / "intact")


# --- the damage -------------------------------------------------------------------------

def _bytes(draw: Callable, path: Path) -> str:
    data = path.read_bytes()
    how = draw(st.sampled_from(["truncate", "random", "delete", "empty", "not-utf8", "flip"]))
    if how == "truncate":
        path.write_bytes(data[:draw(st.integers(0, max(0, len(data) - 1)))])
    elif how == "random":
        path.write_bytes(draw(st.binary(min_size=1, max_size=600)))
    elif how == "delete":
        path.unlink()
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "not-utf8":
        path.write_bytes(b"\xff\xfe\xc3(" + data[:40])
    else:  # one byte changed where it lands
        at = draw(st.integers(0, len(data) - 1))
        path.write_bytes(data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:])
    return f"bytes:{how}"


_FILLS: dict[str, Callable[[pd.Series], pd.Series]] = {
    "nulls": lambda s: pd.Series([None] * len(s), dtype=object),
    "text": lambda s: pd.Series(["x"] * len(s), dtype=object),
    "numbers-as-text": lambda s: s.astype(str),
    "huge": lambda s: pd.Series([1e308] * len(s)),
    "huge-int": lambda s: pd.Series([2**62] * len(s), dtype="int64"),
    "nan": lambda s: pd.Series([np.nan] * len(s)),
    "inf": lambda s: pd.Series([np.inf] * len(s)),
    "negative": lambda s: pd.Series([-1.0] * len(s)),
    "zero": lambda s: pd.Series([0] * len(s), dtype="int64"),
    "float": lambda s: pd.Series(np.arange(len(s)) + 0.5),
    "int": lambda s: pd.Series(np.arange(len(s)), dtype="int64"),
    "bool": lambda s: pd.Series([True] * len(s)),
    "list": lambda s: pd.Series([[1, 2]] * len(s), dtype=object),
}


def _column(draw: Callable, path: Path) -> str:
    frame = pd.read_parquet(path)
    column = draw(st.sampled_from(sorted(frame.columns)))
    how = draw(st.sampled_from(["drop", "rename", *_FILLS]))
    if how == "drop":
        frame = frame.drop(columns=[column])
    elif how == "rename":
        frame = frame.rename(columns={column: column + "_x"})
    else:
        frame[column] = _FILLS[how](frame[column]).to_numpy()
    frame.to_parquet(path)
    return f"column:{how}"


def _deep(levels: int) -> list:
    value: list = [0]
    for _ in range(levels):
        value = [value]
    return value


_VALUES = st.one_of(st.lists(st.integers(), max_size=3), st.integers(), st.floats(),
                    st.text(max_size=5), st.none(), st.booleans(),
                    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                    st.just(_deep(40)))


def _json(draw: Callable, path: Path) -> str:
    data = json.loads(path.read_text())
    value = draw(_VALUES)
    paths = [[k] for k in data] + [["machine", k] for k in data.get("machine", {})] + [
        ["machine", "peak_gflops", "1"], ["machine", "bandwidth_gbs", "DRAM", "1"],
        ["options"], ["planned", 0]]
    where = draw(st.sampled_from([[], *paths]))
    if not where:
        data = value
    else:
        node = data
        for key in where[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]
        if isinstance(node, list):
            node[0 if not node else min(where[-1], len(node) - 1)] = value
        else:
            node[where[-1]] = value
    path.write_text(json.dumps(data))
    return "json:" + ("document" if not where else type(value).__name__)


@st.composite
def damaged(draw: Callable, source: Path, target: Path) -> tuple[Path, str]:
    """A copy of ``source`` at ``target`` with one file damaged; the damage class."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    name = draw(st.sampled_from(FILES))
    kind = draw(st.sampled_from(["bytes", "structure"]))
    if kind == "bytes":
        how = _bytes(draw, target / name)
    elif name in TABLES:
        how = _column(draw, target / name)
    else:
        how = _json(draw, target / name)
    return target, f"{name}:{how}"


def _outcome(label: str, call: Callable[[], object], directory: Path) -> None:
    """Run ``call``: fine, or a one-line ConvbenchError naming ``directory``."""
    tried = COUNTS.setdefault(label, Counter())
    tried["tried"] += 1
    try:
        call()
    except ConvbenchError as exc:
        message = str(exc)
        assert "\n" not in message, message
        assert str(directory) in message, message
        tried["handled"] += 1


# --- in process ---------------------------------------------------------------------------

@FUZZ
@given(data=st.data())
def test_damaged_directory_loads_or_says_why(original, tmp_path, data):
    run, label = data.draw(damaged(original, tmp_path / "run"))
    _outcome(label, lambda: load_results(run), run)


@settings(FUZZ, max_examples=max(10, EXAMPLES * 2 // 3))   # two compares per example
@given(data=st.data())
def test_damaged_directory_compares_or_says_why(original, tmp_path, data):
    run, label = data.draw(damaged(original, tmp_path / "run"))
    _outcome("compare " + label, lambda: compare_runs(original, run), run)
    _outcome("compare (reversed) " + label, lambda: compare_runs(run, original), run)


@settings(FUZZ, max_examples=max(8, EXAMPLES // 15))
@given(data=st.data())
def test_damaged_directory_reports_or_says_why(original, tmp_path, data):
    """The whole report (figures included) where the damage left a loadable directory:
    slower, so fewer examples."""
    run, label = data.draw(damaged(original, tmp_path / "run"))
    for fmt in ("csv", "md", "html"):
        _outcome(f"report {fmt} " + label,
                 lambda fmt=fmt: build_report([run], tmp_path / f"report-{fmt}", fmt), run)


@FUZZ
@given(cut=st.integers(0, 10**6))
def test_truncated_gzip_pyperf_file_is_an_input_error(tmp_path, cut):
    """compare's other input: a truncated ``.json.gz`` once escaped as EOFError, which
    click turned into exit 130 ("interrupted")."""
    packed = gzip.compress(_pyperf_json())
    path = tmp_path / "bench.json.gz"
    path.write_bytes(packed[:cut % len(packed)])
    _outcome("pyperf:gzip-truncated", lambda: read_pyperf(path), path)


def _pyperf_json() -> bytes:
    import tempfile

    import pyperf

    bench = pyperf.Benchmark([pyperf.Run([1e-3, 1.1e-3], metadata={"name": "l/v/t1/vauto"},
                                         collect_metadata=False)])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.json"
        pyperf.BenchmarkSuite([bench]).dump(str(path))
        return path.read_bytes()


# --- the command line -------------------------------------------------------------------

CLI_DAMAGE = [
    (schema.RESULTS_PARQUET, lambda p: p.write_bytes(p.read_bytes()[:100]), 2),
    (schema.VALUES_PARQUET, lambda p: p.write_bytes(b"PAR1garbagePAR1"), 2),
    (schema.MANIFEST, lambda p: p.write_text('{"options": [], "format_version": 4, '
                                             '"status": "complete", "planned": 3}'), 2),
    (schema.ENVIRONMENT_JSON, lambda p: p.write_text("[1, 2]"), 2),
    (schema.ENVIRONMENT_JSON, lambda p: p.write_bytes(b'{"host": "\xff"}'), 2),
    (schema.MANIFEST, lambda p: p.write_text("4"), 2),
    (schema.RESULTS_PARQUET, lambda p: _retype(p, "median_s", str), 2),
    (schema.RESULTS_PARQUET, lambda p: _retype(p, "case_id", lambda s: np.arange(len(s))), 2),
    (schema.RESULTS_PARQUET, lambda p: _retype(p, "threads", lambda s: s.astype(float)), 0),
    (schema.ENVIRONMENT_JSON, lambda p: p.write_text('{"host": "elsewhere"}'), 0),
]


def _retype(path: Path, column: str, how: Callable) -> None:
    frame = pd.read_parquet(path)
    frame[column] = how(frame[column]) if how is not str else frame[column].astype(str)
    frame.to_parquet(path)


@pytest.mark.parametrize("case", range(len(CLI_DAMAGE)))
def test_cli_exit_codes_on_damage(original, tmp_path, case):
    name, damage, expected = CLI_DAMAGE[case]
    run = tmp_path / "run"
    shutil.copytree(original, run)
    damage(run / name)
    command = ["report", run, "--format", "md", "-o", tmp_path / "rep"] if case % 2 else [
        "compare", original, run]
    done = subprocess.run([sys.executable, "-m", "convbench", *map(str, command)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    allowed = {expected} if command[0] == "report" or expected == 2 else {0, 1}
    assert done.returncode in allowed, (done.returncode, done.stderr)
    if done.returncode == 2:
        assert done.stderr.startswith("convbench: error: ") and str(run) in done.stderr
        assert done.stderr.count("\n") == 1, done.stderr


def test_zz_counts():
    """Not a check: writes the tried / handled counts (CONVBENCH_FUZZ_STATS=FILE)."""
    target = os.environ.get("CONVBENCH_FUZZ_STATS")
    if target:
        Path(target).write_text(json.dumps({k: dict(v) for k, v in sorted(COUNTS.items())},
                                           indent=1))


def test_a_string_cell_that_is_not_utf8_is_refused_where_it_is_read(original, tmp_path):
    """pandas decodes parquet strings lazily: a flipped byte inside a case id once passed
    the reader and escaped from compare as UnicodeDecodeError (a CI fuzz run)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    run = tmp_path / "run"
    shutil.copytree(original, run)
    table = pq.read_table(run / schema.RESULTS_PARQUET)
    bad = pa.array([b"\xe3\x28" + s.encode() for s in table["case_id"].to_pylist()],
                   type=pa.binary()).view(pa.string())
    pq.write_table(table.set_column(table.schema.get_field_index("case_id"), "case_id", bad),
                   run / schema.RESULTS_PARQUET)
    for call in (lambda: load_results(run), lambda: compare_runs(original, run),
                 lambda: compare_runs(run, original)):
        with pytest.raises(ConvbenchError, match=r"not a readable parquet table.*UTF8"):
            call()
