"""Seeded inputs (the same problem and seed give the same data, whatever the thread count)
and the page-aligned buffers the timed kernels read and write."""

from __future__ import annotations

import zlib

import numpy as np

from convbench.spec.problem import ConvProblem


def problem_seed(problem: ConvProblem, seed: int = 0) -> list[int]:
    """Seed sequence from the user's seed and the shape (not the name), stable across runs."""
    shape = ",".join(f"{k}={v}" for k, v in problem.shape_fields.items())
    return [seed, zlib.crc32(shape.encode())]


def make_inputs(problem: ConvProblem, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Input (NCHW) and weights (OIHW), float32, uniform in [-1, 1)."""
    rng = np.random.default_rng(problem_seed(problem, seed))
    x = rng.uniform(-1.0, 1.0, problem.input_shape).astype(np.float32)
    w = rng.uniform(-1.0, 1.0, problem.weight_shape).astype(np.float32)
    return x, w


PAGE_BYTES = 4096


def page_aligned(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``a`` starting on a page boundary.

    numpy aligns small arrays to 16 bytes only, at an address that differs from process to
    process; a kernel whose output started 16 bytes off a cache line ran 13% slower here
    (direct NHWC 3x3, 141 vs 160 us), so each worker process drew its own "speed" and two
    runs of the same code differed by 12-18% with tight confidence intervals.  Page
    alignment (as benchdnn allocates) fixes the buffers' placement, cache-line splits and
    4K aliasing between input and output included."""
    buf = np.empty(a.nbytes + PAGE_BYTES, np.uint8)
    start = -buf.ctypes.data % PAGE_BYTES
    out = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out
