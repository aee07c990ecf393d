"""Writing a results directory as cases finish, atomically, and reopening it to resume.

After every finished case the whole directory is rewritten file by file, each through a
temporary file and ``os.replace``, so a reader (or a kill at any instant) only ever sees
complete files.  The order is values, pyperf, then ``results.parquet`` (the commit point:
a case is done once its row is there), CSV, manifest.  Reopening drops values whose row
never landed, so a resumed run measures exactly the cases that have no row.

Integer columns use pandas' nullable ``Int64``: skipped and failed cases have no loop
count or workspace, and those cells are missing rather than a made-up number.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from convbench.errors import ConvbenchError
from convbench.results import pyperf_export, schema

STATUS_RUNNING, STATUS_COMPLETE, STATUS_INTERRUPTED = "running", "complete", "interrupted"


def now_utc() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _atomic(path: Path, write: Callable[[Path], Any]) -> Any:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        result = write(tmp)
        if tmp.exists():
            os.replace(tmp, path)
        return result
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: Path, data: Any) -> None:
    _atomic(path, lambda tmp: tmp.write_text(json.dumps(data, indent=1, default=str) + "\n"))


def _pandas_dtype(dtype: str) -> str:
    return {"int64": "Int64", "bool": "boolean"}.get(dtype, dtype)


def to_frame(rows: list[Mapping[str, Any]]) -> Any:
    """The tidy table: schema columns first with their dtypes, then extra (counter) columns."""
    import pandas as pd

    frame = pd.DataFrame(list(rows))
    for col in schema.COLUMNS:
        if col not in frame:
            frame[col] = None
    extra = [c for c in frame.columns if c not in schema.COLUMNS]
    frame = frame[list(schema.COLUMNS) + extra]
    for col, (dtype, _) in schema.COLUMNS.items():
        if dtype in ("int64", "float64"):
            frame[col] = pd.to_numeric(frame[col]).astype(_pandas_dtype(dtype))
        else:
            frame[col] = frame[col].astype(_pandas_dtype(dtype))
    for col in extra:
        if col.endswith("_reason"):
            frame[col] = frame[col].astype("string")
        else:
            frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    return frame


def values_frame(values: list[Mapping[str, Any]]) -> Any:
    import pandas as pd

    frame = pd.DataFrame(list(values), columns=list(schema.VALUE_COLUMNS))
    for col, (dtype, _) in schema.VALUE_COLUMNS.items():
        frame[col] = frame[col].astype(dtype)
    return frame


class ResultsStore:
    """A results directory being written: rows and values in memory, files on disk."""

    def __init__(self, path: Path, manifest: dict[str, Any], environment: dict[str, Any],
                 rows: list[dict[str, Any]], values: list[dict[str, Any]]):
        self.path = path
        self.manifest = manifest
        self.environment = environment
        self.rows = rows
        self.values = values

    @classmethod
    def create(cls, path: Path, suite_name: str, suite_text: str, planned: list[str],
               environment: dict[str, Any], options: dict[str, Any]) -> ResultsStore:
        if path.exists() and any(path.iterdir()):
            raise ConvbenchError(f"{path}: output directory exists and is not empty; use "
                                 f"--resume {path} to finish it or pick another -o")
        path.mkdir(parents=True, exist_ok=True)
        from convbench import __version__

        manifest = {"format_version": schema.FORMAT_VERSION, "convbench_version": __version__,
                    "suite": suite_name, "created": now_utc(), "updated": now_utc(),
                    "status": STATUS_RUNNING, "planned": planned, "done": 0,
                    "options": options}
        _atomic(path / schema.SUITE_COPY, lambda tmp: tmp.write_text(suite_text))
        store = cls(path, manifest, environment, [], [])
        store.flush()
        return store

    @classmethod
    def reopen(cls, path: Path) -> ResultsStore:
        """An existing directory, to resume: rows that landed count as done."""
        import pandas as pd

        manifest_path = path / schema.MANIFEST
        if not manifest_path.is_file():
            raise ConvbenchError(f"{path}: no {schema.MANIFEST}; not a convbench results "
                                 f"directory")
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("format_version") != schema.FORMAT_VERSION:
            raise ConvbenchError(f"{path}: results format version "
                                 f"{manifest.get('format_version')!r}, this convbench writes "
                                 f"{schema.FORMAT_VERSION}; start a new run")
        env_path = path / schema.ENVIRONMENT_JSON
        environment = json.loads(env_path.read_text()) if env_path.is_file() else {}
        rows: list[dict[str, Any]] = []
        values: list[dict[str, Any]] = []
        if (path / schema.RESULTS_PARQUET).is_file():
            table = pd.read_parquet(path / schema.RESULTS_PARQUET)
            rows = [{k: (None if v is pd.NA else v) for k, v in r.items()}
                    for r in table.to_dict("records")]
        done = {r["case_id"] for r in rows}
        if (path / schema.VALUES_PARQUET).is_file():
            vals = pd.read_parquet(path / schema.VALUES_PARQUET)
            values = [v for v in vals.to_dict("records") if v["case_id"] in done]
        return cls(path, manifest, environment, rows, values)

    @property
    def done(self) -> set[str]:
        return {r["case_id"] for r in self.rows}

    def add(self, row: dict[str, Any], values: list[dict[str, Any]] | None = None) -> None:
        """Record a finished case and rewrite the directory."""
        self.rows.append(row)
        self.values.extend(values or [])
        self.flush()

    def update(self, case_id: str, figures: Mapping[str, Any]) -> None:
        """Merge figures (a separate counting pass) into a recorded case's row."""
        for row in self.rows:
            if row["case_id"] == case_id:
                row.update(figures)
        self.flush()

    def set_status(self, status: str) -> None:
        self.manifest["status"] = status
        self.flush()

    def flush(self) -> None:
        self.manifest["updated"] = now_utc()
        self.manifest["done"] = len(self.rows)
        write_json(self.path / schema.ENVIRONMENT_JSON, self.environment)
        _atomic(self.path / schema.VALUES_PARQUET,
                lambda tmp: values_frame(self.values).to_parquet(tmp, index=False))
        by_case: dict[str, dict[int, list[float]]] = {}
        for v in self.values:   # per case, per worker process: one pyperf run each
            by_case.setdefault(v["case_id"], {}).setdefault(int(v.get("process", 0)),
                                                            []).append(float(v["value"]))
        _atomic(self.path / schema.PYPERF_JSON,
                lambda tmp: pyperf_export.write(tmp, self.rows, by_case,
                                                self.environment.get("cpu_model", "")))
        table = to_frame(self.rows)
        _atomic(self.path / schema.RESULTS_PARQUET,
                lambda tmp: table.to_parquet(tmp, index=False))
        _atomic(self.path / schema.RESULTS_CSV, lambda tmp: table.to_csv(tmp, index=False))
        write_json(self.path / schema.MANIFEST, self.manifest)


def load(path: str | Path) -> Any:
    """A results directory (complete or partial) as ``convbench.results.load.Results``:
    ``.table`` and ``.values`` are pandas DataFrames."""
    from convbench.results.load import load_results

    return load_results(path, allow_partial=True)
