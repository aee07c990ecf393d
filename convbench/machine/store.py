"""Where machine limits live: one JSON file per host under the user cache directory.

``~/.cache/convbench/machine/<host-key>.json`` (``$XDG_CACHE_HOME`` honoured; the directory
can be moved with ``$CONVBENCH_MACHINE_DIR``).  The host key joins the host name and a hash
of the CPU model, CPU count and cache sizes, because the same host name has been seen on
different CPUs between sessions (BRIEF.md).

The JSON object (``FORMAT_VERSION`` 1)::

    format_version   1
    host             {"hostname", "cpu_model", "cpus", "key"}
    measured         UTC ISO time
    quick            true when measured with --quick (shorter, noisier)
    clock_ghz        measured core clock under load
    peak_gflops      {threads: {width: GFLOP/s}}  threads "1", "2", ...; width "256", "512"
    bandwidth_gbs    {level: {threads: GB/s}}     level "L1", "L2", "L3", "DRAM"
    working_set_bytes {level: {threads: bytes per thread}}
    caches           {level: {"size_bytes", "shared_by", "from_sysfs"}}
    asm_width        {width: bits of the FMAs LLVM emitted for that width}
    notes            [why a figure is missing, ...]

All keys of the nested maps are strings (JSON).  :func:`peak_for` and :func:`bandwidth_for`
look figures up by int thread count and width ("auto" = the best width measured).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
from pathlib import Path
from typing import Any

from convbench import host

FORMAT_VERSION = 1


def default_dir() -> Path:
    if os.environ.get("CONVBENCH_MACHINE_DIR"):
        return Path(os.environ["CONVBENCH_MACHINE_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "convbench" / "machine"


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


def _nested(table: dict[str, Any] | None, *keys: str) -> float:
    for key in keys:
        if not isinstance(table, dict) or key not in table:
            return float("nan")
        table = table[key]
    return float(table) if table is not None else float("nan")


def peak_for(limits: dict[str, Any] | None, threads: int, width: str = "auto") -> float:
    """Peak GFLOP/s for a thread count and vector width; NaN when not measured.
    "auto" (numba's default choice) takes the best width measured."""
    by_width = (limits or {}).get("peak_gflops", {}).get(str(threads), {})
    if width in ("auto", "", None):
        return max((float(v) for v in by_width.values()), default=float("nan"))
    return _nested(by_width, str(width))


def roofline_for(limits: dict[str, Any] | None, flops: float, nbytes: float, threads: int,
                 width: str = "auto") -> tuple[float, str]:
    """Attainable GFLOP/s of a kernel with ``flops`` over ``nbytes`` compulsory bytes, and
    the memory level whose bandwidth bounds it: min(peak, flops/byte x triad GB/s of the
    smallest level that holds the bytes for ``threads`` threads; private caches add up).
    (NaN, "") when the limits lack the figures."""
    peak = peak_for(limits, threads, width)
    caches = (limits or {}).get("caches", {})
    level = "DRAM"
    for name in ("L1", "L2", "L3"):
        cache = caches.get(name)
        if cache and nbytes <= cache["size_bytes"] * (threads if cache["shared_by"] == 1 else 1):
            level = name
            break
    bandwidth = bandwidth_for(limits, level, threads)
    if math.isnan(peak) or math.isnan(bandwidth) or nbytes <= 0:
        return float("nan"), ""
    return min(peak, flops / nbytes * bandwidth), level


def bandwidth_for(limits: dict[str, Any] | None, level: str, threads: int) -> float:
    """Triad GB/s at a level ("L1", "L2", "L3", "DRAM") and thread count; NaN if unknown."""
    return _nested((limits or {}).get("bandwidth_gbs"), level, str(threads))
