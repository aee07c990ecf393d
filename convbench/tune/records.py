"""Tuning records: one JSON line per measured candidate per round of ``convbench tune``.

The file (default ``tuning/<suite>-<host key>.jsonl``) is what ``convbench run --records``
applies and what the layout planner reads, as AutoTVM's log is for ``apply_history_best``.
Lines are appended as measurements arrive, one ``write`` each, so a kill loses at most the
line being written; a torn last line (no newline and not JSON) is ignored on read, and cut
off before the next append.  Any other line that is no record is a one-line error naming
``file:line``.

A record (:data:`FORMAT_VERSION` 1; every field below is always present)::

    format_version    1
    convbench_version the version that measured it
    host              machine.store.host_identity()["key"]: host name + hash of the CPU
    suite, layer      where the layer came from (records match on the descriptor, not these)
    descriptor        the layer's benchdnn problem as results rows write it (its name in it)
    variant           the variant id (algorithm/layout/knob=value...)
    algorithm, layout, params ({knob: value}, JSON-typed)
    threads, vector_width, cache    the group the candidate was measured in
    round             0 for the first (shortest) round; the final round is the highest
    final             true in the final round, at the suite's own timing
    min_time, n_values  the round's timing: seconds per value, values pooled (0 on failure)
    median_s, ci_low_s, ci_high_s   seconds per call (null on failure)
    ref_ratio        median over the in-run reference's (optional; null when not timed)
    min_s            the least value (optional; older records lack it): what a short round
                     ranks by (tune.session says why)
    status, reason    ok / fail / crash / timeout / error / skip, and why (empty when ok)
    kernel_version    the algorithm's code hash (registry.kernel_version)
    time              UTC ISO time the line was written

A layer group is (descriptor, threads, vector_width, cache, host): records of a layer
match it in any suite that has the same layer (shape and name), whatever the suite's name.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from convbench.errors import ConvbenchError

if TYPE_CHECKING:
    from convbench.harness.plan import Case

FORMAT_VERSION = 1
# field -> the JSON types it may hold (None: null allowed)
FIELDS: dict[str, tuple[type, ...]] = {
    "format_version": (int,), "convbench_version": (str,), "host": (str,), "suite": (str,),
    "layer": (str,), "descriptor": (str,), "variant": (str,), "algorithm": (str,),
    "layout": (str,), "params": (dict,), "threads": (int,), "vector_width": (str,),
    "cache": (str,), "round": (int,), "final": (bool,), "min_time": (int, float),
    "n_values": (int,), "median_s": (int, float, type(None)),
    "ci_low_s": (int, float, type(None)), "ci_high_s": (int, float, type(None)),
    "status": (str,), "reason": (str,), "kernel_version": (str,), "time": (str,),
}
OK = "ok"


@dataclass(frozen=True)
class GroupKey:
    """What a record must share with a layer group to apply to it."""

    descriptor: str
    threads: int
    vector_width: str
    cache: str
    host: str

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> GroupKey:
        return cls(record["descriptor"], record["threads"], record["vector_width"],
                   record["cache"], record["host"])

    @classmethod
    def of_case(cls, case: Case, host: str) -> GroupKey:
        """The group a plan's case belongs to, measured on ``host``."""
        return cls(str(case.problem), case.threads, case.vector_width, case.cache, host)

    def __str__(self) -> str:
        return f"{self.descriptor} t{self.threads} v{self.vector_width} {self.cache}"


def default_path(suite: str, host: str) -> Path:
    return Path("tuning") / f"{suite}-{host}.jsonl"


def _number(value: Any) -> float | None:
    """A float for JSON: NaN (a failed case's median) is null, which strict JSON can hold."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def from_row(row: Mapping[str, Any], *, host: str, round_index: int, final: bool,
             min_time: float, time: str) -> dict[str, Any]:
    """The record of one results row (:mod:`convbench.results.record`) measured in a round."""
    from convbench import __version__

    return {"format_version": FORMAT_VERSION, "convbench_version": __version__, "host": host,
            "suite": row["suite"], "layer": row["layer"], "descriptor": row["descriptor"],
            "variant": row["variant"], "algorithm": row["algorithm"],
            "layout": row["layout"], "params": json.loads(row["params"]),
            "threads": int(row["threads"]), "vector_width": row["vector_width"],
            "cache": row["cache"], "round": round_index, "final": final,
            "min_time": min_time, "n_values": int(row.get("n_values") or 0),
            "median_s": _number(row.get("median_s")),
            "ci_low_s": _number(row.get("ci_low_s")),
            "ci_high_s": _number(row.get("ci_high_s")),
            # optional (older records lack it): the in-run reference ratio, kept for reading;
            # short rounds rank by the least value, min_s (tune.session says why)
            "ref_ratio": _number(row.get("ref_ratio")),
            "min_s": _number(row.get("min_s")),
            "status": str(row["status"]), "reason": str(row.get("reason") or ""),
            "kernel_version": str(row.get("kernel_version") or ""), "time": time}


def short_round_score(record: Mapping[str, Any]) -> float | None:
    """What a round before the final ranks ``record`` by: its least value, or its median
    where it has none (an older record); None when it is not ok.  Why the least value:
    tune.session's docstring."""
    if record.get("status") != OK:
        return None
    value = record.get("min_s")
    if value is None:
        value = record.get("median_s")
    return None if value is None else float(value)


