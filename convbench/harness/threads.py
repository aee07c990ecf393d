"""A measuring process's compute threads: numba's pool and the BLAS/OpenMP pools set to one
count, and OpenBLAS brought into its steady state before anything is verified, timed or
counted.

Why the settling GEMM: limited to one thread before its first call, numpy's OpenBLAS
(0.3.31, ``Haswell`` kernels, AMD EPYC Zen 1 host) can sit in a state where its GEMMs run
2-4x slower -- in a bare process sgemm 256^3 took 3.1 ms instead of 0.8 ms, 128^3 0.22
instead of 0.10, and stayed so for as long as nothing larger ran (8 s watched); one GEMM of
384^3 or more ended it there.  At two threads there was no such state.  In the workers the
state came and went with what ran before: tuning ResNet-50 at one thread, the in-run sgemm
reference took ~0.76 ms in some workers and 2.3-2.9 ms in others (a 3.5x swing in
``ref_ratio``), and in the slow workers BLAS-backed variants ran 1.5-3x slower (14 of 94
im2col/Strassen ``gemm=blas`` measurements of ``tune --exhaustive``; res4a_branch2b
im2col/nhwc 18.2 ms vs 6.4), even though their own layer-sized GEMM had run in
verification.  With one 512^3 sgemm (~7 ms) right after the limit, before numba's pool
starts or anything is verified, no worker of a whole ResNet-50 tune (3339 measurements)
was slow: the reference took 0.79-1.32 ms, and an nchwc-only worker's 0.77 ms instead of
3.09.  Why OpenBLAS behaves so is not known here: not page faults (none per call in either
state), not the operands' alignment (page offsets 0-2048 all slow), not more instructions
(cachegrind: 20 calls, 628 M instructions in all without the settling GEMM, 661 M with it).
"""

from __future__ import annotations

from typing import Any

SETTLE_N = 512   # the settling sgemm's size: 384^3 and up ended the slow state


def use_threads(threads: int, settle: bool = True) -> Any:
    """Run numba's parallel loops and BLAS/OpenMP libraries with ``threads`` threads, and
    (``settle``) settle OpenBLAS.  Returns threadpoolctl's limiter (keep it for the
    process's life).

    A simulated counting pass does not settle: the slow state is one of speed, not of
    instructions, and under callgrind the 512^3 GEMM took 8.4 s, about a third of a
    simulated worker's ~28 s on a one-case run (AMD EPYC Zen 3 host)."""
    import numba
    import threadpoolctl

    numba.set_num_threads(threads)
    limiter = threadpoolctl.threadpool_limits(threads)
    if settle:
        settle_blas()
    return limiter


def settle_blas(n: int = SETTLE_N) -> None:
    """One n^3 float32 GEMM through numpy's BLAS (see the module docstring)."""
    import numpy as np

    a = np.ones((n, n), np.float32)
    np.matmul(a, a, out=np.empty_like(a))
