"""Reading older results directories: one step per format version, applied in a chain.

A results directory records its ``format_version`` (schema.FORMAT_VERSION when written).
CI baselines are stored for months, so every format this convbench ever wrote must still
load in ``report`` and ``compare``: each step below turns version N's manifest and tables
into version N+1's, in memory (the files on disk are left as they are).  When a format
changes, add a step; never edit an old one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from convbench.errors import ConvbenchError
from convbench.identity import WARM
from convbench.results import schema


@dataclass
class Contents:
    """What a results directory holds, as read: the step functions rewrite it."""

    manifest: dict[str, Any]
    table: Any        # pandas.DataFrame, the per-case rows
    values: Any       # pandas.DataFrame, the raw values


def _insert_after(table: Any, after: str, name: str, column: Any) -> None:
    at = table.columns.get_loc(after) + 1 if after in table else len(table.columns)
    table.insert(at, name, column)


def _v1_to_v2(old: Contents) -> Contents:
    """2 added ``cache`` (format 1 timed every case warm), ``kernel_version`` and
    ``timer_resolution_s`` (unknown for cases measured before they existed)."""
    import pandas as pd

    table = old.table.copy()
    _insert_after(table, "vector_width", "cache",
                  pd.Series(WARM, index=table.index, dtype="string"))
    _insert_after(table, "descriptor", "kernel_version",
                  pd.Series(pd.NA, index=table.index, dtype="string"))
    _insert_after(table, "loops", "timer_resolution_s",
                  pd.Series(float("nan"), index=table.index, dtype="float64"))
    return Contents({**old.manifest, "format_version": 2}, table, old.values)


def _v2_to_v3(old: Contents) -> Contents:
    """3 added ``cpus``: workers were not pinned before, so there is no set to record."""
    import pandas as pd

    table = old.table.copy()
    _insert_after(table, "reason", "cpus", pd.Series(pd.NA, index=table.index, dtype="string"))
    return Contents({**old.manifest, "format_version": 3}, table, old.values)


def _number(row: Any, key: str) -> float:
    """A row's figure as a float; NaN where the column is absent or the cell missing."""
    import pandas as pd

    return float(row[key]) if key in row and pd.notna(row[key]) else float("nan")


def _v3_to_v4(old: Contents) -> Contents:
    """4 added ``performed_flops`` (older formats divided the nominal FLOPs by the peak),
    ``roofline_gbs`` (older formats read the bandwidth off a sysfs level, not recorded) and
    ``share_flag``: a stored share above 1 is flagged and dropped as format 4 does
    (record.checked_shares), so an old baseline never shows an impossible share; and the
    worker processes: ``processes`` and ``process_spread``, ``process`` of each value; the
    width ``auto`` resolved to: ``compile_width`` and ``vector_width_bits``."""
    import pandas as pd

    from convbench.results.record import checked_shares, share_tolerance

    table = old.table.copy()
    _insert_after(table, "gflops", "performed_flops",
                  pd.Series(pd.NA, index=table.index, dtype="Int64"))
    _insert_after(table, "gbs", "roofline_gbs",
                  pd.Series(float("nan"), index=table.index, dtype="float64"))
    names = [k for k in ("peak_share", "roofline_share") if k in table]
    flags = []
    for i, row in table.iterrows():
        shares, flag = checked_shares({k: _number(row, k) for k in names},
                                      share_tolerance(_number(row, "timer_resolution_s"),
                                                      _number(row, "median_s")))
        flags.append(flag)
        if flag:
            for k, v in shares.items():
                table.loc[i, k] = v
    _insert_after(table, "roofline_share", "share_flag",
                  pd.Series(flags, index=table.index, dtype="string"))
    # older runs compiled auto at LLVM's default, an explicit width at its own flags
    width = table["vector_width"].astype("string")
    _insert_after(table, "vector_width", "compile_width",
                  width.where(width != "auto", "llvm-default"))
    _insert_after(table, "compile_width", "vector_width_bits",
                  pd.Series(pd.NA, index=table.index, dtype="Int64"))
    # older runs timed each group in one worker process
    ok = table["status"] == "ok"
    _insert_after(table, "loops", "processes",
                  pd.Series(ok.map({True: 1, False: pd.NA}), dtype="Int64"))
    _insert_after(table, "processes", "process_spread",
                  pd.Series(float("nan"), index=table.index, dtype="float64"))
    values = old.values.copy()
    _insert_after(values, "case_id", "process",
                  pd.Series(0, index=values.index, dtype="int64"))
    return Contents({**old.manifest, "format_version": 4}, table, values)


def _v4_to_v5(old: Contents) -> Contents:
    """5 added the journal: the tables of a stopped run are as format 4 wrote them."""
    return Contents({**old.manifest, "format_version": 5}, old.table, old.values)


def _v5_to_v6(old: Contents) -> Contents:
    """6 added ``cache_model``: before it every simulation used the host's own caches."""
    import pandas as pd

    from convbench.harness.counters.cache_models import HOST

    table = old.table.copy()
    _insert_after(table, "cpus", "cache_model",
                  pd.Series(HOST, index=table.index, dtype="string"))
    return Contents({**old.manifest, "format_version": 6}, table, old.values)


STEPS: dict[int, Callable[[Contents], Contents]] = {1: _v1_to_v2, 2: _v2_to_v3,
                                                    3: _v3_to_v4, 4: _v4_to_v5,
                                                    5: _v5_to_v6}


def upgrade(contents: Contents, where: str) -> Contents:
    """``contents`` in the current format; ``where`` names the directory in errors."""
    version = contents.manifest.get("format_version")
    if version == schema.FORMAT_VERSION:
        return contents
    # true/false are ints to Python, and True == 1: a damaged manifest, not format 1
    integer = isinstance(version, int) and not isinstance(version, bool)
    if not integer or version not in STEPS:
        newer = integer and version > schema.FORMAT_VERSION
        hint = "upgrade convbench" if newer else "re-run the suite"
        raise ConvbenchError(f"{where}: results format version {version!r}, this convbench "
                             f"reads versions {min(STEPS)} to {schema.FORMAT_VERSION}; {hint}")
    original = version
    while version != schema.FORMAT_VERSION:
        contents = STEPS[version](contents)
        version = contents.manifest["format_version"]
    contents.manifest["upgraded_from"] = original
    return contents
