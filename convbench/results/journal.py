"""The results directory's journal: one JSON line per committed fact, appended, never
rewritten.

A line is one of::

    {"case": ROW, "values": [VALUE, ...]}     a finished case (its row is the commit point)
    {"update": CASE_ID, "figures": {...}}      figures merged into a recorded row (counters)
    {"counted": [CASE_ID, ...]}                cases a counting pass has finished

Committing a case costs one ``write`` of its line, the same at row 10 and row 10,000 (the
consolidated Parquet/CSV/pyperf files are written once, when the run stops).  Each line
goes out in a single ``write`` to a file opened with ``O_APPEND``; a process killed
mid-write can leave only the last line torn, and :func:`read` drops a line without its
newline (the case it held was not committed, and a resume measures it again).  Lines reach
the page cache, not the disk: the journal survives a killed process, not a power cut.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

JOURNAL = "journal.jsonl"


def _plain(value: Any) -> Any:
    """numpy scalars and pandas' NA as JSON (rows hold what the record module built)."""
    if hasattr(value, "item"):
        return value.item()
    if value is None or type(value).__name__ == "NAType":
        return None
    return str(value)


def encode(entry: Mapping[str, Any]) -> bytes:
    # NaN stays NaN (Python's json writes and reads it): a missing figure is NaN in the table
    return (json.dumps(entry, default=_plain, separators=(",", ":")) + "\n").encode()


@dataclass
class Replay:
    """What a journal holds, in commit order: rows (updates merged), values, counted ids,
    and the byte length of its complete lines (a torn tail starts there)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    values: list[dict[str, Any]] = field(default_factory=list)
    counted: list[str] = field(default_factory=list)
    complete_bytes: int = 0


def read(path: Path) -> Replay:
    """Replay ``path``; a torn last line (no newline, or not JSON) is left out."""
    out = Replay()
    if not path.is_file():
        return out
    data = path.read_bytes()
    by_id: dict[str, dict[str, Any]] = {}
    offset = 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        if end < 0:
            break    # torn: the writer was killed inside this line
        try:
            entry = json.loads(data[offset:end])
        except ValueError:
            break    # torn and then appended to: nothing after it can be trusted
        offset = end + 1
        out.complete_bytes = offset
        if "case" in entry:
            row = entry["case"]
            if row["case_id"] in by_id:
                continue   # committed twice (cannot happen under the lock): the first stands
            by_id[row["case_id"]] = row
            out.rows.append(row)
            out.values.extend(entry.get("values") or [])
        elif "update" in entry:
            if entry["update"] in by_id:
                by_id[entry["update"]].update(entry["figures"])
        elif "counted" in entry:
            out.counted.extend(entry["counted"])
    return out


class Journal:
    """The open journal of a results directory being written."""

    def __init__(self, path: Path, keep_bytes: int | None = None):
        self.path = path
        if keep_bytes is not None and path.is_file() and path.stat().st_size > keep_bytes:
            os.truncate(path, keep_bytes)   # a torn tail goes before anything is appended
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, entry: Mapping[str, Any]) -> None:
        line = encode(entry)
        written = os.write(self.fd, line)
        if written != len(line):   # a short write (disk full): the tail is torn, say so
            raise OSError(28, os.strerror(28), str(self.path))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
