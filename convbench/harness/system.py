"""The state of this host that moves benchmark numbers, each item with a verdict and advice.

``convbench system`` prints these checks, and every run records them in environment.json
(:func:`convbench.harness.sysinfo.collect`) and warns once at start when the machine is busy
(:func:`busy_warning`).  Like ``pyperf system show``: each :class:`Check` has the value
read, a verdict (ok / warning / unknown) and advice.  Anything unreadable is ``unknown``
with the reason, never guessed.

Every reader takes the directory it reads (``proc``, ``cpu_sysfs``), so tests point it at
files holding real contents.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convbench.harness import affinity, sysinfo
from convbench.harness.counters.parse import read_paranoid

OK, WARNING, UNKNOWN = "ok", "warning", "unknown"
VERDICTS = (OK, WARNING, UNKNOWN)
BUSY_ITEM, STEAL_ITEM = "CPU use by others", "hypervisor steal"

PROC = Path("/proc")
CPU_SYSFS = affinity.CPU_SYSFS
THP_SYSFS = Path("/sys/kernel/mm/transparent_hugepage")

# The busy window: `convbench system` samples /proc/stat over COMMAND_WINDOW_S; every run
# over RUN_WINDOW_S before its first worker, so a run is only that much slower.  /proc/stat
# counts in jiffies (USER_HZ = 100 per second and CPU): 0.5 s on 2 CPUs is 100 jiffies, so
# the thresholds below are several jiffies even in the short window.
COMMAND_WINDOW_S = 2.0   # the default of `convbench system --window`
RUN_WINDOW_S = 0.5
# Other work on the CPUs the workers will use, as a share of their time.  An idle host
# shows a few per cent (kernel threads, daemons); one busy process on one of 2 CPUs shows
# 50%.  20% sits well above the first and flags a co-runner taking a fifth of a core, the
# scale of contention behind the 40% swings seen on the Intel host (BRIEF.md).
BUSY_SHARE = 0.20
# Hypervisor steal as a share of the CPUs' time: ~0.03% on a quiet host (BRIEF.md).  5% is
# over 100x that and 5 jiffies in the short window, above the counter's granularity; at 5%
# a timed value loses 1 ms in 20 to another guest.
STEAL_SHARE = 0.05
# The 1-minute load average per online CPU: 0.5 means half the CPUs had a runnable task on
# average over the last minute (our own earlier runs included: it lags by a minute, which is
# why a run's warning uses the window above and not this).
LOAD_PER_CPU = 0.5


@dataclass(frozen=True)
class Check:
    """One item of the host's state: what was read, the verdict and what to do about it."""

    item: str
    value: str
    verdict: str
    advice: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def _read(path: Path) -> tuple[str | None, str]:
    """(stripped contents, "") or (None, why not)."""
    try:
        return path.read_text().strip(), ""
    except FileNotFoundError:
        return None, f"{path} does not exist"
    except OSError as exc:
        return None, f"{path}: {exc.strerror or exc}"


def governor(cpus: Sequence[int], cpu_sysfs: Path = CPU_SYSFS) -> Check:
    """The cpufreq governor of each CPU the workers use."""
    item = "CPU frequency governor"
    found: dict[str, list[int]] = {}
    for cpu in cpus:
        text, why = _read(cpu_sysfs / f"cpu{cpu}/cpufreq/scaling_governor")
        if text is None:
            return Check(item, UNKNOWN, UNKNOWN, f"{why}: no cpufreq (usual in a VM, where "
                         "the hypervisor sets the clock); `convbench machine` measures it")
        found.setdefault(text, []).append(cpu)
    value = "; ".join(f"{g} (CPUs {affinity.format_cpu_list(c)})" for g, c in found.items())
    if set(found) == {"performance"}:
        return Check(item, value, OK)
    return Check(item, value, WARNING, "the clock follows load: `cpupower frequency-set -g "
                 "performance` (pyperf system tune does the same)")


