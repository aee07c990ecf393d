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
from functools import cache

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from convbench.kernels.base import Algorithm, Param, ParamValue, Prepared
from convbench.kernels.gemm import f32_at, stable_identity, stack_f32
from convbench.spec.problem import ConvProblem

V = 16   # channels per packed weight block: one zmm register of float32
# Output pixels of a row summed together per register tile (NHWC): they share loaded input
# columns; 4 and 8 pixels keep 4-8 accumulators + 9 weights in the 32 zmm registers.
TILES = (4, 8)
DEFAULT_TILE = 4
PARAMS = (Param("tile", TILES, DEFAULT_TILE, "output pixels per NHWC register tile"),)


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


@intrinsic
def store_lanes(typingctx, dst, offset, src, src_offset, n):  # pragma: no cover - codegen
    """``dst[offset : offset + n] = src[src_offset : src_offset + n]`` as ONE vector load and
    store of ``n`` (a compile-time constant) float32: ``src`` is a :func:`stack_f32` buffer.

    numba leaves LLVM's SLP vectoriser off, and a copy loop of 16 lanes is fully unrolled
    before the loop vectoriser runs: it came out as 16 scalar moves per output vector (or a
    ``memcpy`` call when the count was not a constant)."""
    if not (isinstance(n, types.IntegerLiteral) and isinstance(dst, types.Array)
            and dst.dtype == types.float32):
        return None
    count = n.literal_value

    def codegen(context, builder, signature, args):
        arr = context.make_array(signature.args[0])(context, builder, value=args[0])
        off = context.cast(builder, args[1], signature.args[1], types.intp)
        src_off = context.cast(builder, args[3], signature.args[3], types.intp)
        vec = ir.VectorType(ir.FloatType(), count).as_pointer()
        value = builder.load(builder.bitcast(builder.gep(args[2], [src_off]), vec), align=4)
        builder.store(value, builder.bitcast(builder.gep(arr.data, [off]), vec), align=4)
        return context.get_dummy_value()

    return types.void(dst, offset, src, src_offset, n), codegen


stable_identity(store_lanes, "depthwise.store_lanes")


