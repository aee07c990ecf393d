"""Which cache mode a suite's layers are tuned in when ``convbench tune --cache auto``.

A plan adds up tuned layer times, so they must be timed in the cache state a network pass
gives each layer.  What decides that state is whether the network's conv weights stay in
the caches from one pass to the next.  Measured on the AMD EPYC Zen 3 host (32 MiB L3):

- MobileNet V2, 8.4 MiB of conv weights, 2 threads: the plan of a warm tune predicted its
  pass at 0.98 (warm pass) / 1.03 (cold pass) of the measured time; the plan of a
  cold-weights tune at 0.70.
- ResNet-50, 89 MiB, 1 thread: cold-weights tune 0.91 / 0.96; warm tune 1.16 / 1.18, and
  its plan ran 14% slower than the cold-weights tune's.

At 1 thread, once the cold-weights pile of a network became its conv weights per pass
(:mod:`convbench.harness.coldcache`), cold-weights costs predicted the pass best whether or
not the weights fit (AMD EPYC Zen 4 host, 32 MiB L3, measured / predicted, warm pass / cold
pass): MobileNet V1 (12.2 MiB) 1.00 / 0.99 from a cold-weights tune, 1.09 / 1.11 from a
warm one; MobileNet V2 (8.4 MiB) 0.87-0.94 cold-weights (three passes), 1.10-1.38 warm
(four, the host's speed moving 25% between them).  At 2 threads a single call after the
pile also pays the second thread's restart, which back-to-back ops in a pass do not:
MobileNet V1's plan ran at 0.70 / 0.71 of its cold-weights costs and 1.24-1.32 of its warm
ones on the Zen 4 host, MobileNet V2's at 0.98 / 1.03 of its warm ones on the Zen 3 host.

So ``auto`` tunes a network cold-weights at 1 thread; at more threads warm when the
network's conv weights (every occurrence, float32) fit in what the caches serve,
cold-weights when they do not; and cold-weights for a suite that is no network (its layers
never run as one pass).  What the caches serve is read off the
machine's measured bandwidth curve (:mod:`convbench.machine.bandwidth`), not sysfs: the
Intel host's sysfs names a 480 MiB L3 that a triad finds at DRAM speed.  It is the largest
working set whose triad bandwidth is at least :data:`CACHED_OVER_DRAM` times the curve's
DRAM end, per thread times the threads (Zen 3: 16 MiB at 1 thread, 20 MiB at 2).  With no
curve for the thread count (measuring switched off) the choice is cold-weights, said so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from convbench.spec.suite import CACHE_MODES, Suite

WARM, COLD_WEIGHTS, _COLD = CACHE_MODES
AUTO = "auto"
# A working set served at twice the DRAM end's bandwidth or more is served by a cache (Zen 3,
# 1 thread: 43.7 GB/s at 16 MiB, 26.1 at 25 MiB, 15.5 at the DRAM end).
CACHED_OVER_DRAM = 2.0


@dataclass(frozen=True)
class CacheChoice:
    """The mode chosen for one thread count, and the one line saying why."""

    threads: int
    mode: str
    reason: str


def cached_bytes(curve: Sequence[Sequence[float]], threads: int) -> int | None:
    """Bytes the caches serve to ``threads`` threads, from a stored bandwidth curve (pairs of
    bytes per thread and GB/s, smallest first, each raised to the best of the larger ones):
    the largest working set at :data:`CACHED_OVER_DRAM` x the last point's GB/s or more.
    None for a curve too short to have a DRAM end."""
    if len(curve) < 2:
        return None
    dram = float(curve[-1][1])
    served = [float(size) for size, gbs in curve[:-1] if float(gbs) >= CACHED_OVER_DRAM * dram]
    return int(max(served, default=0.0)) * threads


def _mib(nbytes: float) -> str:
    return f"{nbytes / (1 << 20):.1f} MiB"


def choose(suite: Suite, threads: int, limits: Mapping[str, Any] | None) -> CacheChoice:
    """The cache mode to tune ``suite``'s layers in at ``threads`` threads."""
    if suite.graph is None and not suite.network:
        return CacheChoice(threads, COLD_WEIGHTS,
                           f"{suite.name} names no network, so no pass keeps its weights "
                           "cached: each layer is timed with cold weights")
    weights = suite.pass_weight_bytes or 0
    if threads == 1:
        return CacheChoice(threads, COLD_WEIGHTS,
                           f"one thread: {suite.name}'s layers are timed with cold weights, "
                           f"the pile being its conv weights per pass ({_mib(weights)}, capped "
                           "at a full eviction), as one pass leaves them")
    curve = ((limits or {}).get("bandwidth_curve") or {}).get(str(threads)) or []
    served = cached_bytes(curve, threads)
    if served is None:
        return CacheChoice(threads, COLD_WEIGHTS,
                           f"no measured bandwidth curve at {threads} thread(s) (`convbench "
                           f"machine` measures one): {suite.name}'s conv weights ({_mib(weights)}) "
                           "assumed to stream from memory, tuned with cold weights")
    if weights <= served:
        return CacheChoice(threads, WARM,
                           f"{suite.name}'s conv weights ({_mib(weights)}) fit in the "
                           f"{_mib(served)} the caches serve at {threads} thread(s): a pass "
                           "finds them cached, tuned warm")
    return CacheChoice(threads, COLD_WEIGHTS,
                       f"{suite.name}'s conv weights ({_mib(weights)}) exceed the {_mib(served)} "
                       f"the caches serve at {threads} thread(s): a pass streams them from "
                       "memory, tuned with cold weights")