def turbo(cpu_sysfs: Path = CPU_SYSFS) -> Check:
    """Turbo / boost: intel_pstate's no_turbo, or cpufreq's boost (acpi-cpufreq, AMD)."""
    item = "turbo / boost"
    no_turbo, why_intel = _read(cpu_sysfs / "intel_pstate/no_turbo")
    if no_turbo is not None:
        if no_turbo == "1":
            return Check(item, "off (intel_pstate no_turbo=1)", OK)
        return Check(item, "on (intel_pstate no_turbo=0)", WARNING,
                     f"the clock depends on temperature and on the other cores' load: "
                     f"echo 1 > {cpu_sysfs / 'intel_pstate/no_turbo'}")
    boost, why_boost = _read(cpu_sysfs / "cpufreq/boost")
    if boost is not None:
        if boost == "0":
            return Check(item, "off (cpufreq boost=0)", OK)
        return Check(item, f"on (cpufreq boost={boost})", WARNING,
                     f"the clock depends on temperature and on the other cores' load: "
                     f"echo 0 > {cpu_sysfs / 'cpufreq/boost'}")
    return Check(item, UNKNOWN, UNKNOWN, f"{why_intel}; {why_boost}: the hypervisor or "
                 f"firmware decides; compare `convbench machine`'s clock between runs")


ASLR_STATES = {"0": "off", "1": "conservative", "2": "full"}


def aslr(proc: Path = PROC) -> Check:
    item = "ASLR"
    text, why = _read(proc / "sys/kernel/randomize_va_space")
    if text is None:
        return Check(item, UNKNOWN, UNKNOWN, why)
    value = f"{ASLR_STATES.get(text, 'unexpected')} (randomize_va_space={text})"
    if text == "2":
        # pyperf's advice: timings average over address layouts when every worker process
        # gets its own; the simulated counters turn it off per worker (setarch -R).
        return Check(item, value, OK, "each worker gets its own layout; --counters sim "
                     "turns ASLR off for its workers (setarch -R)")
    return Check(item, value, WARNING, "full randomization lets runs average over address "
                 "layouts: echo 2 > /proc/sys/kernel/randomize_va_space")


def transparent_huge_pages(sysfs: Path = THP_SYSFS) -> Check:
    """Whether the own kernels' packed weights can get 2 MiB pages: they ask with
    MADV_HUGEPAGE (convbench/kernels/buffers.py), which ``madvise`` and ``always`` grant."""
    item = "transparent huge pages"
    text, why = _read(sysfs / "enabled")
    if text is None:
        return Check(item, UNKNOWN, UNKNOWN, f"{why}: own kernels' packed weights stay on "
                     "the platform's pages")
    chosen = text[text.index("[") + 1:text.index("]")] if "[" in text and "]" in text else text
    if chosen in ("madvise", "always"):
        return Check(item, chosen, OK, "own kernels' larger packed weights on 2 MiB pages "
                     "(kernels/buffers.py); a library's as it allocates them" + (
                         " (4 KiB pages unless it asks)" if chosen == "madvise" else ""))
    return Check(item, chosen, WARNING, "own kernels' packed weights on 4 KiB pages: "
                 "cold-weights calls walk the page table per 4 KiB of weights; "
                 f"echo madvise > {sysfs / 'enabled'}")


