"""Numbers as a reader wants them: times in µs/ms/s, rates in GFLOP/s, shares in percent.

One place decides how a report column reads (:func:`format_value`, chosen by the column's
name), so the HTML page, the Markdown file and the terminal summary never disagree and
never print ``9.055e-05``.  The CSV files keep the raw numbers: they are for programs.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

MICRO = "µs"


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def seconds(value: float | None, micro: str = MICRO) -> str:
    """A time in the unit that reads best (µs, ms or s), four significant digits; the
    terminal passes ``micro="us"`` (a console may not show µ)."""
    if _missing(value):
        return "-"
    value = float(value)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), (micro, 1e-6)):
        if abs(value) >= scale or unit == micro:
            return f"{value / scale:.4g} {unit}"
    raise AssertionError("unreachable")


def gflops(value: float | None) -> str:
    return "-" if _missing(value) else f"{float(value):.2f} GFLOP/s"


def percent(value: float | None) -> str:
    """A share (0.42) as a percentage (42%); one decimal below 10%."""
    if _missing(value):
        return "-"
    pct = float(value) * 100
    return f"{pct:.1f}%" if abs(pct) < 10 else f"{pct:.0f}%"


def ratio(value: float | None) -> str:
    return "-" if _missing(value) else f"{float(value):.2f}x"


def count(value: float | None) -> str:
    """A count per call (simulated instructions, misses) with an SI prefix: 53.38k, 1.2M."""
    if _missing(value):
        return "-"
    value = float(value)
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.4g}{unit}"
    return f"{value:.4g}"


def _kind(column: str) -> str:
    """How a report column's numbers read, from its name (aggregate's naming)."""
    name = column.split(" [")[0]   # join_runs: "median_s [run]"
    # own_vs_library: "median_s_own", "median_s_library"
    if name.endswith("_s") or "_s_" in name or name in ("median", "mean", "min", "max"):
        return "seconds"
    if name.startswith("gflops"):
        return "gflops"
    # "prediction error": predicted / measured - 1
    if ((name.endswith(("share", "_miss_rate", "utilization")) and name != "share_flag")
            or name.endswith(" error")):
        return "percent"
    if name.startswith(("sim_", "ctr_")):    # counts per call, sim_ir's 53384.5
        return "count"
    if name.startswith(("speedup", "own_speedup", "time ratio", "vs_", "slowest_over")):
        return "ratio"
    return "plain"


def format_value(column: str, value: Any) -> str:
    """One cell of ``column`` as text: human units for times, rates, shares and ratios;
    4 significant digits for other floats; empty for a missing value."""
    if _missing(value):
        return ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    kind = _kind(column)
    if kind == "seconds":
        return seconds(value)
    if kind == "gflops":
        return f"{float(value):.2f}"           # the header says GFLOP/s
    if kind == "percent":
        return percent(value)
    if kind == "ratio":
        return ratio(value)
    if kind == "count":
        return count(value)
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def parse(text: str) -> float:
    """The number a formatted cell shows, in base units (seconds, fractions): for tests
    and for the page's sort keys' cross-check."""
    text = text.strip()
    for suffix, scale in ((MICRO, 1e-6), ("us", 1e-6), ("ms", 1e-3), ("s", 1.0), ("%", 0.01),
                          ("x", 1.0), ("GFLOP/s", 1.0), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if text.endswith(suffix):
            return float(text.removesuffix(suffix).strip()) * scale
    return float(text)
