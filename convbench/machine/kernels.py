"""The numba micro-kernels behind the machine limits (imported lazily: it imports numba).

``NUMBA_CPU_FEATURES`` must be set before this module is first imported for the vector
width to take effect, which is why :mod:`.peak` runs each width in its own process.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numba
import numpy as np
from numba import njit, prange

from convbench.kernels._numba_support import cached_closure
from convbench.kernels.buffers import page_aligned, page_aligned_zeros
from convbench.kernels.register_tile import tile_fma, tile_store, tile_zero

# FMA chains: each (thread, chain, lane) is one dependent chain x <- x*a + b.  A core
# needs latency x pipes independent vector chains in flight to keep its FMA units busy:
# Zen 1 4-5 (latency 5, one ymm FMA a cycle), Zen 2/3 10, Intel with two 512-bit pipes 8,
# Zen 4 at 512 bits 4-8.  With 4 chains (the first version) the peak came out at 81% of
# what OpenBLAS's sgemm reached on the znver1 host (31.7 vs 37.1 GFLOP/s on 1 thread): the
# out-of-order window could not overlap the next lanes' 128 FMAs.  CHAINS chains share one
# multiplier and one addend per lane, so the chains, the multiplier and the addend fit 16
# vector registers (AVX2) without spilling.  LLVM vectorises the lanes loop only while its
# body stays small: 8 or 12 chains of 32 steps (256-384 FMAs) came out scalar (5-10 GFLOP/s
# instead of 39.5), 12 x 10 and 8 x 16 vectorised (39.3-40.3 on 1 thread).  8 x 16 keeps
# the 128 FMAs per body of the first version, which vectorised on the Intel and Zen 4
# hosts too, and 8 chains are what two 512-bit pipes of latency 4 need.  Only FMA contraction is
# allowed: with reassociation LLVM may merge two steps x*a*a + (a*b + b) and report
# impossible figures (BRIEF.md); without it no two chains or steps can be folded.
CHAINS = 8
LANES = 64
STEPS = 16


@njit(fastmath={"contract"}, parallel=True, cache=True)
def fma_chains(n: int, a: np.ndarray, b: np.ndarray, x: np.ndarray) -> None:
    """Run ``n`` rounds of STEPS FMAs on every element of ``x`` (threads, CHAINS, LANES)."""
    for t in prange(x.shape[0]):
        for _ in range(n):
            for j in range(LANES):
                aj = a[j]
                bj = b[j]
                v0 = x[t, 0, j]
                v1 = x[t, 1, j]
                v2 = x[t, 2, j]
                v3 = x[t, 3, j]
                v4 = x[t, 4, j]
                v5 = x[t, 5, j]
                v6 = x[t, 6, j]
                v7 = x[t, 7, j]
                for _k in range(STEPS):
                    v0 = v0 * aj + bj
                    v1 = v1 * aj + bj
                    v2 = v2 * aj + bj
                    v3 = v3 * aj + bj
                    v4 = v4 * aj + bj
                    v5 = v5 * aj + bj
                    v6 = v6 * aj + bj
                    v7 = v7 * aj + bj
                x[t, 0, j] = v0
                x[t, 1, j] = v1
                x[t, 2, j] = v2
                x[t, 3, j] = v3
                x[t, 4, j] = v4
                x[t, 5, j] = v5
                x[t, 6, j] = v6
                x[t, 7, j] = v7


# Sixteen chains of eight steps: the same 128 FMAs per body, twice the independent vectors.
# Eight chains are exactly latency x pipes on a core with two 512-bit pipes of latency 4, so
# any bubble (the body's loads and stores, the loop) shows: on the lent 16-core Intel VM the
# 8-chain peak was 134 GFLOP/s on 1 thread while the nchwc kernel ran 151.  Sixteen need 18
# vector registers: AVX-512 has 32, AVX2's 16 spill, so the peak is the better of the two
# kernels (a limit is a maximum).
WIDE_CHAINS = 16
WIDE_STEPS = 8


@njit(fastmath={"contract"}, parallel=True, cache=True)
def fma_chains_wide(n: int, a: np.ndarray, b: np.ndarray, x: np.ndarray) -> None:
    """:func:`fma_chains` with WIDE_CHAINS chains of WIDE_STEPS steps (x: threads,
    WIDE_CHAINS, LANES)."""
    for t in prange(x.shape[0]):
        for _ in range(n):
            for j in range(LANES):
                aj = a[j]
                bj = b[j]
                v0 = x[t, 0, j]
                v1 = x[t, 1, j]
                v2 = x[t, 2, j]
                v3 = x[t, 3, j]
                v4 = x[t, 4, j]
                v5 = x[t, 5, j]
                v6 = x[t, 6, j]
                v7 = x[t, 7, j]
                v8 = x[t, 8, j]
                v9 = x[t, 9, j]
                v10 = x[t, 10, j]
                v11 = x[t, 11, j]
                v12 = x[t, 12, j]
                v13 = x[t, 13, j]
                v14 = x[t, 14, j]
                v15 = x[t, 15, j]
                for _k in range(WIDE_STEPS):
                    v0 = v0 * aj + bj
                    v1 = v1 * aj + bj
                    v2 = v2 * aj + bj
                    v3 = v3 * aj + bj
                    v4 = v4 * aj + bj
                    v5 = v5 * aj + bj
                    v6 = v6 * aj + bj
                    v7 = v7 * aj + bj
                    v8 = v8 * aj + bj
                    v9 = v9 * aj + bj
                    v10 = v10 * aj + bj
                    v11 = v11 * aj + bj
                    v12 = v12 * aj + bj
                    v13 = v13 * aj + bj
                    v14 = v14 * aj + bj
                    v15 = v15 * aj + bj
                x[t, 0, j] = v0
                x[t, 1, j] = v1
                x[t, 2, j] = v2
                x[t, 3, j] = v3
                x[t, 4, j] = v4
                x[t, 5, j] = v5
                x[t, 6, j] = v6
                x[t, 7, j] = v7
                x[t, 8, j] = v8
                x[t, 9, j] = v9
                x[t, 10, j] = v10
                x[t, 11, j] = v11
                x[t, 12, j] = v12
                x[t, 13, j] = v13
                x[t, 14, j] = v14
                x[t, 15, j] = v15


def fma_flops(n: int, threads: int, chains: int = CHAINS, steps: int = STEPS) -> int:
    """FLOPs of one :func:`fma_chains` (or ``_wide``) call (an FMA counts as two)."""
    return 2 * n * threads * chains * LANES * steps


def fma_operands(threads: int, chains: int = CHAINS
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Multipliers just below 1 and small addends per lane, and distinct starting values
    per chain: values converge, never overflow or go denormal.

    Page-aligned, so each thread's chains (2 or 4 KiB) fill whole cache lines of their own.
    numpy may place x 16 bytes off a line; then the last vector of one thread and the
    first of the next share a line: on the Zen 4 host, one process, 2 threads, 512-bit code,
    x 16 bytes off a line ran 150-157 GFLOP/s where page-aligned x ran 227-232, below what
    conv kernels reached there (196)."""
    k = np.arange(1, LANES + 1, dtype=np.float32)
    a = page_aligned((1.0 - 1e-6 * k).astype(np.float32))
    b = page_aligned((1e-3 * k).astype(np.float32))
    x = np.empty((threads, chains, LANES), np.float32)
    x[:] = (1.0 + 1e-2 * np.arange(chains, dtype=np.float32))[:, None]
    return a, b, page_aligned(x)


