"""The report's tables: which summaries, in what order, formatted as text cells.

Shared by the HTML, Markdown and CSV writers so the three always show the same numbers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from convbench.report import aggregate
from convbench.report.units import format_value


@dataclass(frozen=True)
class Section:
    key: str                                   # file-name friendly id
    title: str
    about: str
    build: Callable[[pd.DataFrame], pd.DataFrame]


PER_RUN = (
    Section("best", "Best variant per algorithm",
            "Per layer and thread count, each algorithm's fastest variant; speed-ups over "
            "the best direct variant and the best library baseline (rows marked baseline).",
            aggregate.best_by_algorithm),
    Section("versus", "Own kernels vs the fastest library",
            "Per layer the fastest own kernel and the fastest library (baseline) measured in "
            "the same run; own_speedup = library time / own time (> 1: ours is faster), with "
            "the geometric mean per thread count.", aggregate.own_vs_library),
    Section("classes", "Own kernels vs the fastest library by layer class",
            "Per thread count and layer class (stem: at most 4 input channels; depthwise; "
            "1x1; else the kernel size), over the layers of the table above: the geometric "
            "mean and the least of own_speedup, how many layers run below 0.9 of the "
            "fastest library (resolved: CIs apart), on how many the fastest library ran "
            "cold-weights at 2+ threads (its time then holds thread-pool handoffs ours does "
            "not: those ratios overstate ours), and the median share of peak of each "
            "side's fastest.", aggregate.own_vs_library_by_class),
    Section("network", "Network totals",
            "Count-weighted time of the whole network: the best plan (fastest variant per "
            "layer) and each algorithm alone.", aggregate.network_totals),
    Section("plan", "Best plan per layer",
            "The fastest variant of every layer and its share of the network time.",
            aggregate.best_plan),
    Section("sensitivity", "Parameter sensitivity",
            "For each parameter: median over settings of slowest/fastest time across its "
            "values (1 = does not matter) and the value that wins most often.",
            aggregate.sensitivity),
    Section("scaling", "Thread scaling",
            "Count-weighted GFLOP/s by thread count, speed-up over the fewest threads.",
            aggregate.thread_scaling),
    Section("share_flags", "Shares flagged as measurement errors",
            "Cases measured above 100% of the host's peak or roofline bound: a bound a "
            "kernel beats is not a bound, so the share is left out and the flag says which "
            "and by how much (re-measure the host with `convbench machine`).",
            aggregate.flagged_shares),
    Section("not_vectorised", "Own variants whose code is not vectorised",
            "Ok own cases whose compiled code (the static profile each run records: "
            "asm_profile) is not vectorised: its multiply-adds, or its FP arithmetic, use "
            "no packed instruction; such a kernel runs several times below what its source "
            "should give.  `convbench check --asm` reads the same profile for any variant.",
            aggregate.not_vectorised),
    Section("disturbed", "Layer groups timed beside other work",
            "Groups (layer, thread count, cache mode) whose in-run reference, one fixed "
            f"sgemm timed in every round, read {aggregate.DISTURBED:g}x or more the run's "
            "median group: their rounds shared the CPUs with other work, so their times, "
            "own and library alike, are not the machine's.  Time them again alone (the "
            "run's summary gives the command).", aggregate.disturbed_groups),
    Section("failures", "Failed and skipped variants", "Every case that is not ok, with "
            "its reason.", aggregate.failures),
    Section("counters", "Counter figures",
            "Per layer each algorithm's fastest variant: miss rates as percentages, "
            "simulated counts (sim_*, callgrind) per kernel call; the counter panels "
            "draw these numbers.", aggregate.counter_figures),
    Section("counters_missing", "Missing counters",
            "Counter metrics without figures, and why.", aggregate.missing_counters),
)


def format_cell(value: Any) -> str:
    """A cell without a column to say its unit: 4 significant digits for floats, empty
    for missing."""
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def as_text(frame: pd.DataFrame) -> pd.DataFrame:
    """Every cell as the reader sees it, in the unit its column calls for (units)."""
    if not len(frame):
        return frame.astype(str)
    return pd.DataFrame({c: [format_value(str(c), v) for v in frame[c].astype(object)]
                         for c in frame.columns}, index=frame.index)


def environment_items(env: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """A nested environment as dotted key / text value pairs."""
    items = []
    for key, value in env.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            items += environment_items(value, name + ".")
        elif isinstance(value, list | dict):
            items.append((name, json.dumps(value)))
        else:
            items.append((name, format_cell(value)))
    return items
