"""The host a run measured: environment.json (schema.ENVIRONMENT_JSON).

Results from different hosts are expected (BRIEF.md: the machine changes between
sessions), so every run records what could change its figures: CPU model and flags, cores,
kernel, frequency governor, library versions, the numba threading layer and vector-width
settings its workers applied (the CPUs each was pinned to included), perf availability, the
host checks of :mod:`convbench.harness.system` with the busy warning they gave (None when
quiet), and load plus hypervisor steal before and after the run.  Anything unreadable is
recorded as ``"unknown"``, never guessed.
"""

from __future__ import annotations

import datetime
import os
import platform
import shutil
import socket
from collections.abc import Sequence
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


PROC_STAT = "/proc/stat"


def parse_proc_stat(text: str) -> dict[str, dict[str, int]]:
    """Jiffies per ``cpu`` line of /proc/stat: ``"cpu"`` (all CPUs), ``"cpu0"``, ...

    Each has ``total`` (user, nice, system, idle, iowait, irq, softirq, steal: guest time
    is already inside user and nice), ``idle`` (idle + iowait: nothing wanted the CPU) and
    ``steal`` (the hypervisor ran something else on it).  Fields a kernel lacks count 0.
    """
    times = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        fields = rest.split()
        if not name.startswith("cpu") or not fields:
            continue
        ticks = ([int(v) for v in fields[:8]] + [0] * 8)[:8]
        times[name] = {"total": sum(ticks), "idle": ticks[3] + ticks[4], "steal": ticks[7]}
    return times


def read_proc_stat(path: str = PROC_STAT) -> dict[str, dict[str, int]]:
    """:func:`parse_proc_stat` of the file now ({} when unreadable)."""
    return parse_proc_stat(_read(path))


def cpu_times() -> dict[str, int]:
    """Aggregate jiffies from /proc/stat: total, idle and steal (hypervisor) time."""
    return read_proc_stat().get("cpu", {"total": 0, "idle": 0, "steal": 0})


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


def checkout_commit() -> str | None:
    """The git commit of the checkout convbench runs from (the code under test), or None
    (an installed wheel, no git): ``convbench history`` labels runs with it."""
    import subprocess

    try:
        done = subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "rev-parse",
                               "--short=12", "HEAD"], capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None


def collect(machine: dict[str, Any] | None = None, cpus: Sequence[int] = ()
            ) -> dict[str, Any]:
    """environment.json at the start of a run (``load_before`` included): ``machine``, the
    limits the run divides by (:func:`convbench.machine.first_use.limits_for_run`), and the
    host checks of ``convbench system`` (busy window on ``cpus``, the run's CPU pool) with
    the busy warning they gave, if any (the caller prints it)."""
    from convbench.harness import system  # imports this module: not at the top

    uname = platform.uname()
    checks = system.check_all(cpus, window_s=system.RUN_WINDOW_S)
    return {"host": socket.gethostname(), **cpu_info(), "cores": os.cpu_count(),
            "arch": uname.machine, "kernel": uname.release, "os": uname.system,
            "governor": host.governor() or UNKNOWN, "libraries": _versions(), **_perf(),
            "machine": machine, "load_before": load_snapshot(),
            "system": system.to_json(checks), "busy_warning": system.busy_warning(checks),
            "git_commit": checkout_commit(), "workers": {}}


def finish(environment: dict[str, Any]) -> dict[str, Any]:
    """Add the load after the run and the steal share during it."""
    after = load_snapshot()
    return {**environment, "load_after": after,
            "steal_share": steal_share(environment["load_before"], after)}


def machine(environment: dict[str, Any]) -> dict[str, Any] | None:
    """This host's limits recorded in ``environment["machine"]`` (stored by
    ``convbench machine`` or measured on the run's first use); None when the run had none."""
    return environment.get("machine")
