"""The report's trend section (``report --history ROOT``): the steps ``convbench history``
finds under ROOT, and a figure of the series they are in, level by run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_SERIES = 8   # lines one figure stays readable with

ABOUT = ("Every complete run under {root} in run order, each case on each host and cache "
         "mode a series of reference-normalised medians (median of value / in-run "
         "reference sgemm).  A step is a change of level found by penalised optimal "
         "partitioning (convbench/history/steps.py); ratio > 1: slower after it.")


@dataclass
class Trends:
    root: Path
    runs: int
    series: int
    steps: Any          # pandas.DataFrame, convbench.history.trends.STEP_COLUMNS
    figure: Any = None  # convbench.report.figures.Figure, or None without a step

    @property
    def about(self) -> str:
        return ABOUT.format(root=self.root) + (f"  {self.runs} runs, {self.series} series, "
                                               f"{len(self.steps)} step(s).")

    def table(self) -> Any:
        """The steps as the report shows them."""
        frame = self.steps.rename(columns={"fingerprint": "host"})
        frame = frame.drop(columns=["descriptor"])
        return frame.round({"before": 4, "after": 4, "ratio": 3})


def _figure(table: Any, steps: Any, out: Path) -> Any:
    from convbench.history import trends as history_trends
    from convbench.report.figures import _save, _short, plt

    stepped = {tuple(r) for r in steps[list(history_trends.SERIES)].itertuples(index=False)}
    fig, ax = plt.subplots(figsize=(9, 4.5))
    shown = 0
    for key, rows in history_trends.series(table):
        if key not in stepped or shown == MAX_SERIES:
            continue
        level = rows["ref_ratio"].to_numpy()
        ax.plot(rows["run"], level / level[0], marker="o", markersize=3,
                label=_short(f"{key[2]} {key[3]} t{key[4]} ({key[0]}, {key[1]})", 60))
        shown += 1
    for run in sorted(set(steps["run"])):
        ax.axvline(run - 0.5, color="grey", linestyle=":", linewidth=1)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))   # runs are counted
    ax.set_xlabel("run (oldest first)")
    ax.set_ylabel("normalised median / first run's")
    ax.legend(fontsize=7, loc="best")
    return _save(fig, out / "trends.png", "Trends: series with a step",
                 f"Each series with a step (at most {MAX_SERIES}), relative to its first run; "
                 "dotted lines: where a new level starts.")


def build(root: Path, out: Path) -> Trends:
    """The trend section of the runs under ``root``; its figure written into ``out``."""
    from convbench.history import table, trends
    from convbench.history.runs import find_runs

    runs = find_runs(root)
    frame = table.history_table(runs)
    steps = trends.find_steps(frame)
    n_series = sum(1 for _ in trends.series(frame))
    figure = _figure(frame, steps, out) if not steps.empty else None
    return Trends(Path(root), len(runs), n_series, steps, figure)