def problem(record: Any) -> str | None:
    """Why ``record`` (a decoded line) is no record of this format; None when it is one."""
    if not isinstance(record, dict):
        return f"expected a JSON object, got {type(record).__name__}"
    version = record.get("format_version")
    if version != FORMAT_VERSION:
        return (f"format_version {version!r}; this convbench reads format {FORMAT_VERSION}")
    missing = [name for name in FIELDS if name not in record]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    for name, types in FIELDS.items():
        value = record[name]
        # bool is an int to Python; no count or time may be true/false
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            expected = " or ".join(t.__name__ for t in types)
            return f"field {name}: expected {expected}, got {json.dumps(value)[:40]}"
    return None


def decoded_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(line number, decoded JSON)`` for each non-blank line of ``path``.  A torn last
    line (no newline, not JSON: the line a kill interrupted) is skipped; any other line
    that is not JSON is a ConvbenchError naming ``path:line``.  What a decoded line must
    hold is the reader's business (:func:`read` is strict, the planner lenient)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConvbenchError(f"{path}: no such tuning records file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConvbenchError(f"{path}: cannot read tuning records ({exc})") from None
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):   # the text after the last newline: torn
                continue
            raise ConvbenchError(f"{path}:{number}: not a tuning record (bad JSON: "
                                 f"{exc.msg} at column {exc.colno})") from None


def read(path: str | Path) -> list[dict[str, Any]]:
    """Every record of ``path`` in file order (a torn last line skipped); a line that is
    no record of this format is a ConvbenchError naming ``path:line``."""
    records = []
    for number, record in decoded_lines(path):
        why = problem(record)
        if why:
            raise ConvbenchError(f"{path}:{number}: not a tuning record ({why})")
        records.append(record)
    return records


class Writer:
    """Appends records to a file, one ``write`` of one whole line each."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._cut_torn_tail()
            self.file = self.path.open("a", encoding="utf-8")
        except OSError as exc:
            raise ConvbenchError(f"{self.path}: cannot write tuning records ({exc})") from None

    def _cut_torn_tail(self) -> None:
        """A line a kill interrupted would glue itself to the next record: cut it off."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            os.truncate(self.path, end)

    def write(self, record: Mapping[str, Any]) -> None:
        try:
            self.file.write(json.dumps(record, sort_keys=True, allow_nan=False) + "\n")
            self.file.flush()
        except OSError as exc:
            raise ConvbenchError(f"{self.path}: cannot write tuning records ({exc})") from None

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write(path: str | Path, records: Iterable[Mapping[str, Any]]) -> None:
    """Append ``records`` to ``path``."""
    with Writer(path) as writer:
        for record in records:
            writer.write(record)


def of_group(records: Iterable[Mapping[str, Any]], key: GroupKey) -> list[Mapping[str, Any]]:
    return [r for r in records if GroupKey.of(r) == key]


def last_per_variant(records: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Each variant's record of the last round it reached (a later line wins a tie: a
    round measured again)."""
    last: dict[str, Mapping[str, Any]] = {}
    for record in records:
        seen = last.get(record["variant"])
        if seen is None or record["round"] >= seen["round"]:
            last[record["variant"]] = record
    return last


def best(records: Sequence[Mapping[str, Any]], key: GroupKey) -> Mapping[str, Any] | None:
    """The tuned variant of a layer group, or None when no record of it is ok.

    Each variant counts with its record of the LAST round it reached; a variant whose last
    record failed is out.  Among the rest, the variants that reached the furthest round
    compete (a longer round's median beats a shorter round's, whichever is lower: the
    short rounds only rank), and the lowest median wins."""
    last = [r for r in last_per_variant(of_group(records, key)).values()
            if r["status"] == OK and r["median_s"] is not None]
    if not last:
        return None
    furthest = max(r["round"] for r in last)
    return min((r for r in last if r["round"] == furthest), key=lambda r: r["median_s"])


def finished(records: Iterable[Mapping[str, Any]], key: GroupKey) -> bool:
    """Whether the group's final round is recorded (``tune --resume`` skips it)."""
    return any(r["final"] for r in of_group(records, key))
