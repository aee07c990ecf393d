"""Depthwise 3x3 convolution (groups = channels), QNNPACK style (seed 001; Dukhan 2018).

Rather than updating an output row once per kernel tap (9 passes over it), every output
element is produced in one pass that sums all 9 taps, so each output is written once and
each input row is read while it is still in cache.

NHWC: weights packed [C/L] x KW x KH x L (QNNPACK's layout; L = one vector register's
float32 lanes, :func:`nhwc_lanes`: 16 with AVX-512, 8 on AVX2 and NEON, as QNNPACK's NEON
kernel), zero padded to whole blocks.  A register tile of rows x pixels outputs and one
block of L channels is one call of a micro-kernel written as vector IR (:func:`tile_3x3`,
as XNNPACK writes its kernels in intrinsics): each input vector loaded once, the sums kept
in registers and stored once; padding taps read one zero vector, as in QNNPACK, so edge
pixels take the same code as interior ones.  Zen 4 host, 1 thread, page-aligned buffers,
warm: 57-98 GFLOP/s on MobileNet V1's stride-1 depthwise layers (up to 85% of the measured
peak), 30-50 on the stride-2 ones, which bring 4x the new input lines per tile, streamed
from L2 or L3 (software prefetch and larger tiles did not help).
NCHW16c and NCHW32c (NeoCPU's blocked layout with x = V or 2V): a tensor (N, C/x, H, W, x)
is N * C/x images of x channels in NHWC, image i using weight blocks (i mod C/x) * x/V
onwards, so the NHWC kernel runs it unchanged on that view: one or two channel blocks per
image, no transform between blocked 1x1 convs and the depthwise layer between them.  The
pointwise layers around MobileNet's deeper depthwise layers pick NCHW32c: while only NHWC
and NCHW16c were read here, their plans (Zen 5 host, 2 threads) paid NCHW32c -> NHWC ->
NCHW32c around them (12 of MobileNet V1's 20 transforms); with NCHW32c, re-tuned and
re-planned, V1's plan paid 3 transforms and V2's 12 instead of 23.
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
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from convbench.kernels import epilogue
from convbench.kernels._numba_support import (
    cached_closure,
    data_ptr,
    launched_build,
    stable_identity,
)
from convbench.kernels.base import ACTIVATIONS, Algorithm, Param, ParamValue, Prepared
from convbench.kernels.buffers import packed_weights, page_aligned_zeros
from convbench.spec.problem import ConvProblem

V = 16   # channels per packed weight block: one zmm register of float32
# NHWC register tiles, "rows x pixels": output pixels summed together share loaded inputs.
# Larger tiles load less per FMA but were not faster on the Zen 4 host (NCHW16c, 1 thread,
# 112 x 112 x 32 stride 1: 2 x 4 93-95 GFLOP/s, 3 x 4 and 4 x 4 73, 2 x 8 68, 1 x 16 61;
# stride 2: all 38-44).  Every layer sweeps all of them: the winner varies by layer,
# layout and threads.  Sweeping only the tiles whose pixels divide the output width (and
# 2 x 4) had dropped the winner: on the 7 x 7 stride-2 layer (conv_dw_12) NHWC 1 x 2 (three
# whole tiles and a half one per row) was the fastest own variant at 2 threads, ORT's time
# / ours 0.92 against 0.89 for the best tile of that rule (Zen 4, in-process, best of 7);
# at 1 thread NCHW16c 1 x 7 (as NeoCPU's reg_n = 7) ran 1.07-1.16x faster than 1 x 8 there.
# 2 x 2 and 1 x 1 for the stride-2 layers, where a wider tile's 4x new input per output
# does not pay for its register pressure.  MobileNet V1's four stride-2 layers, Zen 5 host,
# NHWC, ORT time / ours: in a probe process round-robin with ORT's NCHW16c kernel, at 1
# thread 2 x 2 1.00 / 0.98 / 0.91 (conv_dw_2, _4, _6) where the best swept tile had 0.99 /
# 0.94 / 0.84, and 1 x 1 0.91 on conv_dw_12 (7 x 7 outputs) against 0.82; at 2 threads 2 x 2
# 1.04 / 1.01 / 1.00 / 0.93 against 0.99 / 0.91 / 0.94 / 0.92.  In `convbench run` after
# `convbench tune` (ORT faster there than in the probe) the gain was smaller: 1 thread
# 0.89 / 0.87 / 0.91 / 0.77 against 0.90 / 0.85 / 0.79 / 0.77 before, 2 x 2 picked on three.
TILES = ("1x1", "1x2", "2x2", "1x4", "1x7", "1x8", "2x4", "2x7")
DEFAULT_TILE = "2x4"
ORDERS = ("tiles", "blocks")
FLAGS = tuple(sorted(epilogue.FASTMATH))   # the tile's multiplies and adds (LLVM flags)
BLOCKED = f"nchw{V}c"   # NCHW[x]c with x = V: one channel block per packed weight block
# the blocked layouts the NHWC kernel reads as images of x channels (x a multiple of V):
# each adds a compiled kernel per tile and stride
BLOCKS = {BLOCKED: V, f"nchw{2 * V}c": 2 * V}
DEFAULT_ORDER = "tiles"
PARAMS = (Param("tile", TILES, DEFAULT_TILE,
                "NHWC and NCHW[x]c register tile: output rows x pixels"),
          Param("order", ORDERS, DEFAULT_ORDER, "NHWC loop outside the other: tiles or "
                "channel blocks"))


def tile_shape(tile: str) -> tuple[int, int]:
    """``"2x4"`` -> (2 rows, 4 pixels)."""
    rows, pixels = tile.split("x")
    return int(rows), int(pixels)


def pack_weights(w_oihw: np.ndarray, lanes: int = V, whole: int = 1) -> np.ndarray:
    """OIHW depthwise weights (C, 1, 3, 3) -> [ceil(C/lanes)] x KW x KH x lanes, zero padded
    (to whole ``whole``-channel blocks: an NCHW[x]c image's last block)."""
    c = w_oihw.shape[0]
    unit = max(whole, lanes)
    blocks = -(-c // unit) * unit // lanes
    padded = np.zeros((blocks * lanes, 3, 3), np.float32)
    padded[:c] = w_oihw[:, 0]
    # (block, lane, kh, kw) -> (block, kw, kh, lane)
    return np.ascontiguousarray(padded.reshape(blocks, lanes, 3, 3).transpose(0, 3, 2, 1))


@intrinsic
def tile_3x3(typingctx, xp, row_len, pix, wq, zp, row_mask, col_mask, yp, y_row, y_pix,
             nrows, npix, rows, pixels, stride, lanes, act):  # pragma: no cover - codegen hook
    """One register tile of ``rows`` x ``pixels`` outputs and ``lanes`` channels: the
    kernel's micro-kernel, written as vector IR.

    Input row i of the tile starts at ``xp + i*row_len``, its column j at ``+ j*pix``; a
    tap whose row or column bit is clear in ``row_mask`` / ``col_mask`` (padding) reads the
    zero vector at ``zp`` instead, as in QNNPACK.  Weights at ``wq`` packed (kw, kh, lane);
    output pixel (r, p) goes to ``yp + r*y_row + p*y_pix`` when r < ``nrows`` and
    p < ``npix`` (the image's last band and tile may be partial).  Each input vector is
    loaded once and feeds every output that taps it (stride 1, 2 x 4: 24 loads for 72
    multiply-adds); the sums stay in registers and go straight to y.  Written as a numba
    loop over the lanes, this needed a stack tile (a store to y there made LLVM's
    vectoriser give up on the alias checks against x: scalar code), an offset table that
    did not fit the integer registers, and 8 more stores and loads per tile.  On the Zen 4
    host (1 thread, warm, page-aligned) MobileNet V1's conv_dw_1 (112 x 112 x 32) ran at 57
    GFLOP/s that way and 98 this way (NHWC, best tile of each).  Interior tiles pass full
    masks and whole tiles as constants, and the selects and store guards fold away; with
    ``pix`` a constant (NCHW16c: ``lanes``) every load is a row pointer plus a
    displacement.  The vectors are ``lanes`` wide whatever the host: LLVM splits them into
    the registers the compile width allows.  ``act``: the activation applied before the
    stores (a compile-time :mod:`convbench.kernels.epilogue` code)."""
    shape = (rows, pixels, stride, lanes, act)
    if not all(isinstance(k, types.IntegerLiteral) for k in shape):
        return None
    R, P, S, L, ACT = (k.literal_value for k in shape)
    vec_ptr = ir.VectorType(ir.FloatType(), L).as_pointer()

    def codegen(context, builder, signature, args):
        x, x_row, x_pix, w, zero, rmask, cmask, y, out_row, out_pix, n_r, n_p = args[:12]
        intp = x_row.type

        def at(ptr, row, row_len_, col, col_len):
            off = builder.add(builder.mul(ir.Constant(intp, row), row_len_),
                              builder.mul(ir.Constant(intp, col), col_len))
            return builder.bitcast(builder.gep(ptr, [off]), vec_ptr)

        def bit(mask, i):
            shifted = builder.lshr(mask, ir.Constant(mask.type, i))
            return builder.trunc(shifted, ir.IntType(1))

        zero_vec = builder.bitcast(zero, vec_ptr)
        one = ir.Constant(intp, 1)
        # w<kh><kw> at ((kw * 3 + kh) * L): the packing of pack_weights
        wv = [[builder.load(at(w, kw * 3 + kh, ir.Constant(intp, L), 0, one), align=4)
               for kw in range(3)] for kh in range(3)]
        inputs: dict[tuple[int, int], ir.Value] = {}

        def tap(i, j):
            if (i, j) not in inputs:
                inside = builder.and_(bit(rmask, i), bit(cmask, j))
                src = builder.select(inside, at(x, i, x_row, j, x_pix), zero_vec)
                inputs[i, j] = builder.load(src, align=4)
            return inputs[i, j]

        sums = {}
        for r in range(R):
            for p in range(P):
                acc = None
                for kh in range(3):
                    for kw in range(3):
                        prod = builder.fmul(wv[kh][kw], tap(r * S + kh, p * S + kw),
                                            flags=FLAGS)
                        # contraction: each add and its multiply become an FMA (not "fast":
                        # its nnan lets the epilogue's relu drop NaN, epilogue.FASTMATH)
                        acc = prod if acc is None else builder.fadd(acc, prod, flags=FLAGS)
                sums[r, p] = acc
        for (r, p), acc in sums.items():
            wanted = builder.and_(
                builder.icmp_signed("<", ir.Constant(n_r.type, r), n_r),
                builder.icmp_signed("<", ir.Constant(n_p.type, p), n_p))
            with cgutils.if_likely(builder, wanted):
                builder.store(epilogue.vector_ir(builder, acc, ACT),
                              at(y, r, out_row, p, out_pix), align=4)
        return context.get_dummy_value()

    sig = types.void(xp, row_len, pix, wq, zp, row_mask, col_mask, yp, y_row, y_pix,
                     nrows, npix, rows, pixels, stride, lanes, act)
    return sig, codegen


stable_identity(tile_3x3, "depthwise.tile_3x3")


@numba.njit(inline="always")
def _inside_bits(first, count, length):  # pragma: no cover - jitted
    """Bit i set when index first + i (i < count) lies in [0, length): which of a tile's
    input rows or columns are inside the image."""
    lo, hi = max(0, -first), min(count, length - first)
    return ((1 << hi) - (1 << lo)) if hi > lo else 0


@numba.njit(inline="always")
def _clamp(i, n):  # pragma: no cover - jitted
    return min(max(i, 0), n - 1)


@cache
def nhwc_lanes(registers: object | None = None) -> int:
    """NHWC's channels per packed weight block and tile vector on this host: one
    register's float32 lanes, 8 to 16 -- a zmm (16) with AVX-512, a ymm (8) on AVX2, two
    NEON q registers (8, as QNNPACK's kernel).  On AVX2's 16 ymm a 16-lane tile takes two
    registers a vector and the larger tiles spill: with 8 lanes the best NHWC variant of
    each of MobileNet V2's 10 depthwise layers ran 1.12-1.14x faster at equal in-run
    reference speed (1 thread, warm, Zen 3 host, geomean of two runs against one), and
    ONNX Runtime's NCHW8c time / ours in the same runs went from 1.15 to 1.21-1.37.
    NCHW16c's block is its layout's, V.  ``registers``: a
    :class:`convbench.host.RegisterFile` (default: this host's)."""
    from convbench import host

    return min(V, max(8, (registers or host.register_file()).lanes))


@cache
def nhwc_kernel(stride: int, rows: int, tile: int, order: str = DEFAULT_ORDER,
                parallel: bool = True, block: int = 0, channels: int = 0,
                lanes: int = V, act: int = epilogue.NONE):
    """The NHWC kernel for one stride and register tiles of ``rows`` x ``tile`` output pixels.

    A prange job is ``rows`` output rows of one image.  Per tile and channel block of
    ``lanes`` channels (:func:`nhwc_lanes`; V for NCHW16c), :func:`tile_3x3` sums the
    9 taps of all the tile's pixels from its NROW x NCOL input pixels (NROW =
    (rows-1)*stride + 3, NCOL = (tile-1)*stride + 3), so neighbouring pixels share
    loaded inputs (stride 1, 1 x 4: 27 loads for 36 FMAs, 2 x 4: 33 for 72, instead of
    18 loads per 9 FMAs; QNNPACK's ARM64 kernel likewise computes 3 output rows
    from 5 input rows).  Which of those input rows and columns lie inside the image is two
    bit masks, worked out per band and per tile; interior tiles take the micro-kernel
    compiled for full masks.  ``block``: x of an NCHW[x]c view (0: NHWC), whose pixels are
    x floats apart (a constant displacement in every load) rather than C.

    ``channels``: NHWC's pixel stride C compiled in as a constant (0: read from x at run
    time).  With C a run-time value the tile's input addresses need multiples of C held in
    integer registers, and they spilled: the 2 x 4 stride-2 block had 48 stack operands,
    and with C fixed MobileNet V1's conv_dw_2 / conv_dw_4 (stride 2) ran 1.12x / 1.09x faster
    (Zen 4 host, 1 thread, warm, best variant), their ``order="blocks"`` variants 1.3-1.7x.

    ``parallel=False`` compiles the same loops without prange: on 1 thread the parallel
    launch alone cost ~1.1 us a call (~7% of a 14x14 layer).

    ``order`` is the loop order inside a band: "tiles" (tiles outer, channel blocks inner)
    or "blocks".  Neither wins everywhere on the Zen 4 host: at C = 1024 (7 x 7) "tiles"
    ran 2x faster, at C = 512 (14 x 14) "blocks" up to 2x.  There a pixel is 2-4 KiB, so
    a block's input pixels all fall into one or two L1 sets (8 ways) and evict each other:
    C = 1008 or 1040 ran 1.4x faster per block than 1024.

    ``act``: an activation fused into the stores (:mod:`convbench.kernels.epilogue`)."""
    S, R, P = stride, rows, tile
    NROW, NCOL = (R - 1) * S + 3, (P - 1) * S + 3
    ROWS_ALL, COLS_ALL = (1 << NROW) - 1, (1 << NCOL) - 1
    BLOCKS_OUTER = order == "blocks"
    # every channel block whole: NCHW16c's images are one block each, and NHWC's C when
    # compiled in is whole vectors (DepthwiseNHWC); the tail call is then pruned, and
    # without it in the loop LLVM's code for the tiles ran faster (Zen 5 host, 1 thread,
    # kernels called directly, old and new in one process: MobileNet V1's conv_dw_12 /
    # conv_dw_6 / conv_dw_4, NHWC 1 x 1 7.39 -> 6.65, 14.11 -> 11.69, 34.60 -> 30.58 us)
    WHOLE = block > 0 or (channels > 0 and channels % lanes == 0)
    L = lanes
    PIX = block if block else channels   # 0: C read at run time
    # (NCHW16c's kernels keep the names they had before NCHW32c)
    key = (f"s{S}_r{R}_t{P}_{order}" + {0: "", V: "_blocked"}.get(block, f"_blocked{block}")
           + (f"_c{channels}" if channels and not block else "")
           + (f"_l{L}" if L != V else "") + epilogue.key_suffix(act))
    ACT = act

    def dw3x3_nhwc(x, wp, zero, y, ph, pw, w_groups):  # pragma: no cover - jitted
        """Image n uses weight group n % w_groups (1 for NHWC; C/x for NCHW[x]c's view).
        The image axes are read from the end: NCHW[x]c's (N, C/x, H, W, x) arrays go in as
        they are, N * C/x images (two Python reshapes a call cost ~0.24 us, 3% of
        MobileNet V1's conv_dw_12)."""
        ih_len, iw_len, c_len = x.shape[-3], x.shape[-2], x.shape[-1]
        n_mb = x.size // (ih_len * iw_len * c_len)
        oh_len, ow_len = y.shape[-3], y.shape[-2]
        n_blocks = (c_len + L - 1) // L
        n_tiles = (ow_len + P - 1) // P
        n_bands = (oh_len + R - 1) // R
        x_row, y_row = iw_len * c_len, ow_len * c_len
        zp = data_ptr(zero, 0)
        for job in numba.prange(n_mb * n_bands):
            # inside the loop: numba passes a value set before a prange to the loop's
            # outlined body as a run-time argument, so PIX would no longer fold into the
            # tile's load offsets (2 threads, Zen 4: NCHW16c 1.16-1.68x, NHWC 1.02-1.62x)
            pix = PIX if PIX else c_len
            n = job // n_bands
            oh0 = (job - n * n_bands) * R
            nrows = min(R, oh_len - oh0)
            w0 = (n % w_groups) * n_blocks
            ih0 = oh0 * S - ph
            row_mask = _inside_bits(ih0, NROW, ih_len)
            # BLOCKS_OUTER: a block's 9 weight vectors stay in L1 over the band's tiles (all
            # blocks' weights, 36 KiB at C = 1024, do not); else a tile's input pixels do
            n_outer, n_inner = (n_blocks, n_tiles) if BLOCKS_OUTER else (n_tiles, n_blocks)
            for k_out in range(n_outer):
                for k_in in range(n_inner):
                    b, t = (k_out, k_in) if BLOCKS_OUTER else (k_in, k_out)
                    c0 = b * L
                    blk = w0 + b
                    npix = min(P, ow_len - t * P)
                    iw0 = t * P * S - pw
                    # (pruned where WHOLE: it could not take NCHW16c's 5-D arrays either)
                    if not WHOLE and c_len - c0 < L:
                        _tail_block(x, wp, y, n, blk, c0, oh0, nrows, t * P, npix, S, ph, pw,
                                    ACT)
                        continue
                    col_mask = _inside_bits(iw0, NCOL, iw_len)
                    xq = data_ptr(x, ((n * ih_len + ih0) * iw_len + iw0) * c_len + c0)
                    yq = data_ptr(y, ((n * oh_len + oh0) * ow_len + t * P) * c_len + c0)
                    wq = data_ptr(wp, blk * 9 * L)
                    if row_mask == ROWS_ALL and col_mask == COLS_ALL and nrows == R and npix == P:
                        tile_3x3(xq, x_row, pix, wq, zp, ROWS_ALL, COLS_ALL, yq, y_row, pix,
                                 R, P, R, P, S, L, ACT)
                    else:
                        tile_3x3(xq, x_row, pix, wq, zp, row_mask, col_mask, yq, y_row, pix,
                                 nrows, npix, R, P, S, L, ACT)

    mode = "parallel" if parallel else "serial"
    return cached_closure(f"{key}_{mode}", parallel=parallel,
                          fastmath=epilogue.FASTMATH)(dw3x3_nhwc)


@numba.njit(fastmath=epilogue.FASTMATH, cache=True)
def _tail_block(x, wp, y, n, blk, c0, oh0, nrows, ow0, npix, stride, ph, pw,
                act):  # pragma: no cover - jitted
    """The last channel block when C is not a multiple of the lanes: its ``C - c0`` lanes of one
    tile's outputs, tap by tap (rare, so kept plain rather than fast)."""
    ih_len, iw_len, c_len = x.shape[1:]
    for r in range(nrows):
        for p in range(npix):
            oh, ow = oh0 + r, ow0 + p
            for lane in range(c_len - c0):
                acc = np.float32(0.0)
                for kh in range(3):
                    ih = oh * stride - ph + kh
                    for kw in range(3):
                        iw = ow * stride - pw + kw
                        if 0 <= ih < ih_len and 0 <= iw < iw_len:
                            acc += wp[blk, kw, kh, lane] * x[n, ih, iw, c0 + lane]
                y[n, oh, ow, c0 + lane] = epilogue.scalar(acc, act)


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
        self.block = block = BLOCKS.get(self.in_layout, 0)   # 0: NHWC
        self.lanes = lanes = V if block else nhwc_lanes()
        # C fixed at compile time where it is whole vectors (every network's depthwise
        # layer); other channel counts share one kernel per tile (no compile per C)
        self.channels = problem.ic if not block and problem.ic % lanes == 0 else 0
        self._compile(epilogue.NONE)
        self.wp = packed_weights(pack_weights(np.asarray(w, np.float32), lanes, block or 1))
        self.zero = page_aligned_zeros(lanes)   # the vector padding taps read
        self.packed_weight_bytes = self.wp.nbytes
        self.workspace_bytes = self.zero.nbytes
        self.w_groups = -(-problem.ic // block) if block else 1

    def _compile(self, act: int) -> None:
        shape = (self.p.sh, *tile_shape(self.tile), self.order)
        self.kernel = nhwc_kernel(*shape, block=self.block, channels=self.channels,
                                  lanes=self.lanes, act=act)
        self.serial = nhwc_kernel(*shape, parallel=False, block=self.block,
                                  channels=self.channels, lanes=self.lanes, act=act)
        # built in the worker, under the threads it runs with: numba.get_num_threads()
        # costs ~0.5 us a call (Zen 5 host), 6% of MobileNet V1's conv_dw_12 at 1 thread
        self.launch = launched_build(lambda parallel: self.kernel if parallel else self.serial)

    def fuse_activation(self, kind: str) -> bool:
        self._compile(epilogue.CODES[kind])
        return True

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        if self.channels and x.shape[3] != self.channels:
            raise ValueError(f"x has {x.shape[3]} channels; the kernel was built for "
                             f"{self.channels}")
        self.launch(x, self.wp, self.zero, y, self.p.ph, self.p.pw, self.w_groups)

    def hot_kernels(self) -> tuple[object, ...]:
        return (self.kernel, self.serial)

    def info(self) -> dict[str, ParamValue]:
        return {"lanes": self.lanes, "tile": self.tile, "order": self.order,
                "compulsory_bytes": self.p.compulsory_bytes}


class DepthwiseNCHW16c(DepthwiseNHWC):
    """NCHW16c through the NHWC kernel: (N, C/V, H, W, V) read as N * C/V images of V
    channels (the module docstring)."""
    in_layout = out_layout = BLOCKED


class DepthwiseNCHW32c(DepthwiseNHWC):
    """NCHW32c through the NHWC kernel: N * C/32 images of two channel blocks each."""
    in_layout = out_layout = f"nchw{2 * V}c"


class DepthwiseNCHW(Prepared):
    in_layout = out_layout = "nchw"

    def __init__(self, problem: ConvProblem, w: np.ndarray):
        self.p = problem
        self.w = packed_weights(np.asarray(w, np.float32)[:, 0])   # (C, 3, 3)

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        _dw3x3_nchw(x, self.w, y, *_strides(self.p))

    def hot_kernels(self) -> tuple[object, ...]:
        return (_dw3x3_nchw,)

    def info(self) -> dict[str, ParamValue]:
        return {"compulsory_bytes": self.p.compulsory_bytes}


# the layouts the NHWC kernel runs, by its classes
_TILED = {kind.in_layout: kind for kind in (DepthwiseNHWC, DepthwiseNCHW16c, DepthwiseNCHW32c)}


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
    if layout in BLOCKS and params.get("order", DEFAULT_ORDER) != DEFAULT_ORDER:
        return f"{layout} holds one or two channel blocks per plane: the block order does not apply"
    return None


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    kind = _TILED.get(layout)
    if kind is not None:
        return kind(problem, w, str(params.get("tile", DEFAULT_TILE)),
                    str(params.get("order", DEFAULT_ORDER)))
    return DepthwiseNCHW(problem, w)


ALGORITHMS = [
    Algorithm(
        name="depthwise3x3",
        title="Depthwise 3x3 (all 9 taps per output in one pass)",
        source="QNNPACK (Dukhan 2018) depthwise kernel; seed 001",
        layouts=("nhwc", "nchw", *BLOCKS),
        build=_build,
        applies=_applies,
        params=PARAMS,
        epilogues=lambda problem, layout: ACTIVATIONS if layout in _TILED else frozenset(),
        notes="NHWC weights packed [C/lanes] x KW x KH x lanes (lanes: one vector register's "
              f"float32, 8 to 16), NCHW{V}c's and NCHW{2 * V}c's [C/{V}] x KW x KH x {V}; "
              "stride 1 or 2; "
              "memory-bound: judge it by bandwidth (compulsory_bytes / time) against the roofline.",
    )
]
