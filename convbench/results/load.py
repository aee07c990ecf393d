"""Reading a results directory back: the one guarded reader of everything ``run`` writes.

Every file is read here and checked before anything else sees it: JSON must decode (UTF-8)
to an object whose fields have the types :mod:`convbench.results.documents` lists, tables
must decode and hold the types :mod:`convbench.results.columns` declares, older formats are
upgraded (:mod:`convbench.results.upgrade`).  Whatever is wrong raises
:class:`ResultsError`, one line naming the file and the fault, so ``report`` and ``compare``
exit 2 on a damaged directory and their code may trust the types it gets.  pyperf JSON
files (``compare``'s other kind of input) are read here too, under the same rules.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convbench.errors import ConvbenchError
from convbench.results import columns, documents, journal, schema
from convbench.results.upgrade import Contents, upgrade
from convbench.textsafe import one_line

# Nothing convbench writes comes near these; a file beyond them is damaged or hostile,
# and reading it would exhaust memory (a small compressed file can expand enormously).
MAX_JSON_BYTES = 256 * 2**20
MAX_TABLE_ROWS = 20_000_000
MAX_TABLE_BYTES = 4 * 2**30


class ResultsError(ConvbenchError):
    """A results directory that is missing, damaged, partial or of an incompatible version."""


@dataclass
class Results:
    """One run: the tidy table, the raw values, the environment and the manifest."""

    path: Path
    manifest: dict[str, Any]
    environment: dict[str, Any]
    table: Any   # pandas.DataFrame, one row per case (schema.COLUMNS, their dtypes)
    values: Any  # pandas.DataFrame, long form (schema.VALUE_COLUMNS, their dtypes)

    @property
    def name(self) -> str:
        """Short label of the run: the directory name."""
        return self.path.name

    @property
    def complete(self) -> bool:
        return self.manifest.get("status") == "complete"


def _fault(path: Path, what: object) -> ResultsError:
    return ResultsError(f"{path}: {one_line(str(what))}")


def _read_bytes(path: Path, limit: int = MAX_JSON_BYTES) -> bytes:
    try:
        size = path.stat().st_size
        if size > limit:
            raise _fault(path, f"{size} bytes, more than a results file holds ({limit})")
        return path.read_bytes()
    except OSError as exc:
        raise _fault(path, f"cannot read ({exc.strerror or exc})") from None


def decode_json(path: Path, data: bytes) -> Any:
    """JSON bytes as Python; ResultsError naming ``path`` when not UTF-8 JSON."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _fault(path, f"not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise _fault(path, f"not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise _fault(path, "JSON nested too deeply") from None


def read_json(path: Path, check: Any) -> dict[str, Any]:
    """``path`` decoded and passed through ``check`` (documents.check_*)."""
    try:
        return check(decode_json(path, _read_bytes(path)))
    except ValueError as exc:
        raise _fault(path, exc) from None


def read_table(path: Path, types: dict[str, str]) -> Any:
    """A parquet table with the columns of ``types`` in their declared dtypes."""
    import pandas as pd
    import pyarrow
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
        size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        if meta.num_rows > MAX_TABLE_ROWS or size > MAX_TABLE_BYTES:
            raise _fault(path, f"{meta.num_rows} rows, {size} bytes: more than a results "
                               "table holds")
        # full validation checks every string is UTF-8: pandas decodes them lazily, so a
        # damaged one would escape later, far from here (a flipped byte did in a fuzz run)
        pq.read_table(path).validate(full=True)
        frame = pd.read_parquet(path)
    except ResultsError:
        raise
    # a damaged file fails inside pyarrow or in pandas' reading of its metadata, in ways
    # neither documents: all of them mean the same thing here
    except (pyarrow.ArrowException, OSError, ValueError, TypeError, KeyError, IndexError,
            AttributeError, NotImplementedError, EOFError, MemoryError) as exc:
        raise _fault(path, f"not a readable parquet table ({type(exc).__name__}: "
                           f"{one_line(str(exc), 160)})") from None
    try:
        return columns.coerce(frame, types)
    except ValueError as exc:
        raise _fault(path, exc) from None


def _replay(path: Path) -> tuple[Any, Any]:
    """The table and values a journal holds, in the declared dtypes, or ResultsError."""
    from convbench.results.store import to_frame, values_frame

    size = path.stat().st_size
    if size > MAX_TABLE_BYTES:
        raise _fault(path, f"{size} bytes: more than a results journal holds")
    try:
        replayed = journal.read(path)
        table, values = to_frame(replayed.rows), values_frame(replayed.values)
    # a damaged line that still parses as JSON: wrong types where a row or value belongs
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        raise _fault(path, f"not a readable journal ({type(exc).__name__}: "
                           f"{one_line(str(exc), 160)})") from None
    try:
        return (columns.coerce(table, columns.declared(schema.COLUMNS, extra_figures=True)),
                columns.coerce(values, columns.declared(schema.VALUE_COLUMNS, False)))
    except ValueError as exc:
        raise _fault(path, exc) from None


def load_results(path: str | Path, allow_partial: bool = False) -> Results:
    """Load and check a results directory written by ``convbench run``.

    A run that did not finish (manifest status other than "complete") is an error unless
    ``allow_partial``; the message says how many cases are missing.
    """
    path = Path(path)
    if not path.is_dir():
        raise ResultsError(f"{path}: no such results directory")
    if not (path / schema.MANIFEST).is_file():
        raise ResultsError(f"{path}: not a results directory, missing {schema.MANIFEST}")
    manifest = read_json(path / schema.MANIFEST, documents.check_manifest)
    # a running or killed run: the journal is the truth, the tables are not written yet
    journaled = manifest.get("status") == "running" and (path / journal.JOURNAL).is_file()
    required = (schema.ENVIRONMENT_JSON, journal.JOURNAL) if journaled \
        else schema.REQUIRED_FILES
    missing = [f for f in required if not (path / f).is_file()]
    if missing:
        raise ResultsError(f"{path}: not a complete results directory, missing "
                           f"{', '.join(missing)}")
    environment = read_json(path / schema.ENVIRONMENT_JSON, documents.check_environment)
    table_path, values_path = path / schema.RESULTS_PARQUET, path / schema.VALUES_PARQUET
    if journaled:
        table_path = values_path = path / journal.JOURNAL
        table, values = _replay(table_path)
    else:
        table = read_table(table_path, columns.declared(schema.COLUMNS, extra_figures=True))
        values = read_table(values_path, columns.declared(schema.VALUE_COLUMNS, False))
    # the columns the upgrade steps read; older formats lack only what the steps add
    absent = columns.missing(table, (*schema.IDENTITY[:-1], "case_id", "status", "median_s"))
    if absent:
        raise _fault(table_path, f"missing column(s) {', '.join(absent)}")
    absent = columns.missing(values, ("case_id", "round", "value"))
    if absent:
        raise _fault(values_path, f"missing column(s) {', '.join(absent)}")
    try:
        contents = upgrade(Contents(manifest, table, values), str(path))
    except ConvbenchError as exc:
        raise ResultsError(str(exc)) from None
    manifest, table, values = contents.manifest, contents.table, contents.values
    for where, frame, declared in ((table_path, table, schema.COLUMNS),
                                   (values_path, values, schema.VALUE_COLUMNS)):
        absent = columns.missing(frame, declared)
        if absent:
            raise _fault(where, f"missing column(s) {', '.join(absent)}")
    try:
        columns.check_cases(table)
    except ValueError as exc:
        raise _fault(table_path, exc) from None
    try:
        columns.check_values(values)
    except ValueError as exc:
        raise _fault(values_path, exc) from None
    status = manifest.get("status")
    if status != "complete" and not allow_partial:
        planned = manifest.get("planned", [])
        done = set(table["case_id"])
        todo = [c for c in planned if c not in done]
        raise ResultsError(f"{path}: run is {one_line(repr(status))}, {len(todo)} of "
                           f"{len(planned)} cases missing; finish it with "
                           f"`convbench run --resume {path}`")
    return Results(path=path, manifest=manifest, environment=environment, table=table,
                   values=values)


def read_pyperf(path: Path) -> Any:
    """A pyperf BenchmarkSuite from a ``.json`` or ``.json.gz`` file; ResultsError when it
    cannot be read, is not one, or holds a value that is not a time."""
    import gzip
    import io
    import math
    import zlib

    import pyperf

    data = _read_bytes(path)
    if path.name.endswith(".gz"):
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as unzipped:
                data = unzipped.read(MAX_JSON_BYTES + 1)
        except (OSError, EOFError, zlib.error) as exc:   # EOFError: truncated
            raise _fault(path, f"not a readable gzip file ({type(exc).__name__}: "
                               f"{one_line(str(exc), 160)})") from None
        if len(data) > MAX_JSON_BYTES:
            raise _fault(path, f"expands beyond {MAX_JSON_BYTES} bytes")
    document = decode_json(path, data)
    if not isinstance(document, dict):
        raise _fault(path, "not a pyperf JSON file (not a JSON object)")
    try:
        suite = pyperf.BenchmarkSuite.loads(json.dumps(document))
        benchmarks = suite.get_benchmarks()
        checked = [(b.get_name(), b.get_metadata(), [r.values for r in b.get_runs()])
                   for b in benchmarks]
    # pyperf checks the document as it builds its objects and reports a fault with
    # whichever of these its code happens to raise
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
        raise _fault(path, f"not a pyperf JSON file ({type(exc).__name__}: "
                           f"{one_line(str(exc), 160)})") from None
    for name, _, runs in checked:
        for values in runs:
            if not all(isinstance(v, int | float) and math.isfinite(v) and v >= 0
                       for v in values):
                raise _fault(path, f"benchmark {name!r} has a value that is not a time")
    return suite
