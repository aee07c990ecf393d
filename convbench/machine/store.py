"""Where machine limits live: one JSON file per host under the user cache directory.

``~/.cache/convbench/machine/<host-key>.json`` (``$XDG_CACHE_HOME`` honoured; the directory
can be moved with ``$CONVBENCH_MACHINE_DIR``).  The host key joins the host name and a hash
of the CPU model, CPU count and cache sizes, because the same host name has been seen on
different CPUs between sessions (BRIEF.md).

The JSON object (``FORMAT_VERSION`` 3)::

    format_version   3
    host             {"hostname", "cpu_model", "cpus", "key"}
    measured         UTC ISO time
    quick            true when measured with a quick profile (shorter, noisier)
    profile          "full" | "quick" (machine.measure.PROFILES); "quick" on a run's first use
    seconds          wall time the measurement took
    clock_ghz        measured core clock under load
    peak_gflops      {threads: {width: GFLOP/s}}  threads "1", "2", ...; width "256", "512"
    bandwidth_curve_measured {threads: [[bytes per thread, GB/s], ...]}  triad over a
                     geometric series of working sets, smallest first (machine.bandwidth)
    bandwidth_curve  the same, each point raised to the best of the larger sizes
                     (bandwidth.upper_envelope: a co-tenant's dip is not a bound); the
                     roofline's memory bound is read off it at a layer's footprint
    bandwidth_gbs    {level: {threads: GB/s}}     the curve read at each level's working set
                     (level "L1", "L2", "L3", "DRAM"): plateau names for the report
    working_set_bytes {level: {threads: bytes per thread}}  where those were read
    caches           {level: {"size_bytes", "shared_by", "from_sysfs"}}
    asm_width        {width: bits of the FMAs LLVM emitted for that width}
    notes            [why a figure is missing, ...]

All keys of the nested maps are strings (JSON).  :func:`peak_for`, :func:`bandwidth_at` and
:func:`roofline_for` look figures up by int thread count and width ("auto" = the best width
measured).

Older formats are not loaded, so :func:`machine_limits` answers None and the next
``convbench run`` measures again (``convbench machine`` overwrites it): format 1 (no curve:
one triad per sysfs level) because its "L3" figure could be a DRAM figure (the 480 MiB sysfs
L3 above); format 2 because its peak came from FMA chains alone, which the register tile
beats by 6-9% on the Zen 5 host (machine.peak).  Results directories
keep the limits they were run with in environment.json, whatever their format; the report
draws their level roofs from ``bandwidth_gbs``, which every format has.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convbench import host

FORMAT_VERSION = 3


def default_dir() -> Path:
    if os.environ.get("CONVBENCH_MACHINE_DIR"):
        return Path(os.environ["CONVBENCH_MACHINE_DIR"])
    return host.cache_dir() / "machine"


def host_identity() -> dict[str, Any]:
    """Host name, CPU model and count, and a key that changes when the CPU does."""
    from convbench.machine.bandwidth import cache_levels

    caches = ",".join(f"{c.level}={c.size_bytes}" for c in cache_levels().values())
    model, cpus, hostname = host.cpu_model(), os.cpu_count() or 1, socket.gethostname()
    digest = hashlib.sha1(f"{model}|{cpus}|{caches}".encode()).hexdigest()[:10]
    return {"hostname": hostname, "cpu_model": model, "cpus": cpus,
            "key": f"{hostname}-{digest}"}


def limits_path(key: str | None = None) -> Path:
    return default_dir() / f"{key or host_identity()['key']}.json"


def save(limits: dict[str, Any], path: Path | None = None) -> Path:
    path = Path(path) if path else limits_path(limits["host"]["key"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(limits, indent=2, sort_keys=True))
    tmp.replace(path)
    return path


def load(path: Path) -> dict[str, Any] | None:
    """The limits in ``path``, or None when absent, unreadable or of another version."""
    try:
        limits = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return limits if limits.get("format_version") == FORMAT_VERSION else None


def machine_limits(path: Path | None = None) -> dict[str, Any] | None:
    """The stored limits of this host (or of ``path``), None when never measured.

    ``run`` records this object under ``environment.json``'s ``"machine"`` key and divides
    GFLOP/s by :func:`peak_for` to fill ``peak_share``.
    """
    return load(Path(path) if path else limits_path())


# the figures measured per thread count (keys "1", "2", ...), and where
_BY_THREADS = ("peak_gflops", "bandwidth_curve", "bandwidth_curve_measured")
_BY_LEVEL_THEN_THREADS = ("working_set_bytes", "bandwidth_gbs")


def measured_threads(limits: dict[str, Any] | None) -> set[int]:
    """Thread counts with a measured peak and bandwidth curve."""
    limits = limits or {}
    return {int(t) for t in limits.get("peak_gflops", {})} & \
        {int(t) for t in limits.get("bandwidth_curve", {})}


def merge(stored: dict[str, Any], added: dict[str, Any]) -> dict[str, Any]:
    """``stored`` with the thread counts of ``added`` (a measurement of other thread counts
    on the same host) put in; host-wide figures (clock, widths, caches) stay the stored
    ones; ``notes`` gains what the measurement noted and when which counts were added."""
    merged = json.loads(json.dumps(stored))
    for key in _BY_THREADS:
        merged.setdefault(key, {}).update(added.get(key, {}))
    for key in _BY_LEVEL_THEN_THREADS:
        for level, by_threads in added.get(key, {}).items():
            merged.setdefault(key, {}).setdefault(level, {}).update(by_threads)
    counts = ",".join(sorted(added.get("peak_gflops", {}), key=int))
    notes = merged.setdefault("notes", [])
    notes += [n for n in added.get("notes", []) if n not in notes]   # e.g. a low scaling
    notes.append(
        f"threads {counts} measured {added.get('measured', '')} ({added.get('profile', '')} "
        f"profile, {added.get('seconds', '?')} s)")
    merged["quick"] = bool(stored.get("quick")) or bool(added.get("quick"))
    return merged


def _nested(table: dict[str, Any] | None, *keys: str) -> float:
    for key in keys:
        if not isinstance(table, dict) or key not in table:
            return float("nan")
        table = table[key]
    return float(table) if table is not None else float("nan")


def peak_for(limits: dict[str, Any] | None, threads: int, width: str = "auto") -> float:
    """Peak GFLOP/s for a thread count and vector width; NaN when not measured.
    "auto" (unresolved: LLVM's default) takes the best width measured."""
    by_width = (limits or {}).get("peak_gflops", {}).get(str(threads), {})
    if width in ("auto", "", None):
        return max((float(v) for v in by_width.values()), default=float("nan"))
    return _nested(by_width, str(width))


# Widths whose 1-thread peaks lie this close count as equal: the wider one is taken (Zen 4
# ran the FMA peak at the same speed at 256 and 512 bits, BRIEF.md; kernels then gain from
# half the instructions).
WIDTH_TIE = 0.03


def fastest_width(limits: dict[str, Any] | None,
                  runnable: tuple[str, ...] | None = None) -> str | None:
    """The explicit vector width ("256", "512") whose measured 1-thread FP32 peak is the
    highest on this host, the wider on a tie (:data:`WIDTH_TIE`); a width LLVM did not
    emit at its bits, or one this CPU cannot run (``runnable``, default
    :func:`convbench.host.vector_widths`), is left out.  None without limits: ``auto``
    then keeps LLVM's default, which on the Intel host meant 256-bit code (it tunes that
    CPU as rocketlake) and 1.27x slower kernels than 512-bit code (issue 15)."""
    peaks = (limits or {}).get("peak_gflops", {}).get("1", {})
    emitted = (limits or {}).get("asm_width", {})
    runnable = host.vector_widths() if runnable is None else runnable
    usable = {w: float(g) for w, g in peaks.items()
              if g is not None and w in runnable and emitted.get(w) in (None, int(w))}
    if not usable:
        return None
    best = max(usable.values())
    return max((w for w, g in usable.items() if g >= best * (1 - WIDTH_TIE)), key=int)


def emitted_bits(limits: dict[str, Any] | None, width: str) -> int | None:
    """Bits of the widest FMA LLVM emitted under ``width``'s flags on this host (the peak
    kernel's static profile); None when unknown (LLVM's default, or never measured)."""
    bits = (limits or {}).get("asm_width", {}).get(width)
    return int(bits) if bits else None


def curve_at(points: list[list[float]], nbytes: float) -> float:
    """GB/s of a bandwidth curve ``[[bytes, GB/s], ...]`` (sizes ascending) at ``nbytes``:
    linear in log(size) between points; the first point's value below it, the last's
    beyond it (a footprint larger than the curve streams from DRAM like its last point).
    NaN for an empty curve or a non-positive size."""
    if not points or not nbytes > 0:
        return float("nan")
    if nbytes <= points[0][0]:
        return float(points[0][1])
    for (s0, g0), (s1, g1) in itertools.pairwise(points):
        if nbytes <= s1:
            f = math.log(nbytes / s0) / math.log(s1 / s0)
            return float(g0 + f * (g1 - g0))
    return float(points[-1][1])


def bandwidth_at(limits: dict[str, Any] | None, nbytes_per_thread: float,
                 threads: int) -> float:
    """Triad GB/s of ``threads`` threads each working on ``nbytes_per_thread``, from the
    stored curve; NaN when the limits have no curve for that thread count."""
    curve = (limits or {}).get("bandwidth_curve", {}).get(str(threads))
    return curve_at(curve or [], nbytes_per_thread)


@dataclass(frozen=True)
class Roof:
    """A kernel's roofline bound: ``gflops`` = min(peak, FLOPs/byte x ``gbs``), ``gbs`` the
    curve's bandwidth at the kernel's footprint per thread, ``level`` the plateau name whose
    bandwidth is nearest to it (``"peak"`` when compute-bound).  NaN / "" without limits."""

    gflops: float
    gbs: float
    level: str


def roofline_for(limits: dict[str, Any] | None, flops: float, nbytes: float, threads: int,
                 width: str = "auto") -> Roof:
    """The roofline bound of ``flops`` over ``nbytes`` compulsory bytes on ``threads``
    threads.  The outermost loop is split between threads, so each works on about
    ``nbytes / threads``: that footprint is looked up on the curve of that thread count."""
    peak = peak_for(limits, threads, width)
    gbs = bandwidth_at(limits, nbytes / max(1, threads), threads)
    if math.isnan(peak) or math.isnan(gbs) or nbytes <= 0 or flops <= 0:
        return Roof(float("nan"), float("nan"), "")
    memory = flops / nbytes * gbs
    if peak <= memory:
        return Roof(peak, gbs, "peak")
    return Roof(memory, gbs, nearest_plateau(limits, gbs, threads))


def nearest_plateau(limits: dict[str, Any] | None, gbs: float, threads: int) -> str:
    """The level ("L1".."DRAM") whose plateau bandwidth is nearest to ``gbs`` (by ratio)."""
    plateaus = {level: bandwidth_for(limits, level, threads)
                for level in (limits or {}).get("bandwidth_gbs", {})}
    plateaus = {k: v for k, v in plateaus.items() if v > 0}
    if not plateaus or not gbs > 0:
        return ""
    return min(plateaus, key=lambda k: abs(math.log(plateaus[k] / gbs)))


def bandwidth_for(limits: dict[str, Any] | None, level: str, threads: int) -> float:
    """Triad GB/s of a level's plateau ("L1", "L2", "L3", "DRAM") at a thread count; NaN if
    unknown.  For the report's roofs; a kernel's bound comes from :func:`bandwidth_at`."""
    return _nested((limits or {}).get("bandwidth_gbs"), level, str(threads))
