"""The own-vs-library table says whether each ratio is resolved (the two medians' 95% CIs
apart), and the run summary marks the ones that are not with ``~``."""

from __future__ import annotations

import pandas as pd

from convbench.report import aggregate
from convbench.report.summary import best_table
from convbench.status import Status


def _case(layer: str, variant: str, baseline: bool, median: float, half_width: float) -> dict:
    return {"layer": layer, "threads": 1, "variant": variant, "algorithm": variant,
            "baseline": baseline, "status": Status.OK, "median_s": median,
            "ci_low_s": median - half_width, "ci_high_s": median + half_width,
            "gflops": 1.0, "layer_count": 1}


def _table() -> pd.DataFrame:
    return pd.DataFrame([
        # apart: own 1.0 (0.95-1.05) vs library 1.5 (1.45-1.55)
        _case("apart", "own/nhwc", False, 1.0e-3, 0.05e-3),
        _case("apart", "lib/nchw", True, 1.5e-3, 0.05e-3),
        # overlapping: own 1.0 (0.7-1.3) vs library 1.1 (1.0-1.2)
        _case("overlap", "own/nhwc", False, 1.0e-3, 0.3e-3),
        _case("overlap", "lib/nchw", True, 1.1e-3, 0.1e-3),
        # a library faster, resolved the other way round
        _case("slower", "own/nhwc", False, 2.0e-3, 0.1e-3),
        _case("slower", "lib/nchw", True, 1.0e-3, 0.1e-3),
        # no CI for the library (too few values): not resolved
        _case("no_ci", "own/nhwc", False, 1.0e-3, 0.01e-3),
        {**_case("no_ci", "lib/nchw", True, 2.0e-3, 0.0), "ci_low_s": float("nan"),
         "ci_high_s": float("nan")},
    ])


def test_resolved_means_the_cis_are_apart():
    versus = aggregate.own_vs_library(_table()).set_index("layer")
    assert bool(versus.loc["apart", "resolved"]) and bool(versus.loc["slower", "resolved"])
    assert not bool(versus.loc["overlap", "resolved"])
    assert not bool(versus.loc["no_ci", "resolved"])
    assert versus.loc["apart", "own_speedup"] == 1.5


def test_summary_marks_unresolved_ratios():
    rows = {line.split()[1]: line for line in best_table(_table()).splitlines()[2:]}
    assert rows["apart"].endswith(" 1.50")
    assert rows["slower"].endswith(" 0.50")
    assert rows["overlap"].endswith(" ~1.10")
    assert rows["no_ci"].endswith(" ~2.00")
    assert "~" not in rows["geomean"]