# A register tile as the conv kernels compute one (kernels.register_tile): per step, one
# input broadcast times a row of two vector registers of weights into each of TILE_ROWS
# accumulator rows, the operands read from L1.  The chain kernels keep every operand in a
# register, yet on the Zen 5 host (1 thread, 512-bit) they reached 234-250 GFLOP/s where
# this tile reached 249-262, and nchwc ran ResNet-50's 1x1 layers at 255-266 (51 cases of
# a run flagged above 100% of the chains' peak).  6 rows of 2 registers: 12 accumulators,
# past latency x pipes on every core here, and with the 2 weight registers and the
# broadcast 15 registers, within AVX2's 16.
TILE_ROWS = 6
TILE_DEPTH = 256


@functools.cache
def fma_tile(lanes: int) -> Callable[..., None]:
    """The tile kernel for vectors of ``lanes`` float32 (the width being measured: 16 at
    512 bits, 8 at 256, 4 on NEON), compiled once per width.  ``n`` passes per thread of
    TILE_DEPTH steps; x: (threads, TILE_DEPTH * TILE_ROWS), w: (TILE_DEPTH * width,),
    y: (threads, TILE_ROWS * width), each pass's tile added to y."""
    width = 2 * lanes

    @cached_closure(f"r{TILE_ROWS}w{width}", fastmath={"contract"}, parallel=True)
    def kernel(n, x, w, y):  # pragma: no cover - jitted
        for t in prange(y.shape[0]):
            xt = x[t]
            yt = y[t]
            for _ in range(n):
                acc = tile_zero(TILE_ROWS, width)
                for k in range(TILE_DEPTH):
                    tile_fma(acc, xt, k * TILE_ROWS, 1, w, k * width, TILE_ROWS, width)
                tile_store(acc, yt, 0, width, TILE_ROWS, TILE_ROWS, width, True, 0)

    return kernel


def tile_flops(n: int, threads: int, lanes: int) -> int:
    """FLOPs of one :func:`fma_tile` call (an FMA counts as two)."""
    return 2 * n * threads * TILE_ROWS * 2 * lanes * TILE_DEPTH


def tile_operands(threads: int, lanes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs and weights in [0.5, 1) and a zeroed output, page-aligned (each thread's
    rows whole cache lines); a pass adds at most TILE_DEPTH to an output, so sums stay
    far from overflow however long the measurement."""
    rng = np.random.default_rng(0)
    x = page_aligned(rng.uniform(0.5, 1.0, (threads, TILE_DEPTH * TILE_ROWS)).astype(np.float32))
    w = page_aligned(rng.uniform(0.5, 1.0, TILE_DEPTH * 2 * lanes).astype(np.float32))
    y = page_aligned_zeros((threads, TILE_ROWS * 2 * lanes))
    return x, w, y


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
