"""A test-only library baseline, registered via CONVBENCH_EXTRA_KERNELS: ``t_library``
answers correctly (as fault_kernels' ``good``) and, where :data:`BUILD_LOG_ENV` names a
file, appends the building process's id to it, so a test can tell which workers built it
(a real baseline's build imports its library: torch costs ~4.7 s per worker)."""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from convbench.kernels.base import Algorithm, ParamValue, Prepared
from convbench.spec.problem import ConvProblem
from tests.fault_kernels import _Kernel

BUILD_LOG_ENV = "CONVBENCH_TEST_BUILD_LOG"


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    log = os.environ.get(BUILD_LOG_ENV)
    if log:
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
    return _Kernel(problem, w, "good")


ALGORITHMS = [Algorithm(name="t_library", title="test kernel: a library baseline",
                        source="tests/library_kernels.py", layouts=("nchw",), build=_build,
                        baseline=True)]
