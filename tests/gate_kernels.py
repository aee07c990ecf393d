"""A test-only kernel whose cost a test can raise, registered via CONVBENCH_EXTRA_KERNELS.

``t_gated`` computes the convolution with the project's im2col kernel (NCHW, BLAS) and then,
when ``CONVBENCH_TEST_EXTRA_WORK`` holds a fraction f > 0, multiplies the first f x OC rows
of the weights with the same unfolded input once more and discards the result: real extra
work of about f times the GEMM, the kind of slowdown a careless change introduces.  The
regression-gate tests run the same suite twice, the second time with the variable set, and
expect `convbench compare` to name this variant and no other.

``CONVBENCH_TEST_PROCESS_BIAS`` ("0,0.15,0") adds a bias of its own to each worker process
of a group instead: the process numbered i (``CONVBENCH_PROCESS``, set by the worker) does
the i-th fraction of extra work, so one process is slower than its siblings as a whole.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from convbench.kernels.base import Algorithm, ParamValue, Prepared
from convbench.kernels.im2col import Im2colNCHW
from convbench.spec.problem import ConvProblem

EXTRA_WORK_ENV = "CONVBENCH_TEST_EXTRA_WORK"
PROCESS_BIAS_ENV = "CONVBENCH_TEST_PROCESS_BIAS"


def _extra_work() -> float:
    bias = os.environ.get(PROCESS_BIAS_ENV, "")
    if bias:
        fractions = [float(f) for f in bias.split(",")]
        return fractions[int(os.environ.get("CONVBENCH_PROCESS", "0")) % len(fractions)]
    return float(os.environ.get(EXTRA_WORK_ENV, "0") or 0)


class _Gated(Prepared):
    in_layout = out_layout = "nchw"

    def __init__(self, problem: ConvProblem, w: np.ndarray, extra: float):
        if problem.g != 1 or problem.mb != 1 or problem.is_pointwise:
            raise ValueError("t_gated handles groups 1, batch 1 and unfolded convs only")
        self.kernel = Im2colNCHW(problem, w)
        self.extra_rows = round(extra * problem.oc)
        self.scratch = np.empty((self.extra_rows, problem.oh * problem.ow), np.float32)

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        self.kernel.run(x, y)
        if self.extra_rows:   # the first f x OC output channels again, from the same unfold
            np.matmul(self.kernel.wmat[0, :self.extra_rows], self.kernel.cols, out=self.scratch)


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    return _Gated(problem, w, _extra_work())


ALGORITHMS = [Algorithm(name="t_gated", title="test kernel: extra work on request",
                        source="tests/gate_kernels.py", layouts=("nchw",), build=_build)]
