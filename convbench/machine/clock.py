"""The core clock under load, measured: a chain of dependent one-cycle integer operations.

/proc/cpuinfo shows the nominal rate (2.6-2.7 GHz on these hosts) while cores run at
3.5-3.65 GHz under load (BRIEF.md), so the rate is timed, not read.
"""

from __future__ import annotations


def measure_clock_ghz(min_seconds: float = 0.1, repeats: int = 5) -> float:
    """Cycles per second of one core, from :func:`kernels.add_chain` (two cycles per step)."""
    from convbench.machine import kernels
    from convbench.machine.timing import best_seconds

    n, seconds = best_seconds(lambda n: kernels.add_chain(n, 3, 5), min_seconds, repeats,
                              start=1 << 16)
    return kernels.ADD_CHAIN_CYCLES * n / seconds / 1e9
