"""Cold caches: what a timed call starts from in the ``cold-weights`` and ``cold`` modes.

A real inference streams every layer's weights through the caches once per image (about
90 MiB of conv weights for ResNet-50), while a tight timing loop keeps them in L2/L3: cold
weights cost 1.1-2x on layers with 1-8 MiB of weights (BRIEF.md).  benchdnn has
``--cold-cache``, XNNPACK's benchmarks rotate buffers, TVM flushes the caches.

Here, before every timed call, an :class:`Evictor` streams a *pile* through every cache
level: a pre-touched float32 buffer of twice the last-level cache plus the private caches
of every thread, read by as many threads as the kernel uses (each core's private L1/L2 is
only evicted by a thread running on that core).  The pile's size comes from the host's
sysfs cache sizes; ``--cold-bytes`` overrides it for hosts whose sysfs is wrong.  Then:

- ``cold``: the call starts with nothing of its own in cache: weights (in the kernel's own
  packed format), input, output and the kernel's workspace all stream in.
- ``cold-weights``: after the pile the case's *twin* -- the same kernel built on its own copy
  of the weights (:meth:`Evictor.before_twin`) -- runs on the call's input into the call's
  output, so the input is warm as when the previous layer just produced it, the output as
  warm as the buffer a pass hands it (the one its previous layer read), and so are the
  runtime's code and thread pool; the packed weights and the kernel's workspace start as
  cold as a pass leaves them.  (Before the twin, the input was read back on one thread,
  and each call also paid its runtime's restart: :meth:`Evictor.before_twin`.)  For a
  suite that names a network the pile is that network's conv weights (what one pass
  streams between two runs of a layer), when smaller than the full pile: MobileNet V1's
  12.2 MiB stay partly in a 32 MiB L3 from one image to the next, and a full eviction made
  every layer pay for weights a pass finds cached.  Zen 4 host, 1 thread, MobileNet V1's
  plan: its network pass ran at 1.09 / 1.11 (warm / cold pass) of the sum of its
  warm-tuned costs and at 1.00 / 0.99 of its cold-weights-tuned costs with this pile
  (in-process, each conv's time after a pile of 4-24 MiB: 12 MiB came within 0.5% of its
  time inside the pass, 24 MiB 3% over, the full 64 MiB 9% over).

Cold modes time single calls (no inner loop): a value is one call, so the clock's
resolution matters for microsecond layers; ``timer.timer_resolution`` measures it and the
results record it per row.

What a single call after a break also carries, measured on the AMD EPYC Zen 3 host (2
vCPUs, 1 thread, MobileNet V2's block_1_depthwise, 0.47 ms in a warm loop): the first
calls after ~20 ms away from the layer's buffers ran 1.1-1.7 ms, and it took ~5 calls to
come back, whether the 20 ms were this pile, a sleep, a Python or FMA-only spin, or the same
kernel on other buffers -- and re-reading the input and re-writing the output right before
(``cold-weights``) did not help; 20 ms of the same kernel on the same buffers did.  No
page faults (getrusage), and not the clock (an FMA spin right before did not help).  So
on such a host a cold-mode value of a sub-millisecond layer holds this restart cost too,
and a network pass, whose ops run back to back, ran 0.70x the sum of MobileNet V2's
cold-weights layer times at 2 threads.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numba
import numpy as np

from convbench.host import caches
from convbench.spec.suite import CACHE_MODES

WARM, COLD_WEIGHTS, COLD = CACHE_MODES
FALLBACK_LLC_BYTES = 64 << 20   # no sysfs: assume a large last-level cache


def pile_bytes(threads: int, override: int | None = None, pass_bytes: int | None = None,
               mode: str = COLD_WEIGHTS) -> int:
    """Bytes to stream before a call in cache ``mode``: ``override`` if given, else, in
    cold-weights, ``pass_bytes`` (a network's weights per pass) where smaller than what
    leaves no level anything: 2 x (LLC + private caches of ``threads`` cores), levels the
    host shares once, private ones per thread.  ``cold`` always streams the full pile."""
    if override:
        return int(override)
    full = _full_pile(threads)
    return min(full, int(pass_bytes)) if pass_bytes and mode == COLD_WEIGHTS else full


def _full_pile(threads: int) -> int:
    unified = [c for c in caches() if c.kind in ("Unified", "Data")]
    if not unified:
        return 2 * FALLBACK_LLC_BYTES
    top = max(c.level for c in unified)
    llc = max(c.size_bytes for c in unified if c.level == top)
    private = sum(c.size_bytes for c in unified if c.level < top)
    return 2 * (llc + threads * private)


def _sum(pile):  # pragma: no cover - jitted below (the parallel eviction)
    total = np.float32(0.0)
    for i in numba.prange(pile.size):
        total += pile[i]
    return total


_stream = numba.njit(parallel=True, cache=True)(_sum)


def _stream_serial(pile: np.ndarray) -> float:
    """One thread reads the pile.  For callgrind: one simulated cache hierarchy serves
    every thread, so one thread evicts it all, while a parallel region would leave the
    other thread's wind-down (going to sleep) inside the next counted region (+9k
    instructions on a small depthwise call); numpy, because a numba kernel would be
    compiled under valgrind (numba sees valgrind's CPU there and misses its cache)."""
    return float(np.add.reduce(pile, axis=None))


class Evictor:
    """Brings the caches to a cache mode's starting state before a timed call."""

    def __init__(self, mode: str, threads: int, override: int | None = None,
                 parallel: bool = True, pass_bytes: int | None = None):
        """``pass_bytes``: the suite's network's conv weights per pass (None: no network);
        they size the cold-weights pile (module docstring), never the cold one."""
        if mode not in (COLD_WEIGHTS, COLD):
            raise ValueError(f"no eviction in cache mode {mode!r}")
        self.mode = mode
        self.nbytes = pile_bytes(threads, override, pass_bytes, mode)
        # np.ones writes every page now: no page fault lands in a timed call later
        self.pile = np.ones(self.nbytes // 4, np.float32)
        self.stream = _stream if parallel else _stream_serial
        # compile (or load from numba's cache) the parallel kernel now, outside any timed
        # or counted region
        self.sink = float(self.stream(self.pile[:64]))

    def evict(self) -> None:
        self.sink += self.stream(self.pile)

    def before(self, x: np.ndarray, y: np.ndarray) -> None:
        """``cold``: evict, nothing of the call's brought back (a timer ``before`` hook;
        cold-weights takes :meth:`before_twin`)."""
        self.evict()

    def before_twin(self, twin: Callable[[np.ndarray, np.ndarray], None]
                    ) -> Callable[[np.ndarray, np.ndarray], None]:
        """cold-weights for a conv: evict, then run ``twin`` -- the same kernel built on its
        own copy of the weights -- from the call's input into the call's output.  It brings
        back what a pass keeps warm besides the layer's weights and workspace: the input,
        where the kernel's threads put it; the output buffer; the runtime's code and state;
        its thread pool, awake.  Reading the input back on one thread left the rest cold,
        and each runtime paid its own restart on top of the weights: MobileNet V1's
        conv_dw_12 (18 KiB of weights, 10-20 us warm) took 75-91 us ours and 197-224 us in
        ONNX Runtime at 2 threads (Zen 4 host), so cold-weights ratios of small layers
        measured dispatch, and the 2-thread plans' cold-weights costs over-predicted their
        pass by 30%.

        The output: a pass shares storage between tensors whose lives do not overlap
        (:func:`convbench.network.executor.plan_storage`), so along a chain a layer writes
        the buffer its previous layer read, in cache as far as it fits.  The twin used to
        write a spare output of its own, leaving the call's output cold (when every tensor
        had a buffer of its own, last touched a pass ago: with the twin writing the call's
        output then, VGG-16's 2-thread all-NHWC pass ran 1.29 / 1.16 of its prediction on
        the Zen 3 host, with a spare 1.08 / 1.04).  A cold output charged wide register
        tiles for their store misses, which the pass does not pay: MobileNet V2's
        block_7_depthwise (14 x 14 x 384, Zen 5 host, 1 thread, one process, medians)
        NCHW32c 2 x 4 ran 14.2 us warm, 23.9 with the output cold, 14.5 with it warm, and
        1 x 1 23.7 / 24.8 / 23.8; tuned with the spare, the plan ran ten depthwise layers in
        1 x 1 or 1 x 2 tiles, and with the tiles the warm ranking picks, swapped in by hand,
        the pass ran 3.533 ms instead of 3.658 (ONNX Runtime 3.838), its depthwise convs
        1.43x ONNX Runtime's inside the pass instead of 1.04x.

        At 2 threads a library's cold-weights time holds thread-pool handoffs ours does not.
        The eviction runs on numba's pool, which is our kernels' own; a library's pool wakes
        after it, on cores numba's threads may still spin on (their spin was not measured
        apart), and, for ONNX Runtime sessions and XNNPACK (LiteRT) interpreters, which each
        own their pool, the twin wakes its own and leaves the timed instance's asleep (ORT:
        two Conv nodes in one session both run whichever output is bound, so the twin cannot
        live in the timed session).  Zen 5 host, cold-weights over warm median time, the
        median over a network's layers: at 2 threads on MobileNet V1 / V2 (10-300 us a
        layer) ORT 2.1-3.0, XNNPACK 1.6-2.4, oneDNN 1.5-1.6, PyTorch 1.45-1.6, ours 1.2-1.4
        (conv_dw_12: ORT's NCHW16c kernel 5.3 us warm, 38-110 us cold-weights; ours 5.6 and
        10-12); at 1 thread (MobileNet V1) 1.4-1.8 for all; on VGG-16 (milliseconds a layer)
        0.97-1.12 for all at 1 and 2 threads.  So at 2 threads a small layer's cold-weights
        ratio overstates our lead, and the run summary and the report mark such ratios
        ("!"); a network pass (one runtime for the whole graph) is the fair cold comparison
        there: ``convbench run --network PLAN`` times ONNX Runtime's whole graph in one
        session beside the plan, and with ``--profile`` compares them conv by conv inside
        the passes (:func:`convbench.harness.network_run.library_in_pass`)."""
        def before(x: np.ndarray, y: np.ndarray) -> None:
            self.evict()
            twin(x, y)
        return before

    def seconds_per_eviction(self, rounds: int = 3) -> float:
        """Measured cost of one eviction (for estimates; not part of any timed value)."""
        t0 = time.perf_counter()
        for _ in range(rounds):
            self.evict()
        return (time.perf_counter() - t0) / rounds

