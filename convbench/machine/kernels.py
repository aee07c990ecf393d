"""The numba micro-kernels behind the machine limits (imported lazily: it imports numba).

``NUMBA_CPU_FEATURES`` must be set before this module is first imported for the vector
width to take effect, which is why :mod:`.peak` runs each width in its own process.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

# FMA chains: each (thread, chain, lane) is one dependent chain x <- x*a + b with its own a
# and b, so nothing is loop-invariant across chains and LLVM cannot fold them.  CHAINS
# independent vectors per lane block plus out-of-order overlap of the LANES loop keep both
# FMA pipes busy (latency 4 x 2 pipes needs 8 vectors in flight); STEPS unrolled FMAs per
# load/store keep memory traffic out of the way.  Only FMA contraction is allowed: with
# reassociation LLVM may merge two steps x*a*a + (a*b + b) and report impossible figures.
CHAINS = 4
LANES = 64
STEPS = 32


@njit(fastmath={"contract"}, parallel=True, cache=True)
def fma_chains(n: int, a: np.ndarray, b: np.ndarray, x: np.ndarray) -> None:
    """Run ``n`` rounds of STEPS FMAs on every element of ``x`` (threads, CHAINS, LANES)."""
    for t in prange(x.shape[0]):
        for _ in range(n):
            for j in range(LANES):
                v0 = x[t, 0, j]
                v1 = x[t, 1, j]
                v2 = x[t, 2, j]
                v3 = x[t, 3, j]
                a0, a1, a2, a3 = a[0, j], a[1, j], a[2, j], a[3, j]
                b0, b1, b2, b3 = b[0, j], b[1, j], b[2, j], b[3, j]
                for _k in range(STEPS):
                    v0 = v0 * a0 + b0
                    v1 = v1 * a1 + b1
                    v2 = v2 * a2 + b2
                    v3 = v3 * a3 + b3
                x[t, 0, j] = v0
                x[t, 1, j] = v1
                x[t, 2, j] = v2
                x[t, 3, j] = v3


def fma_flops(n: int, threads: int) -> int:
    """FLOPs of one :func:`fma_chains` call (an FMA counts as two)."""
    return 2 * n * threads * CHAINS * LANES * STEPS


def fma_operands(threads: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct multipliers just below 1 and small addends: values converge, never overflow
    or go denormal."""
    k = np.arange(1, CHAINS * LANES + 1, dtype=np.float32).reshape(CHAINS, LANES)
    a = (1.0 - 1e-6 * k).astype(np.float32)
    b = (1e-3 * k).astype(np.float32)
    return a, b, np.ones((threads, CHAINS, LANES), np.float32)


# Clock: integer add then xor, each one cycle of latency on every current core, each
# depending on the last: two cycles per iteration whatever the issue width.
ADD_CHAIN_CYCLES = 2


@njit(cache=True)
def add_chain(n: int, a: int, b: int) -> int:
    x = 0
    for _ in range(n):
        x = (x + a) ^ b
    return x


@njit(parallel=True, cache=True)
def triad(a: np.ndarray, b: np.ndarray, c: np.ndarray, s: float, reps: int) -> None:
    """STREAM triad a = b + s*c on each thread's own row, ``reps`` times; the scalar
    changes each time so no pass is redundant."""
    for t in prange(a.shape[0]):
        for r in range(reps):
            q = s + r
            for i in range(a.shape[1]):
                a[t, i] = b[t, i] + q * c[t, i]


def set_threads(threads: int) -> None:
    numba.set_num_threads(threads)


def max_threads() -> int:
    return numba.config.NUMBA_NUM_THREADS
