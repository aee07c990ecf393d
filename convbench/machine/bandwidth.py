"""Memory bandwidth: STREAM triad over working sets sized to each cache level and DRAM.

Sizes come from sysfs (:func:`convbench.host.caches`).  A working set of half a
level's capacity sits in that level; for a level shared by several cores the half is split
between the threads, and DRAM's is four times the last level (at least 64 MiB).  Bytes
count as STREAM does: two arrays read, one written, no write-allocate traffic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from convbench import host

LEVELS = ("L1", "L2", "L3", "DRAM")
# Used only where sysfs says nothing (some containers, macOS); recorded as assumed.
_FALLBACK = {"L1": (32 << 10, 1), "L2": (1 << 20, 1), "L3": (32 << 20, 0)}
_ITEM = 8  # float64, as STREAM


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
    """Bytes of all three triad arrays together for one thread at ``level``."""
    if level == "DRAM":
        return max(4 * caches["L3"].size_bytes, 64 << 20) // threads
    cache = caches[level]
    private = cache.shared_by == 1
    return cache.size_bytes // 2 // (1 if private else threads)


def measure_triad_gbs(level: str, threads: int, caches: dict[str, Cache],
                      min_seconds: float = 0.05, repeats: int = 5) -> float:
    """Triad GB/s (1e9 bytes) of ``threads`` threads, each on its own rows at ``level``."""
    import numpy as np

    from convbench.machine import kernels
    from convbench.machine.timing import best_seconds

    n = max(64, working_set_bytes(caches, level, threads) // (3 * _ITEM))
    rng = np.random.default_rng(0)
    a = np.zeros((threads, n))
    b, c = rng.random((threads, n)), rng.random((threads, n))
    kernels.set_threads(threads)
    reps, seconds = best_seconds(lambda r: kernels.triad(a, b, c, 0.5, r), min_seconds,
                                 repeats)
    return 3 * _ITEM * n * threads * reps / seconds / 1e9
