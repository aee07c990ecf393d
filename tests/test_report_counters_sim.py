"""The report's counter panels from a real `convbench run --counters sim` (callgrind): the
figure is drawn and the page holds the simulated figures of results.parquet, in the units
the report uses.  The run is the session's first simulated run of one case (conftest's
``sim_runs``, which tests/test_sim_run_determinism.py compares with a second)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import pandas as pd
import pytest

from convbench.report.build import build_report
from convbench.report.units import count, percent
from tests.report_cases import sample_run


@pytest.fixture(scope="module")
def sim_run(sim_runs) -> Path:
    """The first of conftest's two simulated runs of one case (one process, under valgrind)."""
    runs, folder = sim_runs
    assert runs[0]["returncode"] == 0, runs[0]["stderr"]
    return folder / "a"


def test_counter_panel_and_table_hold_the_simulated_figures(sim_run, tmp_path):
    row = pd.read_parquet(sim_run / "results.parquet").iloc[0]
    assert row["status"] == "ok" and 0 < row["l1d_miss_rate"] < 1, row
    page = build_report([sim_run], tmp_path / "report")
    image = matplotlib.image.imread(page.parent / "counters.png")
    assert image[..., :3].std() > 0.05                     # drawn, not a blank canvas
    text = page.read_text()
    assert 'id="fig-counters"' in text
    table = text[text.index('id="counters-0"'):]
    table = table[:table.index("</table>")]
    # the table the panels draw: miss rate in percent, instructions per call with a prefix
    assert f">{percent(row['l1d_miss_rate'])}<" in table
    assert f">{count(row['sim_ir'])}<" in table
    assert repr(float(row["l1d_miss_rate"])) in table     # the exact figure, as sort key


def test_a_run_without_counters_beside_a_sim_run_says_why(sim_run, tmp_path):
    """Side by side with a run whose metrics are all missing: its panels carry the reason
    (the sample run's perf "<not supported> in VM") instead of an empty frame."""
    other = sample_run(tmp_path / "perf-run", counters=True)
    page = build_report([sim_run, other], tmp_path / "report")
    assert (page.parent / "counters.png").is_file()
    assert 'id="counters-1"' in page.read_text()
