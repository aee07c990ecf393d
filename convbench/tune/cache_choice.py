"""Which cache mode a suite's layers are tuned in when ``convbench tune --cache auto``.

A plan adds up tuned layer times, so they must be timed in the cache state a network pass
gives each layer: its input just written by the op before it, its runtime's code and
thread pool busy, its weights as cold as the rest of one pass leaves them.  ``cold-weights``
is that state (:mod:`convbench.harness.coldcache`): in a suite that names a network the
pile before each call is that network's conv weights per pass (capped at a full
eviction), and the case's twin -- the kernel built on its own copy of the weights -- then
runs on the call's input, into a spare output (a pass's output buffer is cold too).  So
``auto`` is ``cold-weights`` at every thread count, for every suite (one that names no
network gets a full eviction: its layers never run as one pass).

How the choice got here (measured / predicted pass time, warm pass / cold pass):

- AMD EPYC Zen 3 host, with a full eviction and the input read back on one thread: MobileNet
  V2 (8.4 MiB of conv weights) at 2 threads 0.70 / 0.70 from a cold-weights tune, 0.98 /
  1.03 from a warm one; ResNet-50 (89 MiB) at 1 thread 0.91 / 0.96 cold-weights, 1.16 /
  1.18 warm.  ``auto`` then chose warm where the weights fit in what the caches serve.
- AMD EPYC Zen 4 host, with the network's weights as the pile: MobileNet V1 (12.2 MiB) at 1
  thread 0.86-1.00 cold-weights (three passes), 1.09 / 1.11 warm; MobileNet V2 at 1 thread
  0.87-0.94 cold-weights, 1.10-1.38 warm.  At 2 threads MobileNet V1 ran at 0.70 / 0.71 of
  its cold-weights costs -- each single call, and above all each glue op's, paid its thread
  pool's and runtime's restart -- and 1.24-1.32 of its warm ones; with the twin, **1.02 /
  1.03** of its cold-weights costs.
"""

from __future__ import annotations

from dataclasses import dataclass

from convbench.spec.suite import CACHE_MODES, Suite

_WARM, COLD_WEIGHTS, _COLD = CACHE_MODES
AUTO = "auto"


@dataclass(frozen=True)
class CacheChoice:
    """The mode chosen for one thread count, and the one line saying why."""

    threads: int
    mode: str
    reason: str


def _mib(nbytes: float) -> str:
    return f"{nbytes / (1 << 20):.1f} MiB"


def choose(suite: Suite, threads: int) -> CacheChoice:
    """The cache mode to tune ``suite``'s layers in at ``threads`` threads."""
    weights = suite.pass_weight_bytes
    if weights is None:
        return CacheChoice(threads, COLD_WEIGHTS,
                           f"{suite.name} names no network, so no pass keeps its weights "
                           "cached: each layer is timed with cold weights (a full eviction)")
    return CacheChoice(threads, COLD_WEIGHTS,
                       f"as a pass of {suite.name} leaves each layer: its conv weights per "
                       f"pass ({_mib(weights)}, capped at a full eviction) streamed before "
                       "each call, the layer's twin run on its input and output")