def smt(cpus: Sequence[int], cpu_sysfs: Path = CPU_SYSFS) -> Check:
    """Whether the workers' CPUs share physical cores (SMT / hyper-threading siblings)."""
    item = "SMT siblings"
    cores = set()
    for cpu in cpus:
        text, why = _read(cpu_sysfs / f"cpu{cpu}/topology/thread_siblings_list")
        if text is None:
            return Check(item, UNKNOWN, UNKNOWN, why)
        try:
            cores.add(affinity.parse_cpu_list(text))
        except ValueError as exc:
            return Check(item, UNKNOWN, UNKNOWN, f"{cpu_sysfs}/cpu{cpu}/topology/"
                         f"thread_siblings_list: {exc}")
    shared = sorted(c for c in cores if len(c) > 1)
    if not shared:
        return Check(item, f"none among CPUs {affinity.format_cpu_list(cpus)}", OK,
                     "as far as the kernel sees: a VM's vCPUs may share physical cores unseen")
    value = "; ".join(affinity.format_cpu_list(c) for c in shared) + " share a core"
    return Check(item, value, WARNING, "threads on siblings share one core's units and "
                 "caches: workers take one CPU per core first; --cpus can avoid siblings, "
                 "or echo off > /sys/devices/system/cpu/smt/control")


def isolation(cpu_sysfs: Path = CPU_SYSFS) -> Check:
    """CPUs isolated from the scheduler (isolcpus=) and without timer ticks (nohz_full=)."""
    item = "isolated CPUs"
    isolated, why = _read(cpu_sysfs / "isolated")
    if isolated is None:
        return Check(item, UNKNOWN, UNKNOWN, why)
    nohz, why_nohz = _read(cpu_sysfs / "nohz_full")
    # the file exists only in kernels built with NO_HZ_FULL
    nohz_text = (nohz or "none") if nohz is not None else f"unknown: {why_nohz}"
    value = f"{isolated or 'none'} (nohz_full: {nohz_text})"
    if isolated:
        return Check(item, value, OK, f"run with --cpus {isolated} to measure on them")
    return Check(item, value, WARNING, "other processes may run on the workers' CPUs: boot "
                 "with isolcpus=LIST nohz_full=LIST rcu_nocbs=LIST, then --cpus LIST")


def load_average(proc: Path = PROC) -> Check:
    item = "load average"
    text, why = _read(proc / "loadavg")
    cpus = _cpu_count()
    if text is None:
        return Check(item, UNKNOWN, UNKNOWN, why)
    try:
        one, five, fifteen = (float(v) for v in text.split()[:3])
    except ValueError:
        return Check(item, UNKNOWN, UNKNOWN, f"{proc / 'loadavg'}: unreadable {text!r}")
    value = f"{one:.2f} {five:.2f} {fifteen:.2f} (1, 5, 15 min; {cpus} CPUs)"
    if one > LOAD_PER_CPU * cpus:
        return Check(item, value, WARNING, "other work ran in the last minute (or our own "
                     "earlier run): wait for it, or measure on CPUs it does not use")
    return Check(item, value, OK)


def _cpu_count() -> int:
    return os.cpu_count() or 1


@dataclass(frozen=True)
class Activity:
    """What the CPUs did between two /proc/stat samples."""

    seconds: float
    cpus: str            # the CPUs measured, as a cpulist, or "all" (no per-CPU lines)
    busy_share: float    # non-idle, non-stolen time: other processes and the kernel
    steal_share: float   # time the hypervisor gave to another guest


def activity(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]],
             cpus: Sequence[int], seconds: float) -> Activity | None:
    """The busy and steal shares of ``cpus`` between two :func:`sysinfo.parse_proc_stat`
    samples (all CPUs when a CPU has no line of its own); None when no time passed."""
    names = [f"cpu{c}" for c in cpus]
    label = affinity.format_cpu_list(cpus)
    if not names or not all(n in before and n in after for n in names):
        names, label = ["cpu"], "all"
    if not all(n in before and n in after for n in names):
        return None
    delta = {k: sum(after[n][k] - before[n][k] for n in names)
             for k in ("total", "idle", "steal")}
    if delta["total"] <= 0:
        return None
    return Activity(seconds, label,
                    (delta["total"] - delta["idle"] - delta["steal"]) / delta["total"],
                    delta["steal"] / delta["total"])


