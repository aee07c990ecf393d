"""Best-of timing with calibration, shared by the machine micro-benchmarks.

A limit is a maximum, so the best (shortest) of several timed calls is the figure:
co-tenants and interrupts only ever make a call slower.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def best_seconds(call: Callable[[int], object], min_seconds: float, repeats: int,
                 start: int = 1) -> tuple[int, float]:
    """Grow the work count ``n`` until ``call(n)`` takes ``min_seconds``, then return ``n``
    and the best of ``repeats`` timed calls.  The first call also absorbs JIT compilation."""
    n = max(1, start)
    call(n)
    while True:
        t0 = time.perf_counter()
        call(n)
        elapsed = time.perf_counter() - t0
        if elapsed >= min_seconds:
            break
        n *= 2 if elapsed <= 0 else max(2, min(16, int(1.2 * min_seconds / elapsed) + 1))
    best = elapsed
    for _ in range(repeats - 1):
        t0 = time.perf_counter()
        call(n)
        best = min(best, time.perf_counter() - t0)
    return n, best
