"""Which CPUs a worker runs on: CPU lists, the pool a run may use, and pinning.

A run has a *pool* of CPUs: ``convbench run --cpus LIST`` or, by default, the CPUs this
process may use (``os.sched_getaffinity(0)``).  A worker with T threads is pinned to T CPUs
of the pool, one per physical core before any SMT sibling, so each thread has a core of its
own and the OS does not migrate a 1-thread worker between cores mid-measurement.  The worker
pins itself (:func:`pin`) before numba's or OpenBLAS's thread pools start: threads inherit
their creator's affinity.

CPU lists use the Linux cpulist syntax of sysfs and ``taskset -c`` (``0-3,8,10-11``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from convbench.errors import ConvbenchError

CPU_SYSFS = Path("/sys/devices/system/cpu")


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """The sorted CPUs of a cpulist (``"0-2,5"`` -> (0, 1, 2, 5)); ``""`` -> ().

    Raises ValueError on anything else (callers name the option or file in their message).
    """
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        low, sep, high = part.partition("-")
        if not low.isdigit() or (sep and not high.isdigit()):
            raise ValueError(f"not a CPU list: {text.strip()!r}")
        first, last = int(low), int(high) if sep else int(low)
        if last < first:
            raise ValueError(f"descending range {part!r}")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def format_cpu_list(cpus: Iterable[int]) -> str:
    """The compact cpulist of ``cpus`` ((0, 1, 2, 5) -> ``"0-2,5"``)."""
    ranges: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def allowed_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on."""
    return tuple(sorted(os.sched_getaffinity(0)))


def isolated_cpus(sysfs: Path = CPU_SYSFS) -> tuple[int, ...]:
    """CPUs the kernel isolated (``isolcpus=``); () when none or unreadable."""
    try:
        return parse_cpu_list((sysfs / "isolated").read_text())
    except (OSError, ValueError):
        return ()


def core_of(cpu: int, sysfs: Path = CPU_SYSFS) -> tuple[int, ...]:
    """The CPUs sharing ``cpu``'s physical core (its SMT siblings, itself included);
    ``(cpu,)`` when sysfs does not say, so an unknown topology counts one core per CPU."""
    try:
        return parse_cpu_list((sysfs / f"cpu{cpu}/topology/thread_siblings_list").read_text())
    except (OSError, ValueError):
        return (cpu,)


def one_per_core_first(cpus: Sequence[int], sysfs: Path = CPU_SYSFS) -> tuple[int, ...]:
    """``cpus`` ordered so the first of each physical core come before any sibling."""
    seen: set[tuple[int, ...]] = set()
    first, later = [], []
    for cpu in sorted(cpus):
        core = core_of(cpu, sysfs)
        (later if core in seen else first).append(cpu)
        seen.add(core)
    return tuple(first + later)


def resolve_pool(requested: Sequence[int] = ()) -> tuple[int, ...]:
    """The CPUs a run's workers may be pinned to: ``requested`` (--cpus), checked, or the
    CPUs this process may use.

    Isolated CPUs (``isolcpus=``) are accepted although they are outside this process's
    default affinity: keeping everything else off them is the point of isolating them.
    """
    allowed = allowed_cpus()
    if not requested:
        return allowed
    usable = set(allowed) | set(isolated_cpus())
    outside = [c for c in requested if c not in usable]
    if outside:
        raise ConvbenchError(f"--cpus: expected CPUs this process may use "
                             f"({format_cpu_list(usable)}), got {format_cpu_list(outside)}")
    return tuple(sorted(set(requested)))


def check_pool(pool: Sequence[int], threads: Iterable[int]) -> None:
    """--cpus must give every thread count of the plan a CPU per thread."""
    most = max(threads, default=1)
    if most > len(pool):
        raise ConvbenchError(f"--cpus: expected at least {most} CPUs for {most} threads, "
                             f"got {len(pool)} ({format_cpu_list(pool)})")


def cpus_for(pool: Sequence[int], threads: int, sysfs: Path = CPU_SYSFS) -> tuple[int, ...]:
    """The CPUs a worker with ``threads`` threads is pinned to: one per thread, distinct
    physical cores first."""
    return tuple(sorted(one_per_core_first(pool, sysfs)[:threads]))


def pin(cpus: Sequence[int]) -> tuple[int, ...]:
    """Pin this process to ``cpus`` and return the affinity the kernel actually set."""
    os.sched_setaffinity(0, cpus)
    return allowed_cpus()
