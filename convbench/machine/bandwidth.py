"""Memory bandwidth as a curve: STREAM triad GB/s over a geometric series of working sets.

Following LBNL's Empirical Roofline Toolkit, the bandwidth a kernel can get is measured
over working-set sizes rather than read off sysfs cache sizes: on the Intel host sysfs
reported a 480 MiB L3 shared by the socket, a triad sized from it ran at DRAM speed (15.3
GB/s), and depthwise layers placed at that "L3" showed 115-228% of their roofline bound
(BRIEF.md).  So each point is the triad's GB/s with every thread on its own rows of a
given size (bytes of all three arrays per thread); a layer's bound is looked up on the
curve at its own footprint (:func:`convbench.machine.store.bandwidth_at`).

The cache levels (sysfs, :func:`cache_levels`) only name plateaus of the curve: the
``L1``..``DRAM`` figures are the curve read at half of each level's capacity (split between
threads for a shared level) and at its largest size.  Bytes count as STREAM does: two arrays
read, one written, no write-allocate traffic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from convbench import host

LEVELS = ("L1", "L2", "L3", "DRAM")
# Used only where sysfs says nothing (some containers, macOS); recorded as assumed.
_FALLBACK = {"L1": (32 << 10, 1), "L2": (1 << 20, 1), "L3": (32 << 20, 0)}
_ITEM = 8  # float64, as STREAM
SMALLEST = 16 << 10        # below any L1 of these hosts (32-48 KiB)
# The largest point is 4 x the last level (so it streams from DRAM whatever the
# replacement policy), at least 64 MiB, but at most 512 MiB per thread: sysfs's 480 MiB
# "L3" on the Intel host would otherwise ask for 1.9 GiB per thread, and 512 MiB already
# ran at DRAM speed there.
LARGEST_MIN, LARGEST_MAX = 64 << 20, 512 << 20


@dataclass(frozen=True)
class Cache:
    level: str
    size_bytes: int
    shared_by: int       # CPUs sharing one instance (0: unknown, treated as shared)
    from_sysfs: bool


def cache_levels(sysfs: Path = host.CACHE_SYSFS) -> dict[str, Cache]:
    """Data (or unified) caches L1-L3 of CPU 0; missing levels take assumed sizes."""
    found = {f"L{c.level}": Cache(f"L{c.level}", c.size_bytes, c.shared_by, True)
             for c in host.caches(sysfs) if c.kind != "Instruction"}
    for level, (size, shared) in _FALLBACK.items():
        found.setdefault(level, Cache(level, size, shared, False))
    return {k: found[k] for k in ("L1", "L2", "L3")}


def working_set_bytes(caches: dict[str, Cache], level: str, threads: int) -> int:
    """Bytes of all three triad arrays together for one thread at ``level``: where the curve
    is read to name that level's plateau."""
    if level == "DRAM":
        return largest_bytes(caches)
    cache = caches[level]
    private = cache.shared_by == 1
    return cache.size_bytes // 2 // (1 if private else threads)


def largest_bytes(caches: dict[str, Cache]) -> int:
    """The curve's largest working set per thread (see LARGEST_MIN / LARGEST_MAX)."""
    return min(max(4 * caches["L3"].size_bytes, LARGEST_MIN), LARGEST_MAX)


def curve_sizes(largest: int, points_per_octave_pair: int = 3,
                smallest: int = SMALLEST) -> list[int]:
    """Working-set bytes per thread from ``smallest`` to at least ``largest``, a geometric
    series with ``points_per_octave_pair`` steps per factor of 4, rounded to whole cache
    lines (64 bytes)."""
    if points_per_octave_pair < 1 or smallest <= 0 or largest < smallest:
        raise ValueError("curve_sizes: need 1 <= points per octave pair, 0 < smallest <= "
                         "largest")
    steps = math.ceil(points_per_octave_pair * math.log(largest / smallest, 4) - 1e-9)
    sizes = [round(smallest * 4 ** (i / points_per_octave_pair) / 64) * 64
             for i in range(steps + 1)]
    return sorted(set(sizes))


def measure_triad_gbs(bytes_per_thread: int, threads: int, min_seconds: float = 0.05,
                      repeats: int = 5) -> float:
    """Triad GB/s (1e9 bytes) of ``threads`` threads, each on its own rows of
    ``bytes_per_thread`` (three arrays together)."""
    import numpy as np

    from convbench.machine import kernels
    from convbench.machine.timing import best_seconds

    n = max(64, bytes_per_thread // (3 * _ITEM))
    # constants, not random: the triad's speed does not depend on the values, and filling
    # 2 x 512 MiB with a generator took longer than measuring it
    a = np.zeros((threads, n))
    b, c = np.full((threads, n), 0.5), np.full((threads, n), 0.25)
    kernels.set_threads(threads)
    reps, seconds = best_seconds(lambda r: kernels.triad(a, b, c, 0.5, r), min_seconds,
                                 repeats)
    return 3 * _ITEM * n * threads * reps / seconds / 1e9


def measure_curve(sizes: list[int], threads: int, min_seconds: float,
                  repeats: int) -> list[list[float]]:
    """``[[bytes per thread, GB/s], ...]`` for each size at ``threads`` threads."""
    return [[size, measure_triad_gbs(size, threads, min_seconds, repeats)] for size in sizes]


def upper_envelope(points: list[list[float]]) -> list[list[float]]:
    """Each point raised to the best GB/s measured at any larger size.

    A smaller working set can always stream at least as fast as a larger one (it could run
    the larger one's access pattern), so a point below a larger size's figure is a
    co-tenant's dip, not the host: a quick curve on the shared 2-core AMD host had one
    2-thread point at 14.9 GB/s (256 KiB) between 53.5 and 65.4.  A bound must not be
    beaten, so the roofline reads the envelope; the raw points are kept beside it.
    """
    out: list[list[float]] = []
    best = float("-inf")
    for size, gbs in reversed(points):
        best = max(best, gbs)
        out.append([size, best])
    return out[::-1]
