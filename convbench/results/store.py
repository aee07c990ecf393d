"""Writing a results directory as cases finish, and reopening it to resume.

A finished case is committed by appending one line to the directory's journal
(:mod:`convbench.results.journal`): the cost of a commit does not grow with the run.  The
consolidated files (values, pyperf, ``results.parquet``, CSV) are written from memory when
the run stops, each through a temporary file and ``os.replace``, and the manifest last:
a manifest that says "complete" or "interrupted" vouches for the files written before it,
and while it says "running" (a run in progress, or one that was killed) the journal is the
truth and readers replay it (:func:`replay`).  So the files a reader trusts never disagree.

A new directory is built under a hidden sibling name and renamed into place with its
manifest already in it, so a kill in the first second leaves either nothing (the path is
free for a new run) or a directory ``--resume`` accepts.  One process writes a directory
at a time (:mod:`convbench.results.lock`).  A storage error (disk full, read-only or
immutable directory) is the user's error, named with the file and what the directory
still holds, never a traceback.

Integer columns use pandas' nullable ``Int64``: skipped and failed cases have no loop
count or workspace, and those cells are missing rather than a made-up number.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from convbench.errors import ConvbenchError
from convbench.pids import alive
from convbench.results import journal, pyperf_export, schema
from convbench.results.lock import DirectoryLock
from convbench.textsafe import csv_frame

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
        if col.endswith("_reason") or _is_text(frame[col]):
            frame[col] = frame[col].astype("string")
        else:
            frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    return frame


def _is_text(column: Any) -> bool:
    """A counter column whose values are all words (``ctr_source``: "simulated ..."),
    which a numeric conversion would turn into NaN; a column mixing numbers and text is
    numeric, its text missing."""
    present = column.dropna()
    return len(present) > 0 and all(isinstance(v, str) for v in present)


def values_frame(values: list[Mapping[str, Any]]) -> Any:
    import pandas as pd

    frame = pd.DataFrame(list(values), columns=list(schema.VALUE_COLUMNS))
    for col, (dtype, _) in schema.VALUE_COLUMNS.items():
        frame[col] = frame[col].astype(dtype)
    return frame


STAGING_MARK = ".creating-"


def _storage_error(path: Path, exc: OSError, doing: str) -> ConvbenchError:
    reason = exc.strerror or str(exc)
    return ConvbenchError(f"{path}: cannot {doing}: {reason}")


def _remove_stale_staging(path: Path) -> None:
    """Hidden half-built directories next to ``path`` whose creator died before the rename."""
    for stale in path.parent.glob(f".{path.name}{STAGING_MARK}*"):
        pid = stale.name.rpartition("-")[2]
        if pid.isdigit() and not alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)


def _remove_temporaries(path: Path) -> None:
    """``.<name>.tmp<pid>`` files a killed writer left (``_atomic`` removes its own)."""
    for tmp in path.glob(".*.tmp*"):
        pid = tmp.name.rpartition(".tmp")[2]
        if pid.isdigit() and not alive(int(pid)):
            tmp.unlink(missing_ok=True)


class ResultsStore:
    """A results directory being written: rows and values in memory, a journal on disk,
    the consolidated files when the run stops.  Holds the directory's lock until closed."""

    def __init__(self, path: Path, manifest: dict[str, Any], environment: dict[str, Any],
                 rows: list[dict[str, Any]], values: list[dict[str, Any]],
                 lock: DirectoryLock, log: journal.Journal):
        self.path = path
        self.manifest = manifest
        self.environment = environment
        self.rows = rows
        self.values = values
        self.lock = lock
        self.journal = log

    @classmethod
    def create(cls, path: Path, suite_name: str, suite_text: str, planned: list[str],
               environment: dict[str, Any], options: dict[str, Any]) -> ResultsStore:
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise ConvbenchError(f"{path}: output directory exists and is not empty; use "
                                 f"--resume {path} to finish it or pick another -o")
        from convbench import __version__

        manifest = {"format_version": schema.FORMAT_VERSION, "convbench_version": __version__,
                    "suite": suite_name, "created": now_utc(), "updated": now_utc(),
                    "status": STATUS_RUNNING, "planned": planned, "done": 0,
                    "options": options}
        staging = path.parent / f".{path.name}{STAGING_MARK}{os.getpid()}"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _remove_stale_staging(path)
            staging.mkdir()
            (staging / schema.SUITE_COPY).write_text(suite_text)
            write_json(staging / schema.ENVIRONMENT_JSON, environment)
            write_json(staging / schema.MANIFEST, manifest)
            (staging / journal.JOURNAL).touch()
            lock = DirectoryLock(staging)   # the lock (its open file) moves with the rename
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise _storage_error(path, exc, "create the results directory") from None
        try:
            os.rename(staging, path)   # atomic; replaces an empty directory of that name
        except OSError as exc:
            lock.release()
            shutil.rmtree(staging, ignore_errors=True)
            if path.exists():
                raise ConvbenchError(f"{path}: output directory appeared and is not empty "
                                     f"(another run?); pick another -o") from None
            raise _storage_error(path, exc, "create the results directory") from None
        log = cls._open_journal(path, None)
        return cls(path, manifest, environment, [], [], lock, log)

    @classmethod
    def _open_journal(cls, path: Path, keep_bytes: int | None) -> journal.Journal:
        try:
            return journal.Journal(path / journal.JOURNAL, keep_bytes)
        except OSError as exc:
            raise _storage_error(path / journal.JOURNAL, exc, "open the journal") from None

    @classmethod
    def reopen(cls, path: Path) -> ResultsStore:
        """An existing directory, to resume: cases the journal committed count as done."""
        manifest_path = path / schema.MANIFEST
        if not manifest_path.is_file():
            raise ConvbenchError(f"{path}: no {schema.MANIFEST}; not a convbench results "
                                 f"directory")
        try:
            manifest = json.loads(manifest_path.read_text())
        except (ValueError, UnicodeDecodeError):
            raise ConvbenchError(f"{manifest_path}: not valid JSON; not a results directory "
                                 f"this convbench can resume") from None
        if not isinstance(manifest, dict) or \
                manifest.get("format_version") != schema.FORMAT_VERSION:
            version = manifest.get("format_version") if isinstance(manifest, dict) else None
            raise ConvbenchError(f"{path}: results format version {version!r}, this "
                                 f"convbench writes {schema.FORMAT_VERSION}; start a new run")
        lock = DirectoryLock(path)
        try:
            env_path = path / schema.ENVIRONMENT_JSON
            environment = json.loads(env_path.read_text()) if env_path.is_file() else {}
            replayed = journal.read(path / journal.JOURNAL)
        except (ValueError, UnicodeDecodeError, KeyError, TypeError) as exc:
            lock.release()
            raise ConvbenchError(f"{path}: damaged results directory, cannot resume "
                                 f"({type(exc).__name__}: {exc})") from None
        manifest["counted"] = replayed.counted
        _remove_temporaries(path)
        log = cls._open_journal(path, replayed.complete_bytes)
        return cls(path, manifest, environment, replayed.rows, replayed.values, lock, log)

    @property
    def done(self) -> set[str]:
        return {r["case_id"] for r in self.rows}

    def _append(self, entry: dict[str, Any]) -> None:
        try:
            self.journal.append(entry)
        except OSError as exc:
            raise self._resumable(self.journal.path, exc) from None

    def add(self, row: dict[str, Any], values: list[dict[str, Any]] | None = None) -> None:
        """Commit a finished case: one journal line."""
        self.rows.append(row)
        self.values.extend(values or [])
        self._append({"case": row, "values": values or []})

    def update(self, case_id: str, figures: Mapping[str, Any]) -> None:
        """Merge figures (a separate counting pass) into a recorded case's row."""
        for row in self.rows:
            if row["case_id"] == case_id:
                row.update(figures)
        self._append({"update": case_id, "figures": dict(figures)})

    def mark_counted(self, case_ids: list[str]) -> None:
        """A counting pass finished these cases (a resumed pass skips them)."""
        self.manifest.setdefault("counted", []).extend(case_ids)
        self._append({"counted": case_ids})

    def _resumable(self, where: Path, exc: OSError) -> ConvbenchError:
        return ConvbenchError(f"{where}: cannot write: {exc.strerror or exc}; the journal "
                              f"keeps every finished case: free the space and `convbench "
                              f"run --resume {self.path}`")

    def save_environment(self) -> None:
        """environment.json now (worker settings and restarts accumulate during a run)."""
        try:
            write_json(self.path / schema.ENVIRONMENT_JSON, self.environment)
        except OSError as exc:
            raise self._resumable(self.path / schema.ENVIRONMENT_JSON, exc) from None

    def set_status(self, status: str) -> None:
        """Record ``status``; stopping (complete, interrupted) consolidates the files first."""
        self.manifest["status"] = status
        if status == STATUS_RUNNING:
            self._write_manifest()
        else:
            self.consolidate()

    def _write_manifest(self) -> None:
        self.manifest["updated"] = now_utc()
        self.manifest["done"] = len(self.rows)
        try:
            write_json(self.path / schema.MANIFEST, self.manifest)
        except OSError as exc:
            raise self._resumable(self.path / schema.MANIFEST, exc) from None

    def consolidate(self) -> None:
        """Write the consolidated files from memory, then the manifest that vouches for them."""
        try:
            write_consolidated(self.path, self.rows, self.values, self.environment)
        except OSError as exc:
            raise self._resumable(self.path, exc) from None
        self._write_manifest()

    def close(self) -> None:
        self.journal.close()
        self.lock.release()


