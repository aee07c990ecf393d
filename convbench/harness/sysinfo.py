"""The host a run measured: environment.json (schema.ENVIRONMENT_JSON).

Results from different hosts are expected (BRIEF.md: the machine changes between
sessions), so every run records what could change its figures: CPU model and flags, cores,
kernel, frequency governor, library versions, the numba threading layer and vector-width
settings its workers applied, perf availability, and load plus hypervisor steal before and
after the run.  Anything unreadable is recorded as ``"unknown"``, never guessed.
"""

from __future__ import annotations

import datetime
import os
import platform
import shutil
import socket
from importlib import metadata
from pathlib import Path
from typing import Any

from convbench import host

LIBRARIES = ("numpy", "numba", "llvmlite", "scipy", "pandas", "pyarrow", "pyperf",
             "threadpoolctl", "click")
UNKNOWN = "unknown"


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def cpu_info() -> dict[str, Any]:
    """Model name, flags and nominal MHz of this host's CPU (:mod:`convbench.host`)."""
    cpu = host.detect_cpu()
    return {"cpu_model": host.cpu_model(), "cpu_flags": list(cpu.flags),
            "cpu_mhz_nominal": cpu.mhz_nominal}


def cpu_times() -> dict[str, int]:
    """Aggregate jiffies from /proc/stat: total and steal (hypervisor) time."""
    for line in _read("/proc/stat").splitlines():
        if line.startswith("cpu "):
            ticks = [int(v) for v in line.split()[1:]]
            steal = ticks[7] if len(ticks) > 7 else 0
            return {"total": sum(ticks[:8]), "steal": steal}
    return {"total": 0, "steal": 0}


def load_snapshot() -> dict[str, Any]:
    """Load average and CPU times now; two snapshots give the steal share between them."""
    try:
        load = list(os.getloadavg())
    except OSError:
        load = []
    return {"time": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "loadavg": load, "cpu_times": cpu_times()}


def steal_share(before: dict[str, Any], after: dict[str, Any]) -> float | None:
    """Fraction of CPU time the hypervisor stole between two snapshots."""
    total = after["cpu_times"]["total"] - before["cpu_times"]["total"]
    if total <= 0:
        return None
    return (after["cpu_times"]["steal"] - before["cpu_times"]["steal"]) / total


def _perf() -> dict[str, Any]:
    paranoid = _read("/proc/sys/kernel/perf_event_paranoid").strip()
    return {"perf_binary": shutil.which("perf") or "", "perf_event_paranoid":
            int(paranoid) if paranoid.lstrip("-").isdigit() else None}


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    from convbench import __version__

    versions["convbench"] = __version__
    return versions


def collect(machine: dict[str, Any] | None = None) -> dict[str, Any]:
    """environment.json at the start of a run (``load_before`` included); ``machine``: the
    limits the run divides by (:func:`convbench.machine.first_use.limits_for_run`)."""
    uname = platform.uname()
    return {"host": socket.gethostname(), **cpu_info(), "cores": os.cpu_count(),
            "arch": uname.machine, "kernel": uname.release, "os": uname.system,
            "governor": host.governor() or UNKNOWN, "libraries": _versions(), **_perf(),
            "machine": machine, "load_before": load_snapshot(), "workers": {}}


def finish(environment: dict[str, Any]) -> dict[str, Any]:
    """Add the load after the run and the steal share during it."""
    after = load_snapshot()
    return {**environment, "load_after": after,
            "steal_share": steal_share(environment["load_before"], after)}


def machine(environment: dict[str, Any]) -> dict[str, Any] | None:
    """This host's limits recorded in ``environment["machine"]`` (stored by
    ``convbench machine`` or measured on the run's first use); None when the run had none."""
    return environment.get("machine")
