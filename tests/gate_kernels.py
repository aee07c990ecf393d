"""A test-only kernel whose cost a test can raise, registered via CONVBENCH_EXTRA_KERNELS.

``t_gated`` computes the convolution correctly (im2col + numpy matmul) and then, when
``CONVBENCH_TEST_EXTRA_WORK`` holds a fraction f > 0, computes the first f x OC output
channels once more and discards them: real extra work of about f times the kernel's own,
the kind of slowdown a careless change introduces.  The regression-gate tests run the
same suite twice, the second time with the variable set, and expect `convbench compare`
to name this variant and no other.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from convbench.kernels.base import Algorithm, ParamValue, Prepared
from convbench.spec.problem import ConvProblem

EXTRA_WORK_ENV = "CONVBENCH_TEST_EXTRA_WORK"


class _Gated(Prepared):
    in_layout = out_layout = "nchw"

    def __init__(self, problem: ConvProblem, w: np.ndarray, extra: float):
        if problem.g != 1 or problem.mb != 1:
            raise ValueError("t_gated handles groups 1 and batch 1 only")
        self.p = problem
        self.w2 = np.ascontiguousarray(w.reshape(problem.oc, -1), np.float32)   # OC x K
        self.cols = np.zeros((self.w2.shape[1], problem.oh * problem.ow), np.float32)
        self.extra_rows = round(extra * problem.oc)
        self.scratch = np.empty((self.extra_rows, self.cols.shape[1]), np.float32)

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        p = self.p
        xp = np.pad(x[0], ((0, 0), (p.ph, p.ph), (p.pw, p.pw)))
        rows = self.cols.reshape(p.ic, p.kh, p.kw, p.oh, p.ow)
        for kh in range(p.kh):
            for kw in range(p.kw):
                h0, w0 = kh * (p.dh + 1), kw * (p.dw + 1)
                rows[:, kh, kw] = xp[:, h0:h0 + p.sh * p.oh:p.sh, w0:w0 + p.sw * p.ow:p.sw]
        np.matmul(self.w2, self.cols, out=y.reshape(p.oc, -1))
        if self.extra_rows:
            np.matmul(self.w2[:self.extra_rows], self.cols, out=self.scratch)


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    return _Gated(problem, w, float(os.environ.get(EXTRA_WORK_ENV, "0") or 0))


ALGORITHMS = [Algorithm(name="t_gated", title="test kernel: extra work on request",
                        source="tests/gate_kernels.py", layouts=("nchw",), build=_build)]