def write_consolidated(path: Path, rows: list[dict[str, Any]], values: list[dict[str, Any]],
                       environment: dict[str, Any]) -> None:
    """environment, values, pyperf, results.parquet and CSV of ``rows`` into ``path``."""
    write_json(path / schema.ENVIRONMENT_JSON, environment)
    _atomic(path / schema.VALUES_PARQUET,
            lambda tmp: values_frame(values).to_parquet(tmp, index=False))
    by_case: dict[str, dict[int, list[float]]] = {}
    for v in values:   # per case, per worker process: one pyperf run each
        by_case.setdefault(v["case_id"], {}).setdefault(int(v.get("process", 0)),
                                                        []).append(float(v["value"]))
    _atomic(path / schema.PYPERF_JSON,
            lambda tmp: pyperf_export.write(tmp, rows, by_case,
                                            environment.get("cpu_model", "")))
    table = to_frame(rows)
    _atomic(path / schema.RESULTS_PARQUET, lambda tmp: table.to_parquet(tmp, index=False))
    # a layer named "=HYPERLINK(...)" must not become a formula in a spreadsheet
    _atomic(path / schema.RESULTS_CSV, lambda tmp: csv_frame(table).to_csv(tmp, index=False))


def replay(path: Path) -> tuple[Any, Any]:
    """The table and values a running or killed run's journal holds (pandas frames)."""
    replayed = journal.read(path / journal.JOURNAL)
    return to_frame(replayed.rows), values_frame(replayed.values)


def load(path: str | Path) -> Any:
    """A results directory (complete or partial) as ``convbench.results.load.Results``:
    ``.table`` and ``.values`` are pandas DataFrames."""
    from convbench.results.load import load_results

    return load_results(path, allow_partial=True)
