"""The sizes convbench refuses before it allocates anything, and how a user's value is echoed.

Suites and descriptors arrive from pull requests and command lines, so every size they can
ask for is bounded here, in one place, and README.md's "Limits" paragraph lists the same
numbers.  Each limit is checked where the value is read (suite loader, descriptor parser,
planner), before any tensor, plan or string the size would govern exists.
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

# Any one dimension or count: fits a C int (numba, BLAS and numpy index with int32 or int64;
# 2^31 - 1 keeps every product of two dimensions inside int64 too).
MAX_DIMENSION = 2**31 - 1
# Bytes one layer needs while it is checked: float32 input, weights and output (the timed
# kernel's) plus the float64 reference's input, weights, zero-padded input and output
# (kernels.reference).  The largest shipped layer needs 0.21 GiB (strassen_1x1's c4096_p14).
MAX_LAYER_BYTES = 4 * 2**30
# Cases of one plan, counted as the product of the sweep's axes before it is expanded
# (filters apply after expansion, so they do not lower the count): 100,000 cases at the
# default timing are weeks of measurement, more than any real sweep.
MAX_PLAN_CASES = 100_000
# A suite's name becomes part of a directory name (results/<name>-<UTC time>/).
MAX_SUITE_NAME = 64
# a layer's name: in case ids, pyperf names, figures and terminal lines
MAX_LAYER_NAME = 128
# Suite files: the shipped ones are under 10 KiB.
MAX_SUITE_BYTES = 1 << 20
# Nesting of YAML collections: a suite nests four deep (sweep.params.<alg>.<knob>).
MAX_YAML_DEPTH = 16
# Ops of a suite's network (network.ops): ResNet-50 has 125, the largest ImageNet nets a
# few thousand; the graph is checked op by op, so the bound only keeps a file's work small.
MAX_NETWORK_OPS = 10_000
# Seconds of timing.min_time and timing.timeout: finite, at most a day.
MAX_SECONDS = 86_400.0
# timing.values, timing.warmups, timing.processes and a thread count.
MAX_REPEATS = 10_000
MAX_THREADS = 4096

# How much of a user's value an error message shows: enough to recognise it, never a
# document (a value can be megabytes long, or a YAML alias expanded a billion times).
_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlong = 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 6
_REPR.maxlevel = 3
MAX_SHOWN = 80


def shown(value: Any) -> str:
    """``repr(value)`` cut to at most :data:`MAX_SHOWN` characters, on one line."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        # repr of an integer past 4300 digits raises (sys.int_info.default_max_str_digits)
        return f"<an integer of {value.bit_length()} bits>"
    try:
        text = _REPR.repr(value)
    except (ValueError, RecursionError):
        text = f"<a {type(value).__name__}>"
    text = " ".join(text.split())   # repr escapes newlines in strings, not inside other reprs
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN - 3] + "..."


def seconds_problem(value: Any) -> str | None:
    """Why ``value`` is no number of seconds for min_time or timeout (None when it is)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"expected a number of seconds, got {shown(value)}"
    if not math.isfinite(value) or value <= 0 or value > MAX_SECONDS:
        return f"expected a finite number of seconds in (0, {MAX_SECONDS:g}], got {shown(value)}"
    return None


def format_bytes(n: int) -> str:
    """``n`` bytes in the largest binary unit that keeps it >= 1 (e.g. 4.0 GiB)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    raise AssertionError("unreachable")
