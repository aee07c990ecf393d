"""Depthwise 3x3 convolution (groups = channels), QNNPACK style (seed 001; Dukhan 2018).

Rather than updating an output row once per kernel tap (9 passes over it), every output
element is produced in one pass that sums all 9 taps, so each output is written once and
each input row is read while it is still in cache.

NHWC: weights packed [C/V] x KW x KH x V (QNNPACK's layout, V = 16 lanes: one 512-bit
vector of float32; QNNPACK's NEON kernel uses 8), zero padded to whole blocks.  Per output
pixel the kernel walks the channel blocks; per block it sums 9 taps of V channels.
NCHW: each channel plane is its own 2-D convolution; 9 scalar weights stay in registers
and an output row is vectorised along its width.

Padding taps: a row outside the input is handled by zeroing that row's 3 weights (the row
index is clamped to a valid one); columns outside it only occur at the first and last
output pixels of a row, which take the same masked path per pixel.  Threads split the
output rows (NHWC) or channel planes (NCHW).
"""

from __future__ import annotations

from collections.abc import Mapping

import numba
import numpy as np

from convbench.kernels.base import Algorithm, ParamValue, Prepared
from convbench.spec.problem import ConvProblem

V = 16   # channels per packed weight block: one zmm register of float32


def pack_weights(w_oihw: np.ndarray, lanes: int = V) -> np.ndarray:
    """OIHW depthwise weights (C, 1, 3, 3) -> [ceil(C/lanes)] x KW x KH x lanes, zero padded."""
    c = w_oihw.shape[0]
    blocks = -(-c // lanes)
    padded = np.zeros((blocks * lanes, 3, 3), np.float32)
    padded[:c] = w_oihw[:, 0]
    # (block, lane, kh, kw) -> (block, kw, kh, lane)
    return np.ascontiguousarray(padded.reshape(blocks, lanes, 3, 3).transpose(0, 3, 2, 1))


@numba.njit(inline="always")
def _clamp(i, n):  # pragma: no cover - jitted
    return min(max(i, 0), n - 1)


@numba.njit(inline="always")
def _block_9tap(x2, rows, cols, wb, y2, o, c0, width):  # pragma: no cover - jitted
    """y2[o, c0 + l] = sum over (kh, kw) of wb[kw, kh, l] * x2[rows[kh] + cols[kw], c0 + l]."""
    r0, r1, r2 = rows
    i0, i1, i2 = cols
    for lane in range(width):
        c = c0 + lane
        y2[o, c] = (wb[0, 0, lane] * x2[r0 + i0, c] + wb[1, 0, lane] * x2[r0 + i1, c]
                    + wb[2, 0, lane] * x2[r0 + i2, c]
                    + wb[0, 1, lane] * x2[r1 + i0, c] + wb[1, 1, lane] * x2[r1 + i1, c]
                    + wb[2, 1, lane] * x2[r1 + i2, c]
                    + wb[0, 2, lane] * x2[r2 + i0, c] + wb[1, 2, lane] * x2[r2 + i1, c]
                    + wb[2, 2, lane] * x2[r2 + i2, c])


@numba.njit(parallel=True, fastmath=True, cache=True)
def _dw3x3_nhwc(x, wp, y, sh, sw, ph, pw):  # pragma: no cover - jitted
    n_mb, ih_len, iw_len, c_len = x.shape
    _, oh_len, ow_len, _ = y.shape
    n_blocks = wp.shape[0]
    x2 = x.reshape(n_mb * ih_len * iw_len, c_len)
    y2 = y.reshape(n_mb * oh_len * ow_len, c_len)
    for job in numba.prange(n_mb * oh_len):
        n = job // oh_len
        oh = job - n * oh_len
        wrow = np.empty_like(wp)          # weights with rows outside the input zeroed
        wpix = np.empty((3, 3, V), np.float32)   # ... and columns too, for edge pixels
        ih0 = oh * sh - ph
        rows = ((n * ih_len + _clamp(ih0, ih_len)) * iw_len,
                (n * ih_len + _clamp(ih0 + 1, ih_len)) * iw_len,
                (n * ih_len + _clamp(ih0 + 2, ih_len)) * iw_len)
        for b in range(n_blocks):
            for kw in range(3):
                for kh in range(3):
                    inside = 0 <= ih0 + kh < ih_len
                    for lane in range(V):
                        wrow[b, kw, kh, lane] = wp[b, kw, kh, lane] if inside else 0.0
        for ow in range(ow_len):
            iw0 = ow * sw - pw
            o = job * ow_len + ow
            interior = iw0 >= 0 and iw0 + 2 < iw_len
            cols = (_clamp(iw0, iw_len), _clamp(iw0 + 1, iw_len), _clamp(iw0 + 2, iw_len))
            for b in range(n_blocks):
                c0 = b * V
                width = min(V, c_len - c0)
                if interior:
                    if width == V:
                        _block_9tap(x2, rows, cols, wrow[b], y2, o, c0, V)
                    else:
                        _block_9tap(x2, rows, cols, wrow[b], y2, o, c0, width)
                else:
                    for kw in range(3):
                        inside = 0 <= iw0 + kw < iw_len
                        for kh in range(3):
                            for lane in range(V):
                                wpix[kw, kh, lane] = wrow[b, kw, kh, lane] if inside else 0.0
                    _block_9tap(x2, rows, cols, wpix, y2, o, c0, width)


@numba.njit(parallel=True, fastmath=True, cache=True)
def _dw3x3_nchw(x, w, y, sh, sw, ph, pw):  # pragma: no cover - jitted
    n_mb, c_len, ih_len, iw_len = x.shape
    _, _, oh_len, ow_len = y.shape
    # interior outputs: all three column taps inside the input
    ow_lo = min(-(-pw // sw), ow_len)
    ow_hi = max(min(ow_len, (iw_len - 3 + pw) // sw + 1), ow_lo)
    for job in numba.prange(n_mb * c_len):
        n = job // c_len
        c = job - n * c_len
        plane = x[n, c]
        out = y[n, c]
        wk = np.empty((3, 3), np.float32)   # the channel's weights, rows outside zeroed
        for oh in range(oh_len):
            ih0 = oh * sh - ph
            for kh in range(3):
                inside = 0 <= ih0 + kh < ih_len
                for kw in range(3):
                    wk[kh, kw] = w[c, kh, kw] if inside else 0.0
            r0 = plane[_clamp(ih0, ih_len)]
            r1 = plane[_clamp(ih0 + 1, ih_len)]
            r2 = plane[_clamp(ih0 + 2, ih_len)]
            orow = out[oh]
            # the interior, vectorised along the row: views start at a valid column
            base = ow_lo * sw - pw
            a0, a1, a2 = r0[base:], r1[base:], r2[base:]
            o_int = orow[ow_lo:ow_hi]
            for j in range(ow_hi - ow_lo):
                s = j * sw
                o_int[j] = (wk[0, 0] * a0[s] + wk[0, 1] * a0[s + 1] + wk[0, 2] * a0[s + 2]
                            + wk[1, 0] * a1[s] + wk[1, 1] * a1[s + 1] + wk[1, 2] * a1[s + 2]
                            + wk[2, 0] * a2[s] + wk[2, 1] * a2[s + 1] + wk[2, 2] * a2[s + 2])
            # the edge outputs, tap by tap
            for ow in range(ow_len):
                if ow_lo <= ow < ow_hi:
                    continue
                acc = 0.0
                for kw in range(3):
                    iw = ow * sw - pw + kw
                    if 0 <= iw < iw_len:
                        acc += wk[0, kw] * r0[iw] + wk[1, kw] * r1[iw] + wk[2, kw] * r2[iw]
                orow[ow] = acc


def _strides(p: ConvProblem) -> tuple[int, int, int, int]:
    return p.sh, p.sw, p.ph, p.pw


class DepthwiseNHWC(Prepared):
    in_layout = out_layout = "nhwc"

    def __init__(self, problem: ConvProblem, w: np.ndarray):
        self.p = problem
        self.wp = pack_weights(np.asarray(w, np.float32))
        self.packed_weight_bytes = self.wp.nbytes

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        _dw3x3_nhwc(x, self.wp, y, *_strides(self.p))

    def info(self) -> dict[str, ParamValue]:
        return {"lanes": V, "compulsory_bytes": self.p.compulsory_bytes}


class DepthwiseNCHW(Prepared):
    in_layout = out_layout = "nchw"

    def __init__(self, problem: ConvProblem, w: np.ndarray):
        self.p = problem
        self.w = np.ascontiguousarray(np.asarray(w, np.float32)[:, 0])   # (C, 3, 3)

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        _dw3x3_nchw(x, self.w, y, *_strides(self.p))

    def info(self) -> dict[str, ParamValue]:
        return {"compulsory_bytes": self.p.compulsory_bytes}


def _applies(problem: ConvProblem, layout: str, params: Mapping[str, ParamValue]) -> str | None:
    p = problem
    if not (p.g == p.ic == p.oc):
        return "depthwise needs groups = input = output channels"
    if (p.kh, p.kw) != (3, 3):
        return "depthwise kernel here is 3x3 only"
    if p.sh != p.sw or p.sh not in (1, 2):
        return "depthwise kernel needs stride 1 or 2 (equal in h and w)"
    if (p.dh, p.dw) != (0, 0):
        return "depthwise kernel needs a dense (undilated) kernel"
    return None


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    return DepthwiseNHWC(problem, w) if layout == "nhwc" else DepthwiseNCHW(problem, w)


ALGORITHMS = [
    Algorithm(
        name="depthwise3x3",
        title="Depthwise 3x3 (all 9 taps per output in one pass)",
        source="QNNPACK (Dukhan 2018) depthwise kernel; seed 001",
        layouts=("nhwc", "nchw"),
        build=_build,
        applies=_applies,
        notes=f"NHWC weights packed [C/{V}] x KW x KH x {V}; stride 1 or 2; memory-bound: "
              "judge it by bandwidth (compulsory_bytes / time) against the roofline.",
    )
]
