"""A measuring process's compute threads: numba's pool and the BLAS/OpenMP pools set to one
count, and OpenBLAS brought into its steady state before anything is verified, timed or
counted.

Why the settling GEMM: limited to one thread before its first call, numpy's OpenBLAS
(0.3.31, ``Haswell`` kernels, AMD EPYC Zen 1 host) ran every GEMM of up to ~400^3 2-4x
slower than it does after one larger GEMM has run in the process -- sgemm 256^3 3.1 ms
instead of 0.8 ms, 128^3 0.22 ms instead of 0.10 -- and stayed there for as long as
nothing larger ran (8 s watched).  At two threads there was no such state.  So a worker's
BLAS speed depended on what ran in it before: tuning ResNet-50 at one thread, the in-run
sgemm reference took ~0.76 ms in workers whose variants called BLAS on the layer's
full-size GEMM and ~2.9 ms in the workers of nchwc variants only, a 3.5x swing in every
``ref_ratio``, and a BLAS-backed variant's time depended on its neighbours.  Why OpenBLAS
behaves so is not known here: not page faults (none per call in either state), not the
operands' alignment (page offsets 0-2048 all slow), not more instructions (cachegrind:
20 calls 628 M instructions in all without the settling GEMM, 661 M with it).  One 512^3 sgemm (~7 ms) at start ends it: with it
the same nchwc-only worker's reference took 0.77 ms instead of 3.09.
"""

from __future__ import annotations

from typing import Any

SETTLE_N = 512   # the settling sgemm's size: 384^3 and up ended the slow state


def use_threads(threads: int) -> Any:
    """Run numba's parallel loops and BLAS/OpenMP libraries with ``threads`` threads, and
    settle OpenBLAS.  Returns threadpoolctl's limiter (keep it for the process's life)."""
    import numba
    import threadpoolctl

    numba.set_num_threads(threads)
    limiter = threadpoolctl.threadpool_limits(threads)
    settle_blas()
    return limiter


def settle_blas(n: int = SETTLE_N) -> None:
    """One n^3 float32 GEMM through numpy's BLAS (see the module docstring)."""
    import numpy as np

    a = np.ones((n, n), np.float32)
    np.matmul(a, a, out=np.empty_like(a))
