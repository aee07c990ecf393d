"""Blocked NCHW[x]c convolution (NeoCPU, Liu et al. 2019; seed 002, Algorithm 1).

Activations NCHW[x]c: (N, C/x, H, W, x); weights KCRS[x]c[y]k: (K/y, C/x, R, S, x, y);
see :mod:`convbench.kernels.layouts`.  Parameters, named as in the paper:

- ``ic_bn`` (x): input channels per block, the innermost reduction step;
- ``oc_bn`` (y): output channels per block, the vector lanes of every accumulator;
- ``reg_n``: output-width positions held in accumulators at once (reg_n x oc_bn floats,
  one vector each when oc_bn is the vector width);
- ``unroll_ker``: the kernel's R x S loops fully unrolled (compiled for that kernel size).

For every (image, output-channel block, output row) -- the parallel loop -- and every
reg_n-wide run of the row, the accumulators sum over input-channel blocks, kernel taps and
the ic_bn channels of a block: one broadcast input value times an oc_bn-wide weight vector
per accumulator.  Channels are zero padded to whole blocks; the input is copied into a
zero-bordered buffer (written once in build) so the inner loops need no bounds checks.
The in/out layouts are "nchw{ic_bn}c"/"nchw{oc_bn}c": the harness converts outside the
timed region, and :func:`layout_transform_seconds` measures those conversions on their
own (also recorded in ``info()``) so a user sees when blocking pays for itself.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from functools import cache

import numba
import numpy as np

from convbench.kernels import layouts
from convbench.kernels.base import Algorithm, Param, ParamValue, Prepared
from convbench.spec.problem import ConvProblem

IC_BN = (8, 16)
OC_BN = (16, 32)
REG_N = (8,)                 # NeoCPU searches {32, 16, 8, 4, 2}: wider via sweep params
UNROLL_KER = (False, True)


@cache
def _kernel(reg_n: int, kh_fixed: int, kw_fixed: int):
    """The kernel with reg_n (and, when unrolled, the kernel size) compiled in.

    kh_fixed = kw_fixed = 0 leaves the kernel-size loops as runtime loops.  oc_bn stays a
    runtime trip count on purpose: with it constant, LLVM unrolled the lane loop into
    scalar FMAs (no packed FMA at all, ~8 GFLOP/s); as a runtime loop it vectorises.
    """

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def conv(xp, w, y, sh, sw, dh, dw):  # pragma: no cover - jitted
        n_mb, icb_len, _, _, ic_bn = xp.shape
        ocb_len, _, kh_len, kw_len, _, oc_len = w.shape
        if kh_fixed:
            kh_len, kw_len = kh_fixed, kw_fixed
        _, _, oh_len, ow_len, _ = y.shape
        ow_blocks = -(-ow_len // reg_n)
        for job in numba.prange(n_mb * ocb_len * oh_len):
            n = job // (ocb_len * oh_len)
            ocb = (job // oh_len) % ocb_len
            oh = job % oh_len
            acc = np.empty((reg_n, oc_len), np.float32)
            for owb in range(ow_blocks):
                ow0 = owb * reg_n
                for r in range(reg_n):
                    for o in range(oc_len):
                        acc[r, o] = 0.0
                for icb in range(icb_len):
                    for kh in range(kh_len):
                        xrow = xp[n, icb, oh * sh + kh * (dh + 1)]      # (Wp, ic_bn)
                        for kw in range(kw_len):
                            wk = w[ocb, icb, kh, kw]                    # (ic_bn, oc_bn)
                            # a view from the first column read: indices from 0 vectorise
                            xs = xrow[ow0 * sw + kw * (dw + 1):]
                            for ic in range(ic_bn):
                                wv = wk[ic]
                                for r in range(reg_n):
                                    xv = xs[r * sw, ic]
                                    for o in range(oc_len):
                                        acc[r, o] += xv * wv[o]
                out = y[n, ocb, oh]
                for r in range(min(reg_n, ow_len - ow0)):
                    for o in range(oc_len):
                        out[ow0 + r, o] = acc[r, o]

    return conv


class BlockedNCHWc(Prepared):
    """NCHW[ic_bn]c in, NCHW[oc_bn]c out; workspace: the zero-bordered input copy."""

    def __init__(self, problem: ConvProblem, w: np.ndarray, ic_bn: int, oc_bn: int,
                 reg_n: int, unroll_ker: bool):
        p = self.p = problem
        self.ic_bn, self.oc_bn = ic_bn, oc_bn
        self.in_layout, self.out_layout = layouts.blocked_name(ic_bn), layouts.blocked_name(oc_bn)
        self.w = layouts.oihw_to_kcrsxcyk(np.asarray(w, np.float32), ic_bn, oc_bn)
        self.packed_weight_bytes = self.w.nbytes
        # wide enough for the last reg_n block's reads past the output's right edge
        ow_padded = -(-p.ow // reg_n) * reg_n
        wp = max(p.iw + 2 * p.pw, (ow_padded - 1) * p.sw + (p.kw - 1) * (p.dw + 1) + 1)
        hp = p.ih + 2 * p.ph
        self.xp = np.zeros((p.mb, -(-p.ic // ic_bn), hp, wp, ic_bn), np.float32)
        self.workspace_bytes = self.xp.nbytes
        fixed = (p.kh, p.kw) if unroll_ker else (0, 0)
        self.kernel = _kernel(reg_n, *fixed)
        self._transform_seconds: dict[str, float] | None = None

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        p = self.p
        self.xp[:, :, p.ph:p.ph + p.ih, p.pw:p.pw + p.iw] = x
        self.kernel(self.xp, self.w, y, p.sh, p.sw, p.dh, p.dw)

    def info(self) -> dict[str, ParamValue]:
        if self._transform_seconds is None:   # measured on first request, never in run
            self._transform_seconds = layout_transform_seconds(self.p, self.ic_bn, self.oc_bn)
        return {**self._transform_seconds, "ic_blocks": self.xp.shape[1]}


def layout_transform_seconds(problem: ConvProblem, ic_bn: int, oc_bn: int,
                             repeats: int = 5) -> dict[str, float]:
    """Best-of-``repeats`` time of NCHW -> NCHW[ic_bn]c on the input and NCHW[oc_bn]c ->
    NCHW on the output: the cost a network pays at the edges of a blocked region."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(problem.input_shape, dtype=np.float32)
    y = layouts.to_layout(rng.standard_normal(problem.output_shape, dtype=np.float32),
                          layouts.blocked_name(oc_bn))
    to_blocked = from_blocked = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        layouts.to_layout(x, layouts.blocked_name(ic_bn))
        t1 = time.perf_counter()
        np.ascontiguousarray(layouts.from_layout(y, layouts.blocked_name(oc_bn), problem.oc))
        t2 = time.perf_counter()
        to_blocked, from_blocked = min(to_blocked, t1 - t0), min(from_blocked, t2 - t1)
    return {"to_nchwxc_seconds": to_blocked, "from_nchwxc_seconds": from_blocked}


