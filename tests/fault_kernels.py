"""Test-only kernels that misbehave on purpose, registered via CONVBENCH_EXTRA_KERNELS.

Each one is a real variant to the harness: ``good`` is correct (the float64 reference
rounded to float32), ``segfault`` dereferences NULL, ``hang`` never returns, ``wrong``
answers zeros, ``raises`` raises, ``slowjit`` is correct but its first call sleeps 0.3 s,
standing in for a JIT compile that must never land in the timed values, and ``lingers`` is
correct but leaves a non-daemon thread running, so its worker never exits by itself, and
``hog`` allocates memory without bound while it prepares, up to :data:`HOG_CAP_BYTES`: a
worker memory limit below that stops it with ``MemoryError``.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Mapping

import numpy as np

from convbench.kernels.base import Algorithm, ParamValue, Prepared
from convbench.kernels.reference import conv2d_reference
from convbench.spec.problem import ConvProblem

FIRST_CALL_SLEEP_S = 0.3
HOG_CAP_BYTES = 6 << 30   # so that a missing limit fails the test, not the machine
HOG_CHUNK_BYTES = 64 << 20


class _Kernel(Prepared):
    in_layout = out_layout = "nchw"

    def __init__(self, problem: ConvProblem, w: np.ndarray, behaviour: str):
        self.problem, self.w, self.behaviour = problem, w, behaviour
        self.calls = 0
        if behaviour == "lingers":   # a pool a library forgot to shut down
            threading.Thread(target=_forever, daemon=False).start()
        if behaviour == "hog":
            # untouched: RLIMIT_DATA counts the address space, so the limit stops it as
            # surely, and the case no longer spends its 4 s touching 1 GiB (once, under a
            # loaded CI machine, the touching ran past the timeout: "timeout", not "error")
            self.hoard = [np.empty(HOG_CHUNK_BYTES // 8)
                          for _ in range(HOG_CAP_BYTES // HOG_CHUNK_BYTES)]

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        self.calls += 1
        if self.behaviour == "segfault":
            ctypes.string_at(0)
        elif self.behaviour == "hang":
            while True:
                time.sleep(1)
        elif self.behaviour == "raises":
            raise ValueError("this kernel always raises")
        elif self.behaviour == "wrong":
            y[...] = 0.0
            return
        elif self.behaviour == "slowjit" and self.calls == 1:
            time.sleep(FIRST_CALL_SLEEP_S)
        y[...] = conv2d_reference(self.problem, x, self.w)


def _forever() -> None:
    while True:
        time.sleep(1)


def _algorithm(behaviour: str) -> Algorithm:
    def build(problem: ConvProblem, w: np.ndarray, layout: str,
              params: Mapping[str, ParamValue]) -> Prepared:
        return _Kernel(problem, w, behaviour)

    return Algorithm(name=f"t_{behaviour}", title=f"test kernel: {behaviour}",
                     source="tests/fault_kernels.py", layouts=("nchw",), build=build)


ALGORITHMS = [_algorithm(b) for b in ("good", "segfault", "hang", "wrong", "raises",
                                      "slowjit", "lingers", "hog")]
