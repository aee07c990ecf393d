"""Every series of a history table, its steps, and its last stable level.

A series is one case (layer, variant, threads, vector width, descriptor) on one host
fingerprint in one cache mode, its reference-normalised medians in run order.  A run that
measured a series twice (it cannot: case ids are unique per run) would keep its first.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from convbench.history import steps as step_detection
from convbench.history.table import SERIES

STEP_COLUMNS = (*SERIES, "run", "label", "before", "after", "ratio", "runs")


def series(table: Any) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(series key, its rows in run order) for every series of the table."""
    usable = table[table["ref_ratio"].notna()]
    for key, rows in usable.groupby(list(SERIES), sort=True):
        yield key, rows.drop_duplicates("run").sort_values("run")


def find_steps(table: Any, penalty: float = step_detection.PENALTY) -> Any:
    """One row per detected step: the series, the run (order and label) where the new
    level starts, the levels before and after, their ratio and the series' length."""
    import pandas as pd

    found = []
    for key, rows in series(table):
        for step in step_detection.detect(rows["ref_ratio"].to_list(), penalty):
            at = rows.iloc[step.at]
            found.append((*key, int(at["run"]), str(at["label"]), step.before, step.after,
                          step.ratio, len(rows)))
    return pd.DataFrame(found, columns=list(STEP_COLUMNS))


def stable_runs(table: Any, penalty: float = step_detection.PENALTY) -> dict[tuple, list[int]]:
    """Per series, the runs of its last stable level (after its last step)."""
    out = {}
    for key, rows in series(table):
        start = step_detection.last_level(rows["ref_ratio"].to_list(), penalty)
        out[key] = [int(r) for r in rows["run"].iloc[start:]]
    return out