def measure_activity(cpus: Sequence[int], seconds: float,
                     proc: Path = PROC) -> Activity | None:
    """Sample /proc/stat ``seconds`` apart while this process sleeps: what the CPUs do
    meanwhile is other work."""
    path = str(proc / "stat")
    before = sysinfo.read_proc_stat(path)
    time.sleep(seconds)
    return activity(before, sysinfo.read_proc_stat(path), cpus, seconds)


def busy_checks(found: Activity | None, proc: Path = PROC) -> list[Check]:
    """The window's other work and steal as two checks."""
    if found is None:
        why = f"{proc / 'stat'} has no usable cpu lines (or no time passed)"
        return [Check(BUSY_ITEM, UNKNOWN, UNKNOWN, why), Check(STEAL_ITEM, UNKNOWN, UNKNOWN, why)]
    where = f"on CPUs {found.cpus} over {found.seconds:g} s"
    busy = Check(BUSY_ITEM, f"{found.busy_share:.0%} {where}", OK)
    if found.busy_share > BUSY_SHARE:
        busy = dataclasses.replace(busy, verdict=WARNING, advice=(
            f"above {BUSY_SHARE:.0%}: other processes compete for the workers' CPUs; "
            "timings will be noisy (ratios to the in-run reference hold up best)"))
    steal = Check(STEAL_ITEM, f"{found.steal_share:.1%} {where}", OK)
    if found.steal_share > STEAL_SHARE:
        steal = dataclasses.replace(steal, verdict=WARNING, advice=(
            f"above {STEAL_SHARE:.0%}: the host gives this VM's CPUs to other guests; "
            "timings include that time"))
    return [busy, steal]


def measure_busy(cpus: Sequence[int], seconds: float = RUN_WINDOW_S) -> list[Check]:
    """The two busy checks of a window measured now on ``cpus``."""
    return busy_checks(measure_activity(cpus, seconds))


def busy_warning(checks: Sequence[Check]) -> str | None:
    """One line for the start of a run when the busy window found other work or steal."""
    hot = [c for c in checks if c.item in (BUSY_ITEM, STEAL_ITEM) and c.verdict == WARNING]
    if not hot:
        return None
    found = "; ".join(f"{c.item} {c.value}" for c in hot)
    return f"machine busy: {found}; timings will be noisy (details: convbench system)"


def perf_paranoid(proc: Path = PROC) -> Check:
    item = "perf_event_paranoid"
    level = read_paranoid(str(proc / "sys/kernel/perf_event_paranoid"))
    if level is None:
        _, why = _read(proc / "sys/kernel/perf_event_paranoid")
        return Check(item, UNKNOWN, UNKNOWN, why or "not an integer")
    if os.geteuid() == 0:
        return Check(item, f"{level} (running as root: not restricted)", OK)
    if level <= 1:
        return Check(item, str(level), OK)
    if level == 2:
        return Check(item, str(level), WARNING, "perf counts user space only: sudo sysctl "
                     "kernel.perf_event_paranoid=1 to count the kernel's share too")
    return Check(item, str(level), WARNING, "perf may not count at all for this user: sudo "
                 "sysctl kernel.perf_event_paranoid=1 (`convbench counters` tells)")


def nmi_watchdog(proc: Path = PROC) -> Check:
    item = "NMI watchdog"
    text, why = _read(proc / "sys/kernel/nmi_watchdog")
    if text is None:
        return Check(item, UNKNOWN, UNKNOWN, why)
    if text == "0":
        return Check(item, "off", OK)
    return Check(item, f"on (nmi_watchdog={text})", WARNING, "it holds a hardware counter "
                 "and interrupts every CPU periodically: echo 0 > /proc/sys/kernel/nmi_watchdog")


def cpu_affinity(cpus: Sequence[int]) -> Check:
    return Check("CPUs for workers", f"{affinity.format_cpu_list(cpus)} of "
                 f"{_cpu_count()} on this host", OK,
                 "a worker with T threads is pinned to T of them (convbench run --cpus)")


