"""``perf stat`` attached to the running worker, counting only inside ``region()``.

One perf process per worker (attaching takes ~0.6 s)::

    perf stat -p PID -D -1 -I MS --control fifo:CTL,ACK -x, -o FILE -e EVENTS

``-D -1`` starts with the events disabled; ``enable``/``disable`` written to the control
FIFO switch them, perf answering ``ack`` on the ACK FIFO once done.  perf prints counts
only when it exits or every ``-I`` interval, so the session runs with a short interval and
sums every interval block: counts grow only while enabled, so the sum over the blocks
printed after a region's ``disable`` is the regions' total.  ``read`` waits for the first
block that starts after the last ``disable``.

Where perf cannot count at all (no perf binary, perf_event_paranoid refusal, PID gone),
every event is missing with that reason and the run goes on.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping

from convbench.harness.counters import metrics, parse
from convbench.harness.counters.events import (
    ROLES,
    EventMap,
    PeakSpec,
    host_event_map,
    host_peak_spec,
    perf_env,
    with_overrides,
)

ATTACH_TIMEOUT_S = 15.0
ACK_TIMEOUT_S = 5.0


def column(event: str) -> str:
    """Tidy-table column of a raw count: ``ctr_`` + the event with non-word chars as ``_``."""
    return "ctr_" + "".join(c if c.isalnum() else "_" for c in event).strip("_")


def columns(readings: Mapping[str, parse.Reading], emap: EventMap, calls: int,
            seconds: float, peak: PeakSpec | None, reason_all: str = "") -> dict[str, float | str]:
    """Counts per call (``ctr_*``, ``*_reason``), the lowest running share, and metrics.

    ``readings`` are region totals by event name; ``seconds`` the region's wall time.
    ``reason_all`` marks every event missing (perf could not count at all).
    """
    out: dict[str, float | str] = {}
    counts: dict[str, float] = {}
    reasons: dict[str, str] = {}
    shares = []
    for event in emap.events:
        r = readings.get(event)
        # perf may print an event with a modifier it added (cycles:u)
        if r is None:
            r = next((x for e, x in readings.items() if e.split(":")[0] == event), None)
        reason = reason_all or (r.reason if r is not None else "not reported by perf")
        if r is not None and r.counted and not reason_all:
            counts[event] = r.value / calls
            shares.append(r.share)
            out[column(event)] = counts[event]
        else:
            counts[event] = math.nan
            reasons[event] = reason
            out[column(event)] = math.nan
            out[column(event) + "_reason"] = reason
    out["ctr_running_share"] = min(shares) if shares else math.nan
    by_role = {role: counts.get(ev, math.nan) for role, ev in emap.roles.items()}
    role_reasons = {role: reasons.get(ev, "") for role, ev in emap.roles.items()}
    for role in ROLES:
        if role in emap.missing or role not in emap.roles:
            by_role[role] = math.nan
            role_reasons[role] = emap.missing.get(role, f"no event for it in the "
                                                        f"{emap.family} event map")
    fp, fp_reason = metrics.fp_ops(counts, emap.fp_events, reasons, emap.fp_ops_reason)
    if reason_all:
        fp, fp_reason = math.nan, reason_all
    out["ctr_fp_ops"] = fp
    if fp_reason:
        out["ctr_fp_ops_reason"] = fp_reason
    by_role["fp_ops"] = fp
    role_reasons["fp_ops"] = fp_reason
    out.update(metrics.derive(
        by_role, role_reasons, seconds=seconds / calls if calls else math.nan,
        peak_ops_per_cycle=peak.fp32_ops_per_cycle if peak else math.nan))
    return out


def _stat_true(exe: str, events: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([exe, "stat", "-x,", "-e", ",".join(events), "true"],
                          capture_output=True, text=True, env=perf_env(), timeout=30)


def probe(events: list[str], perf: str = "perf") -> dict[str, str]:
    """For each event, "" when perf counts it on this host, else why not.

    One ``perf stat ... true`` for all events; when perf rejects the list (an event name it
    does not know here), each event is tried alone to find which.
    """
    exe = shutil.which(perf)
    if exe is None:
        return {e: "perf not installed (no perf on PATH)" for e in events}
    done = _stat_true(exe, events)
    if done.returncode != 0:
        refusal = parse.refusal_reason(done.stderr, parse.read_paranoid())
        if refusal or len(events) == 1:
            why = refusal or "unknown to perf on this host (not in `perf list`)"
            return {e: why for e in events}
        out: dict[str, str] = {}
        for e in events:
            out.update(probe([e], perf))
        return out
    got = parse.accumulate(parse.parse_csv(done.stderr))
    out = {}
    for e in events:
        r = got.get(e) or next((x for k, x in got.items() if k.split(":")[0] == e), None)
        out[e] = "not reported by perf" if r is None else r.reason
    return out


class PerfSession:
    """A perf stat process attached to this process; see the module docstring."""

    kind = "perf"

    def __init__(self, emap: EventMap, peak: PeakSpec | None = None,
                 interval_ms: int = 100, perf: str = "perf") -> None:
        self.emap = emap
        self.peak = peak
        self.interval_ms = interval_ms
        self.failure = ""             # why nothing can be counted ("" while perf works)
        self._consumed = 0            # bytes of the output file already summed
        self._mark = 0                # file size when the last disable was acknowledged
        self._seconds = 0.0
        self._dir = tempfile.mkdtemp(prefix="convbench-perf-")
        self._out = os.path.join(self._dir, "stat.csv")
        self._err = os.path.join(self._dir, "stderr.txt")
        ctl, ack = os.path.join(self._dir, "ctl"), os.path.join(self._dir, "ack")
        os.mkfifo(ctl)
        os.mkfifo(ack)
        # O_RDWR on our side too: neither open blocks, and no end ever sees EOF
        self._ctl = os.open(ctl, os.O_RDWR)
        self._ack = os.open(ack, os.O_RDWR | os.O_NONBLOCK)
        self._proc: subprocess.Popen[bytes] | None = None
        self.unknown: dict[str, str] = {}   # events perf does not know here, and why
        self.counted: list[str] = []        # events given to perf
        exe = shutil.which(perf)
        if exe is None:
            self.failure = "perf not installed (no perf on PATH)"
            return
        # perf refuses the whole list for one event name it does not know: leave those out
        self.unknown = {e: why for e, why in probe(emap.events, exe).items()
                        if why.startswith(("unknown", "perf refused"))}
        if len(self.unknown) == len(emap.events):
            self.failure = next(iter(self.unknown.values()))
            return
        self.counted = [e for e in emap.events if e not in self.unknown]
        cmd = [exe, "stat", "-p", str(os.getpid()), "-D", "-1", "-I", str(interval_ms),
               "--control", f"fifo:{ctl},{ack}", "-x,", "-o", self._out,
               "-e", ",".join(self.counted)]
        with open(self._err, "wb") as err:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=err,
                                          env=perf_env())
        # a harmless command proves perf is attached and listening
        self._command("disable", ATTACH_TIMEOUT_S)

    # -- control ---------------------------------------------------------------------
    def _perf_failed(self) -> str:
        with contextlib.suppress(OSError), open(self._err) as f:
            err = f.read()
        reason = parse.refusal_reason(err, parse.read_paranoid())
        if reason:
            return reason
        last = [ln for ln in err.splitlines() if ln.strip()
                and not ln.startswith("Events ")]
        return "perf stopped: " + (last[-1].strip() if last else "no message")

    def _command(self, cmd: str, timeout: float = ACK_TIMEOUT_S) -> bool:
        if self.failure or self._proc is None:
            return False
        os.write(self._ctl, (cmd + "\n").encode())
        deadline = time.monotonic() + timeout
        buf = b""
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self.failure = self._perf_failed()
                return False
            ready, _, _ = select.select([self._ack], [], [], 0.05)
            if ready:
                buf += os.read(self._ack, 64)
                if b"ack" in buf:
                    return True
        self.failure = f"perf did not acknowledge {cmd!r} within {timeout:.0f} s"
        return False

    @contextlib.contextmanager
    def region(self, prepare: Callable[[], None] | None = None) -> Iterator[None]:
        if prepare is not None:
            prepare()
        enabled = self._command("enable")
        start = time.perf_counter()
        try:
            yield
        finally:
            self._seconds += time.perf_counter() - start
            if enabled and self._command("disable"):
                # perf reads and prints a block in one step of its loop, so every block
                # read before the disable is in the file before the ack came back
                self._mark = self._file_size()

    # -- output ----------------------------------------------------------------------
    def _file_size(self) -> int:
        try:
            return os.path.getsize(self._out)
        except OSError:
            return 0

    def _text(self, start: int) -> str:
        with open(self._out) as f:
            f.seek(start)
            return f.read()

    @staticmethod
    def _lines(text: str) -> list[str]:
        """Complete data lines of ``text`` (comments, blanks and a partial tail dropped)."""
        complete = text[:text.rfind("\n") + 1]
        return [ln for ln in complete.splitlines()
                if ln.strip() and not ln.lstrip().startswith("#")]

    def _wait_for_block(self) -> bool:
        """Wait until perf has printed one whole block read after the last disable."""
        n = len(self.counted)
        deadline = time.monotonic() + 20 * self.interval_ms / 1000 + 2
        while time.monotonic() < deadline:
            if len(self._lines(self._text(self._mark))) >= n:
                return True
            if self._proc is not None and self._proc.poll() is not None:
                self.failure = self._perf_failed()
                return False
            time.sleep(self.interval_ms / 4000)
        self.failure = "perf printed no counts after the region"
        return False

    def read(self, calls: int) -> dict[str, float | str]:
        """Per-call counts and metrics of the regions since the last read; then reset."""
        seconds, self._seconds = self._seconds, 0.0
        if self.failure or not self._wait_for_block():
            return columns({}, self.emap, calls, seconds, self.peak, self.failure)
        # sum every whole block since the last read: counts grow only while enabled
        text = self._text(self._consumed)
        n = len(self.counted)
        lines = self._lines(text)
        whole = lines[:len(lines) - len(lines) % n]
        consumed = taken = 0
        for line in text.splitlines(keepends=True):  # advance over the whole blocks only
            if taken == len(whole):
                break
            consumed += len(line)
            taken += bool(line.strip()) and not line.lstrip().startswith("#")
        self._consumed += consumed
        totals = parse.accumulate(parse.parse_csv("\n".join(whole)))
        totals.update({e: parse.Reading(e, math.nan, "", 0.0, 0.0, why)
                       for e, why in self.unknown.items()})
        return columns(totals, self.emap, calls, seconds, self.peak)

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
            if self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait()
        for fd in (self._ctl, self._ack):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self._dir, ignore_errors=True)


def open_session(events: str | list[str] | None = None, fma_units: str | int | None = None,
                 vector_bits: str | int | None = None, interval_ms: str | int = 100,
                 **_: str) -> PerfSession:
    """The worker's perf session: the host's event map with the user's ``events`` overrides.

    ``events`` is a list or a comma-separated string (see :func:`events.with_overrides`).
    """
    if isinstance(events, str):
        events = [e for e in events.split(",") if e.strip()]
    emap = with_overrides(host_event_map(), events)
    peak = host_peak_spec(fma_units=None if fma_units is None else int(fma_units),
                          vector_bits=None if vector_bits is None else int(vector_bits))
    return PerfSession(emap, peak, int(interval_ms))
