"""Depthwise 3x3 convolution (groups = channels), QNNPACK style (seed 001; Dukhan 2018).

Rather than updating an output row once per kernel tap (9 passes over it), every output
element is produced in one pass that sums all 9 taps, so each output is written once and
each input row is read while it is still in cache.

NHWC: weights packed [C/V] x KW x KH x V (QNNPACK's layout, V = 16 lanes: one 512-bit
vector of float32; QNNPACK's NEON kernel uses 8), zero padded to whole blocks.  A register
tile of rows x pixels outputs and one block of V channels sums its 9 taps per pixel in one
vectorised loop over the lanes (see :func:`nhwc_kernel`); padding taps read one zero
vector, as in QNNPACK, so edge pixels take the same path as interior ones.  Zen 4 host,
1 thread: 1.3-5x faster than oneDNN's channels_last on every MobileNet V1/V2 depthwise
layer, 24-54% of the roofline bound; what is left is L1 misses (2 x 4 tiles run ~52
cycles per tile and block on L1-resident data, 130-240 cycles on the real layers).
NCHW16c (NeoCPU's blocked layout with x = V): a tensor (N, C/V, H, W, V) is N * C/V
images of V channels in NHWC, image i using weight block i mod C/V, so the NHWC kernel runs
it unchanged on that view: one channel block per image, no transform between blocked 1x1
convs and the depthwise layer between them (MobileNet V2's plan paid one on every block).
NCHW: each channel plane is its own 2-D convolution; 9 scalar weights stay in registers
and an output row is vectorised along its width; a row outside the input is handled by
zeroing that row's 3 weights (the row index is clamped to a valid one), the first and
last output pixels of a row tap by tap.  Threads split bands of output rows (NHWC) or
channel planes (NCHW); in NCHW16c a band is one channel block's.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

import numba
import numpy as np

from convbench.kernels._numba_support import cached_closure, f32_at, stack_f32, store_lanes
from convbench.kernels.base import Algorithm, Param, ParamValue, Prepared
from convbench.spec.problem import ConvProblem

V = 16   # channels per packed weight block: one zmm register of float32
# NHWC register tiles, "rows x pixels": output pixels summed together share loaded inputs.
# Only tiles of at most 8 pixels (72 FMAs) vectorise: with 3 x 4 or 2 x 8 LLVM no longer
# fully unrolls the pixel loops inside the lane loop, and the kernel came out scalar
# (3 x 4: 6 GFLOP/s, 2 x 8: 11, against 51-64 for 2 x 4 on the Zen 4 host).
TILES = ("1x4", "1x8", "2x4")
DEFAULT_TILE = "2x4"
ORDERS = ("tiles", "blocks")
BLOCKED = f"nchw{V}c"   # NCHW[x]c with x = V: one channel block per packed weight block
DEFAULT_ORDER = "tiles"
PARAMS = (Param("tile", TILES, DEFAULT_TILE,
                "NHWC and NCHW16c register tile: output rows x pixels"),
          Param("order", ORDERS, DEFAULT_ORDER, "NHWC loop outside the other: tiles or "
                "channel blocks"))


def tile_shape(tile: str) -> tuple[int, int]:
    """``"2x4"`` -> (2 rows, 4 pixels)."""
    rows, pixels = tile.split("x")
    return int(rows), int(pixels)


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


@cache
def nhwc_kernel(stride: int, rows: int, tile: int, order: str = DEFAULT_ORDER,
                parallel: bool = True):
    """The NHWC kernel for one stride and register tiles of ``rows`` x ``tile`` output pixels.

    A prange job is ``rows`` output rows of one image.  Per tile it first resolves the
    element offsets of the NROW x NCOL input pixels the tile reads (NROW = (rows-1)*stride
    + 3, NCOL = (tile-1)*stride + 3), padding ones pointing at the zero vector; then, per
    channel block, one loop over the V lanes sums the 9 taps of all the tile's pixels.
    LLVM vectorises that loop into one zmm iteration: 9 weight loads, NROW x NCOL input
    loads and 9 * rows * tile FMAs, so neighbouring pixels share loaded inputs (stride 1,
    1 x 4: 27 loads for 36 FMAs, 2 x 4: 33 for 72, instead of 18 loads per 9 FMAs; QNNPACK's
    ARM64 kernel likewise computes 3 output rows from 5 input rows).  Results go to a stack
    tile first: storing to ``y`` in that loop would need a runtime alias check against every
    input offset (over LLVM's limit of 8 checks: no vectorisation at all).

    ``parallel=False`` compiles the same loops without prange: on 1 thread the parallel
    launch alone cost ~1.1 us a call (~7% of a 14x14 layer).

    ``order`` is the loop order inside a band: "tiles" (tiles outer, channel blocks inner)
    or "blocks".  Neither wins everywhere on the Zen 4 host: at C = 1024 (7 x 7) "tiles"
    ran 2x faster, at C = 512 (14 x 14) "blocks" up to 2x.  There a pixel is 2-4 KiB, so
    a block's input pixels all fall into one or two L1 sets (8 ways) and evict each other:
    C = 1008 or 1040 ran 1.4x faster per block than 1024."""
    S, R, P = stride, rows, tile
    NROW, NCOL = (R - 1) * S + 3, (P - 1) * S + 3
    RPV = R * P * V   # a literal for stack_f32
    BLOCKS_OUTER = order == "blocks"
    key = f"s{S}_r{R}_t{P}_{order}"

    @cached_closure(key, fastmath=True, inline="always")
    def block_tile(x, offs, wblk, acc, c0, width):  # pragma: no cover - jitted
        """acc[(r*P + p)*V + l] = the 9 taps of tile pixel (r, p), lane l (channel c0 + l)."""
        for lane in range(width):
            c = c0 + lane
            # weights packed (kw, kh, lane): w<kh><kw>
            w00, w10, w20 = wblk[lane], wblk[V + lane], wblk[2 * V + lane]
            w01, w11, w21 = wblk[3 * V + lane], wblk[4 * V + lane], wblk[5 * V + lane]
            w02, w12, w22 = wblk[6 * V + lane], wblk[7 * V + lane], wblk[8 * V + lane]
            for r in range(R):
                o0, o1, o2 = r * S * NCOL, (r * S + 1) * NCOL, (r * S + 2) * NCOL
                for p in range(P):
                    j = p * S
                    acc[(r * P + p) * V + lane] = (
                        w00 * f32_at(x, offs[o0 + j] + c) + w01 * f32_at(x, offs[o0 + j + 1] + c)
                        + w02 * f32_at(x, offs[o0 + j + 2] + c)
                        + w10 * f32_at(x, offs[o1 + j] + c)
                        + w11 * f32_at(x, offs[o1 + j + 1] + c)
                        + w12 * f32_at(x, offs[o1 + j + 2] + c)
                        + w20 * f32_at(x, offs[o2 + j] + c)
                        + w21 * f32_at(x, offs[o2 + j + 1] + c)
                        + w22 * f32_at(x, offs[o2 + j + 2] + c))

    @cached_closure(key, fastmath=True, inline="always")
    def store_tile(acc, y, y0, row_len, c_len, nrows, npix, width):  # pragma: no cover
        """The tile's first ``nrows`` x ``npix`` pixels, ``width`` lanes each, to
        y[y0 + r*row_len + p*c_len + l]."""
        for r in range(nrows):
            yr = y0 + r * row_len
            if width == V:
                for p in range(npix):
                    store_lanes(y, yr + p * c_len, acc, (r * P + p) * V, V)
            else:
                for p in range(npix):
                    out = y[yr + p * c_len:]
                    for lane in range(width):
                        out[lane] = acc[(r * P + p) * V + lane]

    def dw3x3_nhwc(x, wp, zero, y, ph, pw, w_groups):  # pragma: no cover - jitted
        """Image n uses weight group n % w_groups (1 for NHWC; C/V for NCHW16c's view)."""
        n_mb, ih_len, iw_len, c_len = x.shape
        _, oh_len, ow_len, _ = y.shape
        n_blocks = (c_len + V - 1) // V
        n_tiles = (ow_len + P - 1) // P
        n_bands = (oh_len + R - 1) // R
        xf = x.reshape(-1)
        yf = y.reshape(-1)
        wf = wp.reshape(-1)
        # the zero vector as an offset from x's data (QNNPACK points padding taps at it)
        gap = (np.intp(zero.ctypes.data) - np.intp(x.ctypes.data)) // 4
        # tiles whose NCOL input columns all lie inside the input (the rest: edge tiles)
        t_lo = min((pw + P * S - 1) // (P * S), n_tiles)
        t_hi = max(min(n_tiles, (iw_len - NCOL + pw) // (P * S) + 1), t_lo)
        for job in numba.prange(n_mb * n_bands):
            n = job // n_bands
            oh0 = (job - n * n_bands) * R
            nrows = min(R, oh_len - oh0)
            w0 = (n % w_groups) * n_blocks * 9 * V
            offs = np.empty((n_tiles, NROW * NCOL), np.intp)
            acc = stack_f32(RPV)
            for t in range(n_tiles):
                iw0 = t * P * S - pw
                for i in range(NROW):
                    ih = oh0 * S - ph + i
                    row = (n * ih_len + ih) * iw_len
                    if not 0 <= ih < ih_len:
                        for j in range(NCOL):
                            offs[t, i * NCOL + j] = gap
                    elif t_lo <= t < t_hi:    # interior: no column test
                        for j in range(NCOL):
                            offs[t, i * NCOL + j] = (row + iw0 + j) * c_len
                    else:
                        for j in range(NCOL):
                            inside = 0 <= iw0 + j < iw_len
                            offs[t, i * NCOL + j] = (row + iw0 + j) * c_len if inside else gap
            # BLOCKS_OUTER: a block's 9 weight vectors stay in L1 over the band's tiles (all
            # blocks' weights, 36 KiB at C = 1024, do not); else a tile's input pixels do
            for k in range(n_blocks * n_tiles):
                if BLOCKS_OUTER:
                    b, t = k // n_tiles, k % n_tiles
                else:
                    t, b = k // n_blocks, k % n_blocks
                c0 = b * V
                width = min(V, c_len - c0)
                wblk = wf[w0 + b * 9 * V:]
                npix = min(P, ow_len - t * P)
                y0 = ((n * oh_len + oh0) * ow_len + t * P) * c_len + c0
                if width == V:   # a constant trip count: one zmm iteration
                    block_tile(xf, offs[t], wblk, acc, c0, V)
                    store_tile(acc, yf, y0, ow_len * c_len, c_len, nrows, npix, V)
                else:
                    block_tile(xf, offs[t], wblk, acc, c0, width)
                    store_tile(acc, yf, y0, ow_len * c_len, c_len, nrows, npix, width)

    mode = "parallel" if parallel else "serial"
    return cached_closure(f"{key}_{mode}", parallel=parallel, fastmath=True)(dw3x3_nhwc)


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
            if sw == 1:
                # unit stride spelled out: with ``j * sw`` LLVM kept this loop scalar on the
                # AVX2 host (znver1 tuning judged the stride-versioned loop unprofitable)
                for j in range(ow_hi - ow_lo):
                    o_int[j] = (wk[0, 0] * a0[j] + wk[0, 1] * a0[j + 1]
                                + wk[0, 2] * a0[j + 2] + wk[1, 0] * a1[j]
                                + wk[1, 1] * a1[j + 1] + wk[1, 2] * a1[j + 2]
                                + wk[2, 0] * a2[j] + wk[2, 1] * a2[j + 1]
                                + wk[2, 2] * a2[j + 2])
            else:
                for j in range(ow_hi - ow_lo):
                    s = j * sw
                    o_int[j] = (wk[0, 0] * a0[s] + wk[0, 1] * a0[s + 1]
                                + wk[0, 2] * a0[s + 2] + wk[1, 0] * a1[s]
                                + wk[1, 1] * a1[s + 1] + wk[1, 2] * a1[s + 2]
                                + wk[2, 0] * a2[s] + wk[2, 1] * a2[s + 1]
                                + wk[2, 2] * a2[s + 2])
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

    def __init__(self, problem: ConvProblem, w: np.ndarray, tile: str = DEFAULT_TILE,
                 order: str = DEFAULT_ORDER):
        self.p = problem
        self.tile, self.order = tile, order
        self.kernel = nhwc_kernel(problem.sh, *tile_shape(tile), order)
        self.serial = nhwc_kernel(problem.sh, *tile_shape(tile), order, parallel=False)
        self.wp = pack_weights(np.asarray(w, np.float32))
        # what padding taps read: a whole block for NCHW16c, whose lanes index the zeros too
        self.zero = np.zeros(self.wp.shape[0] * V, np.float32)
        self.packed_weight_bytes = self.wp.nbytes
        self.workspace_bytes = self.zero.nbytes

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        kernel = self.kernel if numba.get_num_threads() > 1 else self.serial
        kernel(x, self.wp, self.zero, y, self.p.ph, self.p.pw, 1)

    def hot_kernels(self) -> tuple[object, ...]:
        return (self.kernel, self.serial)

    def info(self) -> dict[str, ParamValue]:
        return {"lanes": V, "tile": self.tile, "order": self.order,
                "compulsory_bytes": self.p.compulsory_bytes}


class DepthwiseNCHW16c(DepthwiseNHWC):
    """NCHW16c through the NHWC kernel: (N, C/V, H, W, V) viewed as N * C/V images of V
    channels (the module docstring)."""
    in_layout = out_layout = BLOCKED

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        kernel = self.kernel if numba.get_num_threads() > 1 else self.serial
        n, blocks, ih, iw, lanes = x.shape
        images = x.reshape(n * blocks, ih, iw, lanes)
        out = y.reshape(n * blocks, *y.shape[2:])
        kernel(images, self.wp, self.zero, out, self.p.ph, self.p.pw, blocks)


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
    if layout == "nchw" and (params.get("tile", DEFAULT_TILE) != DEFAULT_TILE
                             or params.get("order", DEFAULT_ORDER) != DEFAULT_ORDER):
        return "tile and order only tune the NHWC kernel"
    if layout == BLOCKED and params.get("order", DEFAULT_ORDER) != DEFAULT_ORDER:
        return f"{BLOCKED} holds one channel block per plane: the block order does not apply"
    return None


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    if layout in ("nhwc", BLOCKED):
        kind = DepthwiseNHWC if layout == "nhwc" else DepthwiseNCHW16c
        return kind(problem, w, str(params.get("tile", DEFAULT_TILE)),
                    str(params.get("order", DEFAULT_ORDER)))
    return DepthwiseNCHW(problem, w)


ALGORITHMS = [
    Algorithm(
        name="depthwise3x3",
        title="Depthwise 3x3 (all 9 taps per output in one pass)",
        source="QNNPACK (Dukhan 2018) depthwise kernel; seed 001",
        layouts=("nhwc", "nchw", BLOCKED),
        build=_build,
        applies=_applies,
        params=PARAMS,
        notes=f"NHWC weights packed [C/{V}] x KW x KH x {V}; stride 1 or 2; memory-bound: "
              "judge it by bandwidth (compulsory_bytes / time) against the roofline.",
    )
]