# numba's selection among its threading layers (numba/np/ufunc/parallel.py,
# _launch_threads, 0.68): a named layer, a purpose, or the priority order by default.
_PURPOSES = {"safe": ("tbb",), "threadsafe": ("tbb", "omp"),
             "forksafe": ("tbb", "workqueue")}   # Linux: GNU OpenMP is not fork-safe


def numba_layers() -> dict[str, str]:
    """Each numba threading layer: "" when it loads, else why not.  Loading a layer's
    module starts no threads (numba launches them on the first parallel call)."""
    from numba.np.ufunc import parallel

    reasons = {}
    for name in ("tbb", "omp", "workqueue"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the reason is reported instead
                tbb_check = getattr(parallel, "_check_tbb_version_compatible", None)
                if name == "tbb" and tbb_check is not None:
                    tbb_check()
                importlib.import_module(f"numba.np.ufunc.{name}pool" if name != "workqueue"
                                        else "numba.np.ufunc.workqueue")
            reasons[name] = ""
        except ImportError as exc:
            reasons[name] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return reasons


def choose_layer(requested: str, order: Sequence[str],
                 reasons: dict[str, str]) -> tuple[str | None, str]:
    """(the layer numba picks, why the ones it tried first do not load) for a
    ``NUMBA_THREADING_LAYER`` value, the priority ``order`` and :func:`numba_layers`."""
    if requested == "default":
        candidates = tuple(order)
    elif requested in _PURPOSES:
        candidates = _PURPOSES[requested]
    elif requested in reasons:
        candidates = (requested,)
    else:
        return None, f"unknown threading layer {requested!r}"
    chosen = next((c for c in candidates if reasons.get(c) == ""), None)
    tried = candidates if chosen is None else candidates[:candidates.index(chosen)]
    return chosen, "; ".join(f"{n}: {reasons[n]}" for n in tried)


def threading_layer() -> Check:
    """The layer numba will choose in a worker, without running a parallel kernel."""
    item = "numba threading layer"
    try:
        from numba.core import config
    except ImportError as exc:
        return Check(item, UNKNOWN, UNKNOWN, f"numba does not import: {exc}")
    requested = str(config.THREADING_LAYER).lower()
    order = tuple(config.THREADING_LAYER_PRIORITY)
    chosen, missing = choose_layer(requested, order, numba_layers())
    how = f"NUMBA_THREADING_LAYER={requested}" + (
        f", order {','.join(order)}" if requested == "default" else "")
    if chosen is None:
        return Check(item, f"none ({how})", WARNING, f"parallel kernels cannot run: {missing}")
    return Check(item, f"{chosen} ({how})", OK, f"not loadable: {missing}" if missing else "")


def check_all(cpus: Sequence[int] | None = None, window_s: float = COMMAND_WINDOW_S,
              proc: Path = PROC, cpu_sysfs: Path = CPU_SYSFS) -> list[Check]:
    """Every check, the busy window measured on ``cpus`` (default: this process's CPUs)."""
    cpus = tuple(cpus) if cpus else affinity.allowed_cpus()
    return [cpu_affinity(cpus), governor(cpus, cpu_sysfs), turbo(cpu_sysfs), aslr(proc),
            transparent_huge_pages(), smt(cpus, cpu_sysfs), isolation(cpu_sysfs),
            load_average(proc),
            *busy_checks(measure_activity(cpus, window_s, proc), proc),
            perf_paranoid(proc), nmi_watchdog(proc), threading_layer()]


def to_json(checks: Sequence[Check]) -> list[dict[str, Any]]:
    return [c.to_json() for c in checks]


def format_checks(checks: Sequence[Check]) -> str:
    """The checks as a terminal table, the advice below it (too long for a column)."""
    from convbench.textable import format_table

    table = format_table([("item", "verdict", "value")] +
                         [(c.item, c.verdict, c.value) for c in checks])
    advice = [f"  {c.item}: {c.advice}" for c in checks if c.advice]
    return "\n".join([table, "", "advice:", *advice] if advice else [table])
