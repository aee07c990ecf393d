"""The float64 reference convolution and the one tolerance rule every kernel is held to.

Tolerance rule (per output element i)::

    |y_i - ref_i| <= growth * C * eps32 * sqrt(K) * S_i  +  tiny

K = IC/g*KH*KW is the reduction length, S_i = sum_k |x_k * w_k| the magnitude of the
products summed into output i (the reference run on |x| and |w|), eps32 = 2**-23 and
C = 2.  Rounding errors of a float32 sum of K terms grow like sqrt(K) * eps * S in practice
(random-walk model; the worst case is K * eps * S), so the bound passes correct float32
kernels in any summation order while a missing or doubled tap, which errs by about S/K or
more, fails for every K up to ~10^4.  ``growth`` is 1 unless the algorithm declares more
(Winograd's transforms, Strassen's additions amplify rounding); the check table shows it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from convbench.spec.problem import ConvProblem

EPS32 = float(np.finfo(np.float32).eps)
TOLERANCE_C = 2.0
_TINY = 1e-30


def conv2d_reference(problem: ConvProblem, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Direct convolution in float64. x: NCHW, w: OIHW (IC/g), returns NCHW.

    Any stride, padding, dilation and groups; sums one kernel tap at a time with tensordot.
    """
    p = problem
    x = np.asarray(x, dtype=np.float64).reshape(p.mb, p.g, p.icg, p.ih, p.iw)
    w = np.asarray(w, dtype=np.float64).reshape(p.g, p.ocg, p.icg, p.kh, p.kw)
    xp = np.zeros((p.mb, p.g, p.icg, p.ih + 2 * p.ph, p.iw + 2 * p.pw))
    xp[..., p.ph:p.ph + p.ih, p.pw:p.pw + p.iw] = x
    y = np.zeros((p.mb, p.g, p.ocg, p.oh, p.ow))
    h_span = (p.oh - 1) * p.sh + 1
    w_span = (p.ow - 1) * p.sw + 1
    for kh in range(p.kh):
        h0 = kh * (p.dh + 1)
        for kw in range(p.kw):
            w0 = kw * (p.dw + 1)
            tap = xp[..., h0:h0 + h_span:p.sh, w0:w0 + w_span:p.sw]  # n g c oh ow
            for g in range(p.g):
                # (ocg, icg) x (n, icg, oh, ow) -> (ocg, n, oh, ow)
                contrib = np.tensordot(w[g, :, :, kh, kw], tap[:, g], axes=([1], [1]))
                y[:, g] += contrib.transpose(1, 0, 2, 3)
    return y.reshape(p.mb, p.oc, p.oh, p.ow)


@dataclass(frozen=True)
class ErrorReport:
    """How far a kernel's output is from the reference, in absolute and bound units."""

    max_abs: float
    max_rel: float          # max |err| / max(|ref|, tiny) over elements with |ref| > bound
    worst_ratio: float      # max err / bound: <= 1 passes
    passed: bool
    reason: str = ""


class Reference:
    """Reference output and per-element bound for one problem and one input set."""

    def __init__(self, problem: ConvProblem, x: np.ndarray, w: np.ndarray):
        self.problem = problem
        self.y = conv2d_reference(problem, x, w)
        self.magnitude = conv2d_reference(problem, np.abs(x), np.abs(w))

    def bound(self, growth: float = 1.0) -> np.ndarray:
        k = self.problem.reduction_length
        return growth * TOLERANCE_C * EPS32 * np.sqrt(k) * self.magnitude + _TINY

    def compare(self, y: np.ndarray, growth: float = 1.0) -> ErrorReport:
        """Compare ``y`` (NCHW, any float dtype) against the reference."""
        y = np.asarray(y, dtype=np.float64)
        if y.shape != self.y.shape:
            return ErrorReport(np.inf, np.inf, np.inf, False,
                               f"output shape {y.shape} != expected {self.y.shape}")
        if not np.all(np.isfinite(y)):
            bad = int(np.count_nonzero(~np.isfinite(y)))
            return ErrorReport(np.inf, np.inf, np.inf, False, f"{bad} non-finite outputs")
        err = np.abs(y - self.y)
        bound = self.bound(growth)
        ratio = err / bound
        worst = int(np.argmax(ratio))
        worst_ratio = float(ratio.flat[worst])
        big = np.abs(self.y) > bound
        max_rel = float(np.max(err[big] / np.abs(self.y[big]))) if big.any() else 0.0
        passed = worst_ratio <= 1.0
        reason = ""
        if not passed:
            idx = np.unravel_index(worst, y.shape)
            reason = (f"error {err.flat[worst]:.3g} at n,c,h,w={tuple(map(int, idx))} is "
                      f"{worst_ratio:.3g}x the bound {bound.flat[worst]:.3g} "
                      f"(got {y.flat[worst]:.6g}, expected {self.y.flat[worst]:.6g})")
        return ErrorReport(float(err.max()), max_rel, worst_ratio, passed, reason)
