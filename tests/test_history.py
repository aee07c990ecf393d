"""convbench history (issue 20): one table over many runs, steps in each series, and the
compare gate against the last stable level.  The runs are synthetic results directories in
the documented format (tests/results_factory.py), 20 of them, with 1% run-to-run noise on
top of each run's own 2% value spread."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from convbench.history import table, trends
from convbench.history.runs import find_runs
from tests.results_factory import write_results

LAYERS = ("conv_a", "conv_b", "conv_c")
ALGORITHMS = ("direct", "im2col")
STEPPED = ("conv_b", "direct")
RUNS = 20


def _cases(run: int, rng: np.random.Generator, step: float, step_at: int,
           slower: dict | None = None) -> list[dict]:
    cases = []
    for i, layer in enumerate(LAYERS):
        for j, algorithm in enumerate(ALGORITHMS):
            median = 1e-3 * (1 + i + 0.5 * j) * float(np.exp(rng.normal(0, 0.01)))
            if (layer, algorithm) == STEPPED and run >= step_at:
                median *= step
            median *= (slower or {}).get((layer, algorithm), 1.0)
            cases.append({"layer": layer, "algorithm": algorithm, "layout": "nchw",
                          "median": median})
    return cases


def _history(root: Path, step: float = 1.0, step_at: int = 12) -> Path:
    """RUNS runs r1..r20 under root, one a day; STEPPED is ``step`` x slower from
    ``step_at`` on.  Directory names sort against run order, so order comes from
    ``created``."""
    for run in range(1, RUNS + 1):
        rng = np.random.default_rng(1000 + run)
        write_results(root / f"z{RUNS - run:02d}", _cases(run, rng, step, step_at),
                      seed=run, created=f"2026-11-{run:02d}T00:00:00Z", label=f"r{run}")
    return root


def test_a_ten_percent_step_is_found_at_run_12_and_nowhere_else(tmp_path, cli):
    root = _history(tmp_path / "history", step=1.10)
    frame = table.history_table(find_runs(root))
    found = trends.find_steps(frame)
    assert len(found) == 1, found
    step = found.iloc[0]
    assert (step["layer"], step["variant"]) == ("conv_b", "direct/nchw")
    assert (step["run"], step["label"]) == (12, "r12")
    assert 1.07 < step["ratio"] < 1.13
    code, out, _ = cli("history", root)
    assert code == 0
    assert "20 runs (r1 .. r20), 1 host(s), 6 series" in out
    assert "1 step(s) in 6 series" in out and " r12 " in out


def test_aa_runs_have_no_step(tmp_path, cli):
    root = _history(tmp_path / "history")
    assert trends.find_steps(table.history_table(find_runs(root))).empty
    code, out, _ = cli("history", root, "--engine", "pandas", "--csv", tmp_path / "h.csv")
    assert code == 0 and "no step in 6 series" in out
    assert len((tmp_path / "h.csv").read_text().splitlines()) == 1 + RUNS * 6


@pytest.mark.skipif(importlib.util.find_spec("duckdb") is None,
                    reason="duckdb not installed (pip install 'convbench[history]')")
def test_duckdb_and_pandas_read_the_same_table(tmp_path):
    runs = find_runs(_history(tmp_path / "history", step=1.10))
    by_duckdb, by_pandas = table.history_table(runs, "duckdb"), table.history_table(runs, "pandas")
    assert list(by_duckdb.columns) == list(table.COLUMNS)
    assert by_duckdb.equals(by_pandas)


def test_runs_are_ordered_by_creation_and_labelled(tmp_path):
    root = tmp_path / "history"
    rng = np.random.default_rng(0)
    write_results(root / "a", _cases(1, rng, 1.0, 99), created="2026-11-03T00:00:00Z")
    write_results(root / "b", _cases(1, rng, 1.0, 99), created="2026-11-01T00:00:00Z",
                  label="before-the-change")
    write_results(root / "c", _cases(1, rng, 1.0, 99), created="2026-11-02T00:00:00Z")
    env = json.loads((root / "c" / "environment.json").read_text())
    (root / "c" / "environment.json").write_text(json.dumps({**env,
                                                             "git_commit": "0123abcd"}))
    write_results(root / "d", _cases(1, rng, 1.0, 99), status="running")
    assert [r.label for r in find_runs(root)] == ["before-the-change", "0123abcd", "a"]


def test_compare_gates_against_the_last_stable_level(tmp_path, cli):
    root = _history(tmp_path / "history", step=1.10)
    rng = np.random.default_rng(7)
    # at the stepped series' new level: against run 1 that is 10% slower, against the
    # last stable level it is no change
    same = write_results(tmp_path / "same", _cases(RUNS, rng, 1.10, 12), seed=99)
    code, out, _ = cli("compare", "--baseline", f"history:{root}", same)
    assert code == 0, out
    code, out, _ = cli("compare", root / "z19", same)   # run 1 alone
    assert code == 1 and "conv_b|direct/nchw" in out
    slower = write_results(tmp_path / "slower",
                           _cases(RUNS, rng, 1.10, 12, {("conv_a", "im2col"): 1.15}), seed=98)
    code, out, _ = cli("compare", "--baseline", f"history:{root}", slower)
    assert code == 1
    regressions = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert len(regressions) == 1 and "conv_a|im2col/nchw" in regressions[0], out
    # the stepped series' baseline is its last level alone: runs 12..20, 10 values each
    stepped = next(line for line in out.splitlines() if "conv_b|direct/nchw" in line)
    assert " 90/10 " in stepped, out


def test_history_user_errors(tmp_path, cli):
    code, _, err = cli("history", tmp_path / "nowhere")
    assert code == 2
    code, _, err = cli("history", tmp_path)
    assert code == 2 and "no complete results directory" in err
    code, _, err = cli("compare", "--baseline", f"history:{tmp_path}", "a", "b")
    assert code == 2 and "--baseline BASELINE and CURRENT" in err


def test_report_has_a_trend_section(tmp_path, cli):
    root = _history(tmp_path / "history", step=1.10)
    code, out, _ = cli("report", root / "z00", "--history", root, "-o", tmp_path / "report")
    assert code == 0, out
    page = (tmp_path / "report" / "index.html").read_text()
    assert '<section id="trends"><h2>Trends</h2>' in page
    assert "20 runs, 6 series, 1 step(s)" in page and 'id="fig-trends"' in page
