"""Parse ``perf stat`` output (``-x,`` CSV and ``--json``) into per-event readings.

CSV lines (perf 5.x/6.x, ``-x,``), with an interval timestamp first under ``-I``::

    [time,]value,unit,event,run_time_ns,pcnt_running,metric_value,metric_unit

JSON (``--json``): one object per line with ``counter-value``, ``unit``, ``event``,
``event-runtime``, ``pcnt-running`` and, under ``-I``, ``interval``.

``value`` is ``<not supported>`` (the PMU has no such event, e.g. in a VM) or ``<not
counted>`` (the event never got a counter while enabled, or counting was disabled).
``pcnt_running`` is the share of the enabled time the event ran on a counter: below 100
the event was multiplexed.  perf scales a multiplexed count by enabled/running unless run
with ``--no-scale``; :func:`parse_csv` and :func:`parse_json` take ``scaled`` saying which,
and scale themselves when perf did not.  Intervals of one event are summed by
:func:`accumulate`, the running share becoming total running / total enabled time.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

NOT_SUPPORTED = "<not supported>"
NOT_COUNTED = "<not counted>"


@dataclass(frozen=True)
class Reading:
    """One event's count in one perf output block (one interval, or the whole run)."""

    event: str
    value: float          # scaled count; NaN when missing
    unit: str
    run_ns: float         # time the event ran on a counter
    share: float          # running / enabled time, 0..1 (1: not multiplexed)
    reason: str = ""      # why value is NaN ("" when counted)
    interval: float | None = None

    @property
    def counted(self) -> bool:
        return not self.reason


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _reading(event: str, raw: str, unit: str, run: str, pcnt: str, interval: float | None,
             scaled: bool) -> Reading:
    run_ns = _number(run) or 0.0
    share = (_number(pcnt) if pcnt else None)
    share = 1.0 if share is None else share / 100.0
    raw = raw.strip()
    if raw in (NOT_SUPPORTED, NOT_COUNTED):
        reason = "not supported by this CPU/PMU" if raw == NOT_SUPPORTED else "not counted"
        return Reading(event, math.nan, unit, run_ns, share, reason, interval)
    value = _number(raw)
    if value is None:
        return Reading(event, math.nan, unit, run_ns, share, f"unparsed value {raw!r}",
                       interval)
    if not scaled and 0 < share < 1:
        value /= share
    return Reading(event, value, unit, run_ns, share, "", interval)


def parse_csv(text: str, sep: str = ",", scaled: bool = True) -> list[Reading]:
    """Readings from ``perf stat -x<sep>`` output (comment and blank lines skipped)."""
    readings = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = [f.strip() for f in line.split(sep)]
        if len(fields) < 3:
            continue
        interval = None
        # under -I the first field is a timestamp and the fourth the event name; without
        # -I the fourth is the (numeric) run time
        if len(fields) >= 5 and _number(fields[0]) is not None and _number(fields[3]) is None:
            interval = float(fields[0])
            fields = fields[1:]
        fields += [""] * (5 - len(fields))
        raw, unit, event, run, pcnt = fields[:5]
        readings.append(_reading(event, raw, unit, run, pcnt, interval, scaled))
    return readings


def parse_json(text: str, scaled: bool = True) -> list[Reading]:
    """Readings from ``perf stat --json`` output (one JSON object per line)."""
    readings = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        obj = json.loads(line)
        if "event" not in obj:
            continue
        interval = obj.get("interval")
        readings.append(_reading(obj["event"], str(obj.get("counter-value", "")),
                                 obj.get("unit", ""), str(obj.get("event-runtime", "")),
                                 str(obj.get("pcnt-running", "")),
                                 None if interval is None else float(interval), scaled))
    return readings


def parse(text: str, scaled: bool = True) -> list[Reading]:
    """CSV or JSON, whichever ``text`` is."""
    if text.lstrip().startswith("{") or "\n{" in text:
        return parse_json(text, scaled)
    return parse_csv(text, scaled=scaled)


def accumulate(readings: Iterable[Reading]) -> dict[str, Reading]:
    """Sum each event over intervals.  An event counted in no interval keeps its reason.

    Intervals where counting was disabled read ``<not counted>`` and add nothing.  The
    share is total running time / total enabled time over the counted intervals.
    """
    totals: dict[str, list[float]] = {}
    missing: dict[str, Reading] = {}      # the first missing reading of each event
    units: dict[str, str] = {}
    for r in readings:
        units.setdefault(r.event, r.unit)
        if not r.counted:
            missing.setdefault(r.event, r)
            continue
        acc = totals.setdefault(r.event, [0.0, 0.0, 0.0])
        acc[0] += r.value
        acc[1] += r.run_ns
        acc[2] += r.run_ns / r.share if r.share > 0 else 0.0
    out = {}
    for event, unit in units.items():
        if event in totals:
            value, run, enabled = totals[event]
            out[event] = Reading(event, value, unit, run, run / enabled if enabled else 1.0)
        else:
            out[event] = missing[event]
    return out


_PARANOID_HINTS = re.compile(
    r"perf_event_paranoid|Permission denied|No permission|Access to performance monitoring"
    r"|not permitted|EACCES|EPERM", re.IGNORECASE)


def refusal_reason(stderr: str, paranoid: int | None = None) -> str | None:
    """The reason perf refused to count (permissions), or None when it did not refuse."""
    if not _PARANOID_HINTS.search(stderr):
        return None
    level = "" if paranoid is None else f" (kernel.perf_event_paranoid={paranoid})"
    return f"perf refused access to performance events{level}"


def read_paranoid(path: str = "/proc/sys/kernel/perf_event_paranoid") -> int | None:
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None
