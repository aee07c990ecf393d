"""The own-vs-library table says whether each ratio is resolved (the two medians' 95% CIs
apart), and the run summary marks the ones that are not with ``~``."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from convbench.report import aggregate
from convbench.report.summary import best_table, class_lines
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


def _classed(layer: str, desc: str, own: float, lib: float, half_width: float = 0.01e-3,
             threads: int = 1) -> list[dict]:
    rows = [_case(layer, "own/nhwc", False, own, half_width),
            _case(layer, "lib/nchw", True, lib, half_width)]
    for r, share in zip(rows, (0.5, 0.8), strict=True):
        r.update(descriptor=desc, threads=threads, peak_share=share)
    return rows


def test_by_class_gives_each_class_its_geomean_least_and_losing_layers():
    """A network whose mean hides a class that loses: 3x3 wins 2x, 1x1 runs at 0.8 and
    0.5 of the library (one resolved, one within noise)."""
    table = pd.DataFrame([
        *_classed("conv1", "ic3ih224oc64oh112kh7sh2ph3", 1.0e-3, 1.1e-3),
        *_classed("b3x3", "ic64ih56oc64oh56kh3ph1", 1.0e-3, 2.0e-3),
        *_classed("c3x3", "ic128ih28oc128oh28kh3ph1", 1.0e-3, 2.0e-3),
        *_classed("p1x1", "ic64ih56oc256oh56kh1", 1.0e-3, 0.8e-3),
        *_classed("q1x1", "ic256ih56oc64oh56kh1", 1.0e-3, 0.5e-3, half_width=0.6e-3),
        *_classed("b3x3", "ic64ih56oc64oh56kh3ph1", 1.0e-3, 0.5e-3, threads=2),
    ])
    by = aggregate.own_vs_library_by_class(table).set_index(["threads", "layer_class"])
    assert list(by.loc[1].index) == ["all", "1x1", "3x3", "stem"]
    assert by.loc[(1, "3x3"), "speedup_geomean"] == pytest.approx(2.0)
    assert by.loc[(1, "1x1"), "speedup_geomean"] == pytest.approx(math.sqrt(0.8 * 0.5))
    assert by.loc[(1, "1x1"), "speedup_min"] == pytest.approx(0.5)
    assert by.loc[(1, "1x1"), "min_layer"] == "q1x1"
    assert by.loc[(1, "1x1"), "below_0.9"] == 2
    assert by.loc[(1, "1x1"), "below_0.9_resolved"] == 1
    assert by.loc[(1, "all"), "layers"] == 5
    assert by.loc[(1, "all"), "speedup_geomean"] == pytest.approx(
        (1.1 * 2 * 2 * 0.8 * 0.5) ** (1 / 5))
    assert by.loc[(1, "stem"), "own_peak_share"] == 0.5
    assert by.loc[(1, "stem"), "library_peak_share"] == 0.8
    # thread counts are never pooled
    assert by.loc[(2, "all"), "layers"] == 1 and by.loc[(2, "3x3"), "speedup_min"] == 0.5

    lines = class_lines(table)
    assert lines[0].startswith("lib/own geomean by layer class at 1 thread(s): all ")
    assert "1x1 0.63 (min 0.50 q1x1)" in lines[0]
    assert lines[1] == "  layers below 0.9: p1x1 0.80, q1x1 ~0.50"
    assert lines[3] == "  layers below 0.9: b3x3 0.50"


def test_a_library_timed_cold_weights_at_2_threads_is_marked():
    """At 2 threads a library's cold-weights time holds thread-pool handoffs ours does not
    (MobileNet V1's conv_dw_12 on the Zen 5 host: ORT's kernel 5.3 us warm, 38-110 us
    cold-weights; ours 5.6 and 10-12).  Its ratios are marked there, and only there:
    not at 1 thread, not warm."""
    def layer(name: str, threads: int, cache: str) -> list[dict]:
        rows = [_case(name, "own/nhwc", False, 1.0e-3, 0.01e-3),
                _case(name, "lib/nchw", True, 2.0e-3, 0.01e-3)]
        for r in rows:
            r.update(threads=threads, cache=cache, descriptor="ic64ih56oc64oh56kh1")
        return rows

    table = pd.DataFrame([*layer("a", 2, "cold-weights"), *layer("b", 2, "cold-weights"),
                          *layer("c", 1, "cold-weights")])
    versus = aggregate.own_vs_library_layers(table)
    assert versus.set_index(["layer", "threads"])["library_handoff"].to_dict() == {
        ("a", 2): True, ("b", 2): True, ("c", 1): False}
    warm = table.assign(cache="warm")
    assert not aggregate.own_vs_library_layers(warm)["library_handoff"].any()
    by = aggregate.own_vs_library_by_class(table).set_index(["threads", "layer_class"])
    assert by.loc[(2, "all"), "library_handoff"] == 2
    assert by.loc[(1, "all"), "library_handoff"] == 0

    rows = {(line.split()[0], line.split()[1]): line
            for line in best_table(table).splitlines()[2:]}
    assert rows[("2", "a")].endswith(" 2.00!") and rows[("1", "c")].endswith(" 2.00")
    lines = class_lines(table)
    assert any(line.startswith("  !: on 2 of 2 layers the fastest library ran cold-weights")
               for line in lines)
    assert sum("!:" in line for line in lines) == 1   # at 2 threads only
    assert not any("!" in line for line in class_lines(warm))
