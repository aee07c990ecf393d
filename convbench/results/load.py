"""Reading a results directory back: checks it is complete; older formats are upgraded."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convbench.errors import ConvbenchError
from convbench.results import schema
from convbench.results.journal import JOURNAL
from convbench.results.store import STATUS_RUNNING, replay
from convbench.results.upgrade import Contents, upgrade


class ResultsError(ConvbenchError):
    """A results directory that is missing, partial or of an incompatible version."""


@dataclass
class Results:
    """One run: the tidy table, the raw values, the environment and the manifest."""

    path: Path
    manifest: dict[str, Any]
    environment: dict[str, Any]
    table: Any   # pandas.DataFrame, one row per case (schema.COLUMNS)
    values: Any  # pandas.DataFrame, long form (schema.VALUE_COLUMNS)

    @property
    def name(self) -> str:
        """Short label of the run: the directory name."""
        return self.path.name

    @property
    def complete(self) -> bool:
        return self.manifest.get("status") == "complete"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None


def load_results(path: str | Path, allow_partial: bool = False) -> Results:
    """Load a results directory written by ``convbench run``.

    A run that did not finish (manifest status other than "complete") is an error unless
    ``allow_partial``; the message says which files or cases are missing.
    """
    import pandas as pd

    path = Path(path)
    if not path.is_dir():
        raise ResultsError(f"{path}: no such results directory")
    manifest = _read_json(path / schema.MANIFEST) if (path / schema.MANIFEST).is_file() else {}
    journaled = manifest.get("status") == STATUS_RUNNING and (path / JOURNAL).is_file()
    required = (schema.MANIFEST, schema.ENVIRONMENT_JSON, JOURNAL) if journaled \
        else schema.REQUIRED_FILES
    missing = [f for f in required if not (path / f).is_file()]
    if missing:
        raise ResultsError(f"{path}: not a complete results directory, missing "
                           f"{', '.join(missing)}")
    if journaled:
        table, values = replay(path)   # running or killed: the journal is the truth
    else:
        table = pd.read_parquet(path / schema.RESULTS_PARQUET)
        values = pd.read_parquet(path / schema.VALUES_PARQUET)
    try:
        contents = upgrade(Contents(manifest, table, values), str(path))
    except ConvbenchError as exc:
        raise ResultsError(str(exc)) from None
    manifest, table = contents.manifest, contents.table
    absent = [c for c in (*schema.IDENTITY, "status", "median_s") if c not in table.columns]
    if absent:
        raise ResultsError(f"{path}/{schema.RESULTS_PARQUET}: missing column(s) "
                           f"{', '.join(absent)}")
    status = manifest.get("status")
    if status != "complete" and not allow_partial:
        planned = manifest.get("planned", [])
        done = set(table["case_id"]) if "case_id" in table else set()
        todo = [c for c in planned if c not in done]
        raise ResultsError(f"{path}: run is {status!r}, {len(todo)} of {len(planned)} cases "
                           f"missing; finish it with `convbench run --resume {path}`")
    return Results(path=path, manifest=manifest,
                   environment=_read_json(path / schema.ENVIRONMENT_JSON), table=table,
                   values=contents.values)
