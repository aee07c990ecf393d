"""Direct convolution: the textbook nested loop over outputs and kernel taps (the baseline).

NCHW: parallel over output channels; each weight scalar is broadcast over an output row.
NHWC: parallel over output rows; the innermost loop runs over output channels of a group,
which are contiguous in both the HWIO weights and the NHWC output.
Loops run from 0 with unsigned-friendly bounds: numba does not vectorise ``range(lo, hi)``
with possibly negative indices (BRIEF.md).
"""

from __future__ import annotations

from collections.abc import Mapping

import numba
import numpy as np

from convbench.kernels.base import Algorithm, ParamValue, Prepared
from convbench.kernels.buffers import packed_weights
from convbench.kernels.layouts import oihw_to_hwio
from convbench.spec.problem import ConvProblem


def _valid_range(o_len: int, i_len: int, stride: int, offset: int) -> tuple[int, int]:
    """[lo, hi) of outputs whose input index o*stride + offset lies in [0, i_len)."""
    lo = 0
    while lo < o_len and lo * stride + offset < 0:
        lo += 1
    hi = o_len
    while hi > lo and (hi - 1) * stride + offset >= i_len:
        hi -= 1
    return lo, hi


_valid_range_jit = numba.njit(cache=True, inline="always")(_valid_range)


@numba.njit(parallel=True, cache=True, fastmath=True)
def _direct_nchw(x, w, y, g, sh, sw, ph, pw, dh, dw):  # pragma: no cover - jitted
    n_mb, _, ih_len, iw_len = x.shape
    oc, icg, kh_len, kw_len = w.shape
    _, _, oh_len, ow_len = y.shape
    ocg = oc // g
    for n in range(n_mb):
        for o in numba.prange(oc):
            c0 = (o // ocg) * icg
            out = y[n, o]
            out[:, :] = 0.0
            for c in range(icg):
                plane = x[n, c0 + c]
                for kh in range(kh_len):
                    oh_lo, oh_hi = _valid_range_jit(oh_len, ih_len, sh, kh * (dh + 1) - ph)
                    for kw in range(kw_len):
                        wv = w[o, c, kh, kw]
                        off_w = kw * (dw + 1) - pw
                        ow_lo, ow_hi = _valid_range_jit(ow_len, iw_len, sw, off_w)
                        n_ow = ow_hi - ow_lo
                        for oh in range(oh_lo, oh_hi):
                            # slices start at 0 so numba can prove indices non-negative
                            src = plane[oh * sh + kh * (dh + 1) - ph, ow_lo * sw + off_w:]
                            dst = out[oh, ow_lo:ow_hi]
                            if sw == 1:
                                for j in range(n_ow):
                                    dst[j] += wv * src[j]
                            else:
                                for j in range(n_ow):
                                    dst[j] += wv * src[j * sw]


@numba.njit(parallel=True, cache=True, fastmath=True)
def _direct_nhwc(x, w, y, g, sh, sw, ph, pw, dh, dw):  # pragma: no cover - jitted
    n_mb, ih_len, iw_len, _ = x.shape
    kh_len, kw_len, icg, oc = w.shape
    _, oh_len, ow_len, _ = y.shape
    ocg = oc // g
    for n in range(n_mb):
        for oh in numba.prange(oh_len):
            y[n, oh] = 0.0
            for kh in range(kh_len):
                ih = oh * sh + kh * (dh + 1) - ph
                if ih < 0 or ih >= ih_len:
                    continue
                for kw in range(kw_len):
                    off_w = kw * (dw + 1) - pw
                    ow_lo, ow_hi = _valid_range_jit(ow_len, iw_len, sw, off_w)
                    for ow in range(ow_lo, ow_hi):
                        pix = x[n, ih, ow * sw + off_w]
                        out = y[n, oh, ow]
                        for gi in range(g):
                            for c in range(icg):
                                xv = pix[gi * icg + c]
                                wrow = w[kh, kw, c]
                                base = gi * ocg
                                for j in range(ocg):
                                    out[base + j] += xv * wrow[base + j]


def _geometry(p: ConvProblem) -> tuple[int, ...]:
    return (p.g, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw)


class DirectNCHW(Prepared):
    in_layout = out_layout = "nchw"

    def __init__(self, problem: ConvProblem, w: np.ndarray):
        self.w = packed_weights(np.asarray(w, dtype=np.float32))
        self.geometry = _geometry(problem)

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        _direct_nchw(x, self.w, y, *self.geometry)

    def hot_kernels(self) -> tuple[object, ...]:
        return (_direct_nchw,)


class DirectNHWC(Prepared):
    in_layout = out_layout = "nhwc"

    def __init__(self, problem: ConvProblem, w: np.ndarray):
        self.w = packed_weights(oihw_to_hwio(np.asarray(w, dtype=np.float32)))
        self.packed_weight_bytes = self.w.nbytes
        self.geometry = _geometry(problem)

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        _direct_nhwc(x, self.w, y, *self.geometry)

    def hot_kernels(self) -> tuple[object, ...]:
        return (_direct_nhwc,)


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    return DirectNCHW(problem, w) if layout == "nchw" else DirectNHWC(problem, w)


ALGORITHMS = [
    Algorithm(
        name="direct",
        title="Direct convolution (nested loops)",
        source="textbook 7-loop convolution; seed 000 section 1",
        layouts=("nchw", "nhwc"),
        build=_build,
        notes="Any stride, padding, dilation and groups. Threads over OC (NCHW) or OH (NHWC).",
    )
]
