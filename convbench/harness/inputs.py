"""Seeded inputs: the same problem and seed give the same data, whatever the thread count
(the buffers the timed kernels read and write are convbench.kernels.buffers')."""

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