@cache
def nhwc_kernel(stride: int, tile: int):
    """The NHWC kernel for one stride and ``tile`` output pixels per register tile.

    Per output row (the prange job) it first resolves, for every tile of ``tile`` pixels,
    the element offsets of the 3 x NCOL input pixels the tile reads (NCOL = (tile-1)*stride
    + 3), padding ones pointing at the zero vector; then, per channel block and tile, one
    loop over the V lanes sums the 9 taps of all the tile's pixels.  LLVM vectorises that
    loop into one zmm iteration: 9 weight loads, 3 x NCOL input loads and 9 * tile FMAs,
    so neighbouring pixels share the loaded input columns (stride 1, tile 4: 27 loads for
    36 FMAs instead of 18 per pixel).  Results go to a stack tile first: storing to ``y``
    in that loop would need a runtime alias check against every input offset (over LLVM's
    limit of 8 checks: no vectorisation at all)."""
    S, P = stride, tile
    NCOL = (P - 1) * S + 3
    PV = P * V
    name = f"depthwise.nhwc.s{S}.t{P}"

    @numba.njit(fastmath=True, cache=True, inline="always")
    def block_tile(x, offs, wblk, acc, c0, width):  # pragma: no cover - jitted
        """acc[p*V + l] = sum of the 9 taps of tile pixel p, lane l (channel c0 + l)."""
        for lane in range(width):
            c = c0 + lane
            # weights packed (kw, kh, lane): w<kh><kw>
            w00, w10, w20 = wblk[lane], wblk[V + lane], wblk[2 * V + lane]
            w01, w11, w21 = wblk[3 * V + lane], wblk[4 * V + lane], wblk[5 * V + lane]
            w02, w12, w22 = wblk[6 * V + lane], wblk[7 * V + lane], wblk[8 * V + lane]
            for p in range(P):
                j = p * S
                acc[p * V + lane] = (
                    w00 * f32_at(x, offs[j] + c) + w01 * f32_at(x, offs[j + 1] + c)
                    + w02 * f32_at(x, offs[j + 2] + c)
                    + w10 * f32_at(x, offs[NCOL + j] + c)
                    + w11 * f32_at(x, offs[NCOL + j + 1] + c)
                    + w12 * f32_at(x, offs[NCOL + j + 2] + c)
                    + w20 * f32_at(x, offs[2 * NCOL + j] + c)
                    + w21 * f32_at(x, offs[2 * NCOL + j + 1] + c)
                    + w22 * f32_at(x, offs[2 * NCOL + j + 2] + c))

    stable_identity(block_tile, f"{name}.block_tile")

    @numba.njit(fastmath=True, cache=True, inline="always")
    def store_tile(acc, y, y0, c_len, npix, width):  # pragma: no cover - jitted
        """The tile's first ``npix`` pixels, ``width`` lanes each, to y[y0 + p*c_len + l]."""
        if width == V:
            for p in range(npix):
                store_lanes(y, y0 + p * c_len, acc, p * V, V)
        else:
            for p in range(npix):
                out = y[y0 + p * c_len:]
                for lane in range(width):
                    out[lane] = acc[p * V + lane]

    stable_identity(store_tile, f"{name}.store_tile")

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def dw3x3_nhwc(x, wp, zero, y, ph, pw):  # pragma: no cover - jitted
        n_mb, ih_len, iw_len, c_len = x.shape
        _, oh_len, ow_len, _ = y.shape
        n_blocks = wp.shape[0]
        n_tiles = (ow_len + P - 1) // P
        xf = x.reshape(-1)
        yf = y.reshape(-1)
        wf = wp.reshape(-1)
        # the zero vector as an offset from x's data (QNNPACK points padding taps at it)
        gap = (np.intp(zero.ctypes.data) - np.intp(x.ctypes.data)) // 4
        for job in numba.prange(n_mb * oh_len):
            n = job // oh_len
            oh = job - n * oh_len
            offs = np.empty((n_tiles, 3 * NCOL), np.intp)
            for t in range(n_tiles):
                for kh in range(3):
                    ih = oh * S - ph + kh
                    for j in range(NCOL):
                        iw = t * P * S - pw + j
                        inside = 0 <= ih < ih_len and 0 <= iw < iw_len
                        offs[t, kh * NCOL + j] = (((n * ih_len + ih) * iw_len + iw) * c_len
                                                  if inside else gap)
            acc = stack_f32(PV)
            for t in range(n_tiles):
                npix = min(P, ow_len - t * P)
                for b in range(n_blocks):
                    c0 = b * V
                    width = min(V, c_len - c0)
                    wblk = wf[b * 9 * V:]
                    y0 = (job * ow_len + t * P) * c_len + c0
                    if width == V:   # a constant trip count: one zmm iteration
                        block_tile(xf, offs[t], wblk, acc, c0, V)
                        store_tile(acc, yf, y0, c_len, npix, V)
                    else:
                        block_tile(xf, offs[t], wblk, acc, c0, width)
                        store_tile(acc, yf, y0, c_len, npix, width)

    return stable_identity(dw3x3_nhwc, name)


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

    def __init__(self, problem: ConvProblem, w: np.ndarray, tile: int = DEFAULT_TILE):
        self.p = problem
        self.tile = tile
        self.kernel = nhwc_kernel(problem.sh, tile)
        self.wp = pack_weights(np.asarray(w, np.float32))
        self.zero = np.zeros(problem.ic, np.float32)   # what padding taps read
        self.packed_weight_bytes = self.wp.nbytes
        self.workspace_bytes = self.zero.nbytes

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        self.kernel(x, self.wp, self.zero, y, self.p.ph, self.p.pw)

    def hot_kernels(self) -> tuple[object, ...]:
        return (self.kernel,)

    def info(self) -> dict[str, ParamValue]:
        return {"lanes": V, "tile": self.tile, "compulsory_bytes": self.p.compulsory_bytes}


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
    if layout == "nchw" and params.get("tile", DEFAULT_TILE) != DEFAULT_TILE:
        return "tile only tunes the NHWC kernel"
    return None


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    if layout == "nhwc":
        return DepthwiseNHWC(problem, w, int(params.get("tile", DEFAULT_TILE)))
    return DepthwiseNCHW(problem, w)


ALGORITHMS = [
    Algorithm(
        name="depthwise3x3",
        title="Depthwise 3x3 (all 9 taps per output in one pass)",
        source="QNNPACK (Dukhan 2018) depthwise kernel; seed 001",
        layouts=("nhwc", "nchw"),
        build=_build,
        applies=_applies,
        params=PARAMS,
        notes=f"NHWC weights packed [C/{V}] x KW x KH x {V}; stride 1 or 2; memory-bound: "
              "judge it by bandwidth (compulsory_bytes / time) against the roofline.",
    )
]
