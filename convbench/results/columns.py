"""The tables of a results directory as the rest of convbench may trust them.

:func:`coerce` checks every column named in the schema (and the counter metrics) against
its declared type and converts it to the dtype a complete run reads back with (text to
``string``, integers to ``Int64``, figures to ``float64``, flags to ``boolean``).  A column
that cannot be converted without changing its meaning (text in ``median_s``, ``1.5``
threads, a number as ``case_id``) raises ValueError with one line saying which column and
what it holds; the loader adds the file's name.  Nothing is guessed: damaged data is
refused, never repaired.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from convbench.results import schema
from convbench.status import STATUSES, Status

# Integers beyond this are not exact in float64: a float column holding them was not
# written from an integer column.
_EXACT_INT = 2**53

CANONICAL = {"string": "string", "int64": "Int64", "float64": "float64", "bool": "boolean"}
_WORDS = {"string": "text", "int64": "integers", "float64": "numbers", "bool": "true/false"}


def _holds(series: pd.Series) -> str:
    """What a column holds, for the message: its dtype, or the first odd value's type."""
    if series.dtype != object:
        return f"{series.dtype}"
    odd = series.dropna().map(type).value_counts()
    return ", ".join(t.__name__ for t in odd.index[:3]) or "nothing"


def _all(series: pd.Series, kinds: tuple[type, ...], exclude: tuple[type, ...] = ()) -> bool:
    present = series.dropna()
    return all(isinstance(v, kinds) and not isinstance(v, exclude) for v in present)


def _as_string(s: pd.Series) -> pd.Series | None:
    if pd.api.types.is_string_dtype(s.dtype) and s.dtype != object:
        return s.astype("string")
    if s.dtype == object and _all(s, (str,)):
        return s.astype("string")
    if s.isna().all():  # a column with no value at all reads back as float or object
        return pd.Series(pd.NA, index=s.index, dtype="string")
    return None


def _as_int(s: pd.Series) -> pd.Series | None:
    if pd.api.types.is_bool_dtype(s.dtype):
        return None
    if pd.api.types.is_integer_dtype(s.dtype):
        if pd.api.types.is_unsigned_integer_dtype(s.dtype) and (s.dropna() >= _EXACT_INT).any():
            return None
        return s.astype("Int64")
    if s.dtype == object and _all(s, (int, np.integer), exclude=(bool, np.bool_)):
        s = pd.to_numeric(s.astype("float64"))  # checked for range below
    if pd.api.types.is_float_dtype(s.dtype):
        x = s.to_numpy(dtype="float64", na_value=np.nan)
        finite = x[~np.isnan(x)]
        if (np.isinf(finite).any() or (np.abs(finite) > _EXACT_INT).any()
                or (finite != np.round(finite)).any()):
            return None
        return pd.Series(x, index=s.index).astype("Int64")
    if s.isna().all():
        return pd.Series(pd.NA, index=s.index, dtype="Int64")
    return None


def _as_float(s: pd.Series) -> pd.Series | None:
    if pd.api.types.is_bool_dtype(s.dtype):
        return None
    if pd.api.types.is_numeric_dtype(s.dtype):
        return pd.Series(s.to_numpy(dtype="float64", na_value=np.nan), index=s.index)
    if s.dtype == object and _all(s, (int, float, np.integer, np.floating),
                                  exclude=(bool, np.bool_)):
        return pd.Series(s.to_numpy(dtype="float64", na_value=np.nan), index=s.index)
    if s.isna().all():
        return pd.Series(np.nan, index=s.index, dtype="float64")
    return None


def _as_bool(s: pd.Series) -> pd.Series | None:
    if pd.api.types.is_bool_dtype(s.dtype):
        return s.astype("boolean")
    if s.dtype == object and _all(s, (bool, np.bool_)):
        return s.astype("boolean")
    if s.isna().all():
        return pd.Series(pd.NA, index=s.index, dtype="boolean")
    return None


_CONVERT = {"string": _as_string, "int64": _as_int, "float64": _as_float, "bool": _as_bool}


def declared(columns: dict[str, tuple[str, str]], extra_figures: bool) -> dict[str, str]:
    """Column -> declared type; with ``extra_figures`` also the counter metrics (figures)
    and their ``_reason`` columns (text), which the counters backend adds."""
    types = {name: dtype for name, (dtype, _) in columns.items()}
    if extra_figures:
        for metric in schema.COUNTER_METRICS:
            types[metric] = "float64"
            types[f"{metric}_reason"] = "string"
    return types


def coerce(frame: Any, types: dict[str, str]) -> pd.DataFrame:
    """``frame`` with every column of ``types`` it has in its declared dtype; ValueError
    naming the first column that does not hold its type.  Other columns are kept as read."""
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"expected a table, found {type(frame).__name__}")
    if not frame.columns.is_unique:
        twice = sorted({str(c) for c in frame.columns[frame.columns.duplicated()]})
        raise ValueError(f"column(s) {', '.join(twice)} appear twice")
    if not all(isinstance(c, str) for c in frame.columns):
        raise ValueError("column names that are not text")
    out = frame.reset_index(drop=True).copy()
    for name, dtype in types.items():
        if name not in out:
            continue
        converted = _CONVERT[dtype](out[name])
        if converted is None:
            raise ValueError(f"column {name} should hold {_WORDS[dtype]}, holds "
                             f"{_holds(out[name])}")
        out[name] = converted
    return out


def missing(frame: pd.DataFrame, required: Any) -> list[str]:
    return [c for c in required if c not in frame.columns]


def check_cases(table: pd.DataFrame) -> None:
    """What every consumer takes for granted of the per-case rows (ValueError otherwise):
    a case has an id, layer, variant, thread count (>= 1), vector width and a known status,
    and an ok case a positive, finite median time."""
    for column in ("case_id", "layer", "variant", "threads", "vector_width", "status"):
        empty = table[column].isna()
        if empty.any():
            raise ValueError(f"{int(empty.sum())} case(s) without {column} (row "
                             f"{int(np.flatnonzero(empty)[0])})")
    if (table["threads"] < 1).any():
        raise ValueError(f"threads below 1: {int(table['threads'].min())}")
    unknown = sorted(set(table["status"]) - set(STATUSES))
    if unknown:
        raise ValueError(f"status {unknown[0]!r} is not one of {', '.join(STATUSES)}")
    ok = table["status"] == Status.OK
    median = table.loc[ok, "median_s"]
    bad = ~(np.isfinite(median) & (median > 0))
    if bad.any():
        case = table.loc[ok, "case_id"][bad].iloc[0]
        raise ValueError(f"ok case {case} has median_s {float(median[bad].iloc[0])!r}, not a "
                         "positive time")


def check_values(values: pd.DataFrame) -> None:
    """Every raw value belongs to a case and is a finite, positive time (ValueError): a
    calibrated timing is never 0 s, and compare divides by it."""
    if values["case_id"].isna().any():
        raise ValueError("value(s) without case_id")
    value = values["value"]
    bad = ~(np.isfinite(value) & (value > 0))
    if bad.any():
        raise ValueError(f"value {float(value[bad].iloc[0])!r} of case "
                         f"{values['case_id'][bad].iloc[0]} is not a time")
    for column in ("process", "round"):
        if column in values and values[column].isna().any():
            raise ValueError(f"value(s) without {column}")