def _applies(problem: ConvProblem, layout: str, params: Mapping[str, ParamValue]) -> str | None:
    if problem.g != 1:
        return "NCHW[x]c here supports groups = 1 only"
    return None


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    return BlockedNCHWc(problem, w, int(params["ic_bn"]), int(params["oc_bn"]),
                        int(params["reg_n"]), bool(params["unroll_ker"]))


ALGORITHMS = [
    Algorithm(
        name="nchwc",
        title="Blocked NCHW[x]c (NeoCPU Algorithm 1)",
        source="NeoCPU (Liu et al., USENIX ATC 2019); seed 002",
        layouts=("nchwxc",),
        build=_build,
        params=(
            Param("ic_bn", IC_BN, 16, "input channels per block (x of NCHW[x]c)"),
            Param("oc_bn", OC_BN, 32, "output channels per block: accumulator lanes (y)"),
            Param("reg_n", REG_N, 8, "output-width accumulators held in registers"),
            Param("unroll_ker", UNROLL_KER, False, "unroll the kernel's R x S loops"),
        ),
        applies=_applies,
        notes="Channels zero padded to whole blocks (any IC, OC); any kernel, stride, "
              "padding, dilation; groups 1. Layout transforms timed by "
              "layout_transform_seconds / info(), not in run.",
    )
]
