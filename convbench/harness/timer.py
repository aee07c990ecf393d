"""Timing inside a worker: calibrated inner loops and round-robin rounds with a reference.

A *value* is the mean time of one call over ``loops`` back-to-back calls, with ``loops``
calibrated so that a value lasts at least ``min_time`` (the clock's resolution and the
loop's own cost then vanish).  Variants of one layer are timed in *rounds*: each round
times the in-run reference kernel and then every variant once, starting at a different
variant each round in a seeded random order, so slow drifts of the machine (BRIEF.md: 40%
swings lasting seconds) hit every variant alike and cancel in the ratio to the reference.

Imports numba: only the worker imports this module, after setting the vector width.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numba
import numpy as np

Call = Callable[[], None]

MAX_LOOPS = 10**7
REFERENCE_N = 256  # the reference sgemm is N x N times N x N, float32


@numba.njit(parallel=True, cache=True)
def _touch_threads(a):  # pragma: no cover - jitted
    for i in numba.prange(a.size):
        a[i] += 1.0


def start_parallel_runtime() -> float:
    """Start numba's thread pool (~0.35 s the first time a parallel kernel runs) so that the
    first variant's compile time does not carry it; returns the seconds it took."""
    t0 = time.perf_counter()
    _touch_threads(np.zeros(64))
    return time.perf_counter() - t0


def time_calls(call: Call, loops: int, args: tuple = ()) -> float:
    """Seconds per call of ``call(*args)`` over ``loops`` consecutive calls.

    A kernel's ``run(x, y)`` is called directly (no wrapper): the loop then costs what
    timeit's does, about 30 ns per call less than calling through a closure.
    """
    clock = time.perf_counter
    if len(args) == 2:
        x, y = args
        t0 = clock()
        for _ in range(loops):
            call(x, y)
        return (clock() - t0) / loops
    t0 = clock()
    for _ in range(loops):
        call(*args)
    return (clock() - t0) / loops


def calibrate(call: Call, min_time: float, args: tuple = ()) -> int:
    """Smallest loop count (growing geometrically) whose value lasts at least ``min_time``."""
    loops = 1
    while loops < MAX_LOOPS:
        elapsed = time_calls(call, loops, args) * loops
        if elapsed >= min_time:
            # one interrupted value must not decide the count: under the test suite's two
            # workers a 17x6x6 relu's single call once lasted the 0.2 ms min_time, and all
            # its values were single calls.  The count stands if a second value lasts too.
            elapsed = min(elapsed, time_calls(call, loops, args) * loops)
            if elapsed >= min_time:
                return loops
        # jump close to the target, at most 100x at a time (the first calls may be odd)
        grow = 100.0 if elapsed <= 0 else min(100.0, 1.2 * min_time / elapsed)
        loops = min(MAX_LOOPS, max(loops * 2, math.ceil(loops * grow)))
    return loops


class ReferenceKernel:
    """A fixed-size float32 sgemm through numpy's BLAS: the in-run yardstick."""

    name = f"sgemm{REFERENCE_N}"

    def __init__(self, n: int = REFERENCE_N, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.a = rng.standard_normal((n, n), dtype=np.float32)
        self.b = rng.standard_normal((n, n), dtype=np.float32)
        self.c = np.empty((n, n), np.float32)
        self.flops = 2 * n**3

    def __call__(self) -> None:
        np.matmul(self.a, self.b, out=self.c)


@dataclass
class Entry:
    """One timed participant of the rounds.

    With ``before`` (cold cache modes) a value is one call, and ``before(*args)`` runs
    untimed right before it (the eviction); ``loops`` is then 1.
    """

    key: str
    call: Call
    loops: int
    args: tuple = ()
    values: list[float] = field(default_factory=list)
    before: Callable[..., None] | None = None

    def value(self) -> float:
        """One value: seconds per call."""
        if self.before is not None:
            self.before(*self.args)
        return time_calls(self.call, self.loops, self.args)


def run_rounds(entries: list[Entry], reference: Entry, rounds: int,
               on_enter: Callable[[str | None], None] = lambda key: None,
               order: np.random.Generator | None = None) -> None:
    """Append one value per round to every entry and to ``reference``.

    Each round times the reference first, then the entries in an order drawn from
    ``order`` (a seeded generator; None: rotate by one per round).  Rotation alone kept
    every variant right behind the same predecessor, so one library's leftover spinning
    threads hit one particular variant in almost every round (issue 15).
    ``on_enter(key)`` is told which entry is about to run (None for the reference), so the
    parent can charge a hang to the right variant.
    """
    n = len(entries)
    for r in range(rounds):
        on_enter(None)
        reference.values.append(reference.value())
        sequence = order.permutation(n) if order is not None else [(r + i) % n
                                                                   for i in range(n)]
        for i in sequence:
            entry = entries[i]
            on_enter(entry.key)
            entry.values.append(entry.value())


def timer_resolution(samples: int = 2000) -> float:
    """Smallest non-zero difference between two back-to-back ``perf_counter`` reads: what a
    single-call value cannot resolve below (seconds)."""
    clock = time.perf_counter
    best = float("inf")
    for _ in range(samples):
        t0 = clock()
        t1 = clock()
        while t1 == t0:
            t1 = clock()
        best = min(best, t1 - t0)
    return best
