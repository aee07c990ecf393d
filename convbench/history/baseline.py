"""``compare history:ROOT CURRENT``: gate against the last stable level instead of one run.

The baseline side is the latest run under ROOT from the current run's host (same host
fingerprint), with each variant's values replaced by the pooled values of every run in its
series' last stable level (the runs after the series' last step,
:func:`convbench.history.trends.stable_runs`).  Each pooled run counts as one worker
process, so the gate's bootstrap resamples whole runs before values: a run-to-run bias
is not taken for precision.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from convbench.compare.match import HISTORY_PREFIX, Side, results_side
from convbench.errors import ConvbenchError
from convbench.history import trends
from convbench.history.runs import find_runs, fingerprint
from convbench.history.table import history_table
from convbench.results import schema


def _values(path: Path) -> Any:
    import pandas as pd

    frame = pd.read_parquet(path / schema.VALUES_PARQUET)
    return {cid: group for cid, group in frame.groupby("case_id", sort=False)}


def history_side(root: Path, current: Any, instruction_column: str | None) -> Side:
    """The baseline side of ``current`` (a loaded results directory) from ROOT's history."""
    from convbench.results.load import load_results

    runs = find_runs(root)
    host = fingerprint(current.environment)
    frame = history_table(runs)
    mine = frame[frame["fingerprint"] == host]
    if mine.empty:
        raise ConvbenchError(f"{root}: no complete run of this host ({host}) to gate "
                             "against")
    latest = load_results(runs[int(mine["run"].max()) - 1].path)
    side = results_side(latest, instruction_column)
    values: dict[int, dict[str, Any]] = {}
    samples = dict(side.samples)
    by_case = {s.case_id: k for k, s in samples.items() if s.ok}
    for (_, rows), run_numbers in zip(trends.series(mine),
                                      trends.stable_runs(mine).values(), strict=True):
        sample_key = by_case.get(rows["case_id"].iloc[-1])
        if sample_key is None:
            continue
        rows = rows[rows["run"].isin(run_numbers)]
        raw, ratio, process = [], [], []
        for run, case_id in zip(rows["run"], rows["case_id"], strict=True):
            if run not in values:
                values[run] = _values(runs[run - 1].path)
            group = values[run].get(case_id)
            if group is None:
                continue
            raw.append(group["value"].to_numpy(float))
            ratio.append(raw[-1] / group["ref_value"].to_numpy(float))
            process.append(np.full(len(group), run))
        if raw:
            normalised = np.concatenate(ratio)
            samples[sample_key] = dataclasses.replace(
                samples[sample_key], values=np.concatenate(raw),
                normalised=normalised if np.all(np.isfinite(normalised)) else None,
                processes=np.concatenate(process))
    return dataclasses.replace(side, path=Path(f"{HISTORY_PREFIX}{root}"), samples=samples)
