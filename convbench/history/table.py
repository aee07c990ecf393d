"""Every run under a root as one long table: one row per ok case per run.

With DuckDB installed (``pip install 'convbench[history]'``) one SQL query reads every
``results.parquet`` at once; without it pandas reads them one by one.  Both give the same
frame: the run's order (``run``, 1 = oldest), ``label`` and host ``fingerprint``, the
case's identity (``layer``, ``variant``, ``threads``, ``vector_width``, ``cache``,
``descriptor``) and ``case_id``, its reference-normalised median ``ref_ratio`` (the
case's median over rounds of value / in-run reference sgemm: what stays put when the
machine's speed moves) and its raw ``median_s``.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from convbench.history.runs import Run

SERIES = ("fingerprint", "cache", "layer", "variant", "threads", "vector_width", "descriptor")
COLUMNS = ("run", "label", *SERIES, "case_id", "ref_ratio", "median_s")
ENGINES = ("auto", "duckdb", "pandas")


def _runs_frame(runs: list[Run]) -> Any:
    import pandas as pd

    return pd.DataFrame({"file": [str(r.path / "results.parquet") for r in runs],
                         "run": range(1, len(runs) + 1), "label": [r.label for r in runs],
                         "fingerprint": [r.fingerprint for r in runs]})


def _duckdb(runs: list[Run]) -> Any:
    import duckdb

    con = duckdb.connect()
    try:
        con.register("runs", _runs_frame(runs))
        files = [str(r.path / "results.parquet") for r in runs]
        # union_by_name: results of older formats lack columns (cache: warm then)
        return con.execute("""
            SELECT r.run, r.label, r.fingerprint, coalesce(t.cache, 'warm') AS cache,
                   t.layer, t.variant, t.threads, t.vector_width,
                   coalesce(t.descriptor, '') AS descriptor, t.case_id, t.ref_ratio,
                   t.median_s
            FROM read_parquet(?, filename = true, union_by_name = true) AS t
            JOIN runs AS r ON t.filename = r.file
            WHERE t.status = 'ok'
            ORDER BY r.run, t.layer, t.variant, t.threads, t.vector_width
            """, [files]).df()
    finally:
        con.close()


def _pandas(runs: list[Run]) -> Any:
    import pandas as pd

    wanted = ["cache", "layer", "variant", "threads", "vector_width", "descriptor",
              "case_id", "ref_ratio", "median_s", "status"]
    frames = []
    for info in _runs_frame(runs).itertuples(index=False):
        table = pd.read_parquet(info.file)
        table = table.reindex(columns=wanted)
        table = table[table["status"] == "ok"].drop(columns="status")
        table["cache"] = table["cache"].fillna("warm")
        table["descriptor"] = table["descriptor"].fillna("")
        frames.append(table.assign(run=info.run, label=info.label,
                                   fingerprint=info.fingerprint))
    frame = pd.concat(frames, ignore_index=True)
    return frame.sort_values(["run", "layer", "variant", "threads", "vector_width"],
                             kind="stable").reset_index(drop=True)


def engine_for(choice: str) -> str:
    """The engine ``choice`` means here: ``auto`` is DuckDB when installed."""
    if choice == "auto":
        return "duckdb" if importlib.util.find_spec("duckdb") else "pandas"
    return choice


def history_table(runs: list[Run], engine: str = "auto") -> Any:
    """The long table of ``runs`` (:data:`COLUMNS`), read by ``engine``."""
    import pandas as pd

    read = {"duckdb": _duckdb, "pandas": _pandas}[engine_for(engine)]
    frame = read(runs)[list(COLUMNS)]
    frame["threads"] = frame["threads"].astype("int64")
    frame["run"] = frame["run"].astype("int64")
    for col in ("ref_ratio", "median_s"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    for col in ("label", "case_id", *[c for c in SERIES if c != "threads"]):
        frame[col] = frame[col].astype(str)
    return frame.reset_index(drop=True)
