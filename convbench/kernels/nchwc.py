"""Blocked NCHW[x]c convolution (NeoCPU, Liu et al. 2019; seed 002, Algorithm 1).

Activations NCHW[x]c: (N, C/x, H, W, x); weights KCRS[x]c[y]k: (K/y, C/x, R, S, x, y);
see :mod:`convbench.kernels.layouts`.  Parameters, named as in the paper:

- ``ic_bn`` (x): input channels per block, the innermost reduction step;
- ``oc_bn`` (y): output channels per block, the vector lanes of every accumulator;
- ``reg_n``: output-width positions held in accumulators at once (reg_n x oc_bn floats:
  reg_n * ceil(oc_bn / lanes) vector registers: 16 lanes a zmm, 4 a NEON q register);
- ``unroll_ker``: the kernel's R x S loop bounds compiled in (LLVM may then unroll them);
- ``oc_blocks`` (not the paper's: MLAS's FilterCount): output blocks one register tile
  spans, reg_n x (oc_blocks x oc_bn) accumulators writing oc_blocks NCHW[oc_bn]c blocks;
  the weights are packed with y = oc_blocks x oc_bn.  The layout keeps its block while the
  tile grows: at oc_bn = 16 each broadcast input feeds one FMA and reg_n FMAs share a
  weight load, which MobileNet V2's 1x1 layers paid for (see :func:`tuning_space`).  A
  layer of 16 output channels has no wider tile: on the Zen 5 host (1 thread, one
  process, ic_bn 8-32 x reg_n 8-28) its 1x1 convs ran at 164-207 GFLOP/s, at best 190, 198
  and 207 (0.78-0.85 of the peak) with 32, 64 and 128 input channels, and at 32 the same
  whether the input fitted L2 (56 x 56) or not (112 x 112); the hot loop is the intended 16
  FMAs per channel, each with its {1to16} broadcast input, no spill.
  :mod:`~convbench.kernels.gemm1x1`'s 8 x 48 tile ran MobileNet V2's expanded_conv_project
  (32 -> 16) at 198-201 there.

For every (image, output-channel block, output row) -- the parallel loop -- and every
reg_n-wide run of the row, the accumulators sum over input-channel blocks, kernel taps and
the ic_bn channels of a block: one broadcast input value times an oc_bn-wide weight vector
per accumulator; the tile is written once at the end.  Channels are zero padded to whole
blocks; where the layer pads, the tiles whose taps all lie inside the input read it in
place and the others -- along the border, and a run of the row past its right edge,
computed in full and only its valid positions written -- read a zero-bordered buffer
(allocated in build, its border written once; each call copies into it only what they
read, :class:`BorderPlan`), so the inner loops need no bounds checks.  A layer with no
border to add (unpadded ones whose reg_n runs end at the row's edge) reads the caller's
input in place.  A pointwise layer (1x1, stride 1, unpadded) is
tiled along its whole H x W plane instead of along rows -- a channel block's pixels are one
contiguous run on both sides -- with a tile of its own for the plane's remainder, so a 7 x 7
plane takes 6-wide tiles and a 1-wide tail, not 7-wide rows; it reads in place.  A strided
1x1 layer (ResNet's projection shortcuts) first gathers the pixels it reads into a plane of
their own (1/stride^2 of its input) and then runs as a pointwise one; a strided layer whose
rows reg_n does not divide gathers a plane per kernel tap and sums over taps as over
channel blocks (:func:`plane_tiled` says which layers, and why).

Vectorisation (read with :mod:`convbench.kernels.asm`). The tile is a stack buffer
accessed only as whole LLVM vectors at constant offsets (:mod:`~convbench.kernels.
register_tile`, shared with the GEMM's micro-kernel), so SROA promotes it to registers. On
the Zen 4 host at 512 bits every (reg_n, oc_bn) that fits the register file compiled to
reg_n * oc_bn / 16 packed zmm ``vfmadd231ps`` per input channel (embedded ``{1to16}``
broadcast of the input value, or a ``vbroadcastss``), no scalar FP and no accumulator
spill in the loop (7 x 32: 14 zmm accumulators, 28 FMAs per two channels), 110-115 GFLOP/s
of the ~117 peak on ResNet-50's 3x3 layers. Written as numba loops instead, the same tile
compiled to scalar FMAs or gathers (2.6-7 GFLOP/s): LLVM fully unrolls a 16- or 32-lane
loop of constant trip count before the loop vectoriser sees it (the NR = 32 trap of
:mod:`convbench.kernels.gemm`). On aarch64 (numba's code for a Neoverse N1 under
tools/arm64.sh) the same intrinsics compile to reg_n * oc_bn / 4 ``fmla v.4s`` per input
channel, no scalar FP; the parameter domains there are the 4-lane ones (OC_BN, REG_N
below). On an AVX2-only x86 host (16 ymm of 8 lanes, :data:`convbench.host.YMM`) a 16-lane
row takes two registers: the domains there are the 8-lane ones, and the zmm grid's tiles
of 16-28 accumulators spill. Tiles over the register file
(:meth:`convbench.host.RegisterFile.tile_unfit`) spill (16 x 32 on zmm: 40-90 GFLOP/s; 28
x 32: 15-65) and are skipped with a reason.

The in/out layouts are "nchw{ic_bn}c"/"nchw{oc_bn}c": the harness converts outside the
timed region, and :func:`layout_transform_seconds` measures those conversions on their
own (also recorded in ``info()``) so a user sees when blocking pays for itself.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import numba
import numpy as np

from convbench import host
from convbench.kernels import epilogue, layouts
from convbench.kernels._numba_support import cached_closure, closure_mode, launched_build
from convbench.kernels.base import ACTIVATIONS, Algorithm, Ints, Param, ParamValue, Prepared
from convbench.kernels.buffers import packed_weights, page_aligned_zeros
from convbench.kernels.register_tile import MIN_CHAINS, tile_fma, tile_store_blocks, tile_zero
from convbench.spec.problem import ConvProblem

# The register file the tiles are planned for: 32 zmm of 16 float32 lanes on x86, 32 NEON
# q registers of 4 lanes on aarch64 (convbench.host.register_file).  An accumulator row of
# oc_bn lanes takes ceil(oc_bn / LANES) registers.
REGISTERS = host.register_file()
LANES = REGISTERS.lanes
IC_BN = (8, 16)
if REGISTERS.lanes >= 16:
    OC_BN = (16, 32)
    # 7 divides every output width of the shipped networks (224, 112, 56, 28, 14, 7): no
    # idle accumulators; 8/16/28 show what a power of two or a wider tile costs on them.
    REG_N = (4, 7, 8, 14, 16, 28)
    DEFAULT_IC_BN, DEFAULT_OC_BN, DEFAULT_REG_N = 16, 32, 7
elif REGISTERS.lanes == 8:
    # AVX2's 16 ymm: a row of oc_bn = 8 is one register, so 12 x 8 is the widest tile (12
    # accumulators; 14 x 8 fitted in Zen 1's code, spilled in Zen 3's); 6 x 16 (12) has each
    # broadcast feed two FMAs; 7 x 16 spills (host.YMM).  14 shows the skip on AVX2.
    OC_BN = (8, 16)
    REG_N = (4, 6, 7, 8, 12, 14)
    DEFAULT_IC_BN, DEFAULT_OC_BN, DEFAULT_REG_N = 16, 16, 6
else:
    # 4-lane NEON: oc_bn = 8 or 16 is 2 or 4 registers a row, so a tile of 14-24
    # accumulators has 4-12 positions (the zmm grid's 7 x 32 needs 56: spills, 65 reloads
    # in its loop).  6 x 16 is the default: 24 accumulators (no reload), each broadcast
    # input feeding 4 FMAs and each weight vector 6; 7 x 8 keeps the divides-every-width
    # 7 at 14 accumulators; 7 x 16 and 12 x 16 show the skip of a tile that does not fit.
    OC_BN = (8, 16)
    REG_N = (4, 6, 7, 12)
    DEFAULT_IC_BN, DEFAULT_OC_BN, DEFAULT_REG_N = 16, 16, 6
# The R x S bounds compiled in made no measurable difference (LLVM keeps the ic loop as
# the hot loop either way): True stays available to a suite's sweep.params.
UNROLL_KER = (False,)
# reg_n's bound for a suite: a reg_n past the zmm budget fits no register file at any oc_bn
REG_N_BOUND = host.ZMM.accumulators
# At most this many candidates per layer: successive halving measures every one briefly,
# and the factor space alone reached 686 on a 64-channel 56x56 layer (7 ic_bn x 7 oc_bn x
# 7 reg_n x 2 unroll_ker); the 200 of net_suite's 16-channel 8x8 3x3 layer took 5 minutes
# to tune on the loaded 2-core host.
SPACE_CAP = 100
# The widest tile oc_blocks may make: four registers a row, as MLAS's NCHWc kernels hold
# four filter blocks of one register each.
SPAN_LANES = 4 * LANES


def _key(rows: int, oc_bn: int, ic_bn: int, sw: int, kh_fixed: int, kw_fixed: int,
         act: int = epilogue.NONE, add: bool = False, blocks: int = 1) -> str:
    """The compile-time constants of a tile and of the row kernel around it, as a name."""
    return (f"r{rows}_oc{oc_bn}" + (f"x{blocks}" if blocks > 1 else "")
            + f"_ic{ic_bn}_sw{sw}_k{kh_fixed}x{kw_fixed}" + epilogue.key_suffix(act, add))


@cache
def _tile(rows: int, oc_bn: int, ic_bn: int, sw: int, kh_fixed: int, kw_fixed: int,
          act: int = epilogue.NONE, add: bool = False, blocks: int = 1):
    """One rows x (blocks x oc_bn) output tile: sum over ic blocks, kernel taps and the
    ic_bn channels of a block, then one write of its ``valid`` rows into ``blocks`` output
    channel blocks ``y_block`` elements apart, added to what they hold when ``add`` (a
    fused residual add), activation ``act`` applied (:mod:`convbench.kernels.epilogue`;
    kh_fixed = kw_fixed = 0: the taps are runtime loops).

    The width stride is constant so the input reads of one FMA step sit at constant
    distances from one pointer (x86 addressing has no room for a runtime stride times 28).

    Inlined into the row and plane kernels by numba, not left to LLVM: with a fused relu
    LLVM kept it a call, one per tile, and VGG-16's conv1_1 (ic_bn = 1, oc_bn = 64, reg_n =
    4, Zen 5 host, 1 thread) took 1.35 ms against 0.84 plain with its output evicted first;
    inlined, 1.03-1.17 against 1.07-1.10 in one run, and ResNet-50's 49 fusing convs summed
    1-2% less, plain and fused (alternating A/B runs).
    """
    ROWS, OC_BN, IC_BN, ACT, ADD, BLOCKS = rows, oc_bn, ic_bn, act, add, blocks
    OC_T = oc_bn * blocks        # the tile's output channels: its accumulator rows' lanes
    X_STEP = sw * ic_bn          # elements between the inputs of neighbouring outputs
    W_TAP = ic_bn * OC_T         # elements of one kernel tap of one (oc, ic) block pair

    def tile(xp, x0, w, w0, y, y0, y_block, valid, icb_len, kh_len, kw_len, x_icb, x_kh,
             x_kw):  # pragma: no cover - jitted
        if kh_fixed:
            kh_len, kw_len = kh_fixed, kw_fixed
        acc = tile_zero(ROWS, OC_T)
        for icb in range(icb_len):
            for kh in range(kh_len):
                for kw in range(kw_len):
                    xb = x0 + icb * x_icb + kh * x_kh + kw * x_kw
                    wb = w0 + ((icb * kh_len + kh) * kw_len + kw) * W_TAP
                    for ic in range(IC_BN):
                        tile_fma(acc, xp, xb + ic, X_STEP, w, wb + ic * OC_T, ROWS, OC_T)
        tile_store_blocks(acc, y, y0, OC_BN, y_block, valid, ROWS, OC_T, BLOCKS, ADD, ACT)

    return cached_closure(_key(rows, oc_bn, ic_bn, sw, kh_fixed, kw_fixed, act, add, blocks),
                          fastmath=True, inline="always")(tile)


@numba.njit(inline="always", cache=True)
def _job_place(job, ocb_len, inner, ocb_chunk):  # pragma: no cover - jitted
    """(image, output block, inner index) of parallel job ``job``, the jobs ordered by
    image, then run of ``ocb_chunk`` output blocks (the last run shorter where they do not
    divide), then the ``inner`` index (an output row, or a group of plane tiles), then the
    block within the run: a run's weights stay in L2 while its rows or tiles sweep the
    input (:func:`ocb_chunk`)."""
    n, rest = job // (ocb_len * inner), job % (ocb_len * inner)
    run0 = rest // (ocb_chunk * inner) * ocb_chunk
    run_len = min(ocb_chunk, ocb_len - run0)
    within = rest - run0 * inner
    return n, run0 + within % run_len, within // run_len


@cache
def _kernel(reg_n: int, oc_bn: int, ic_bn: int, sw: int, kh_fixed: int, kw_fixed: int,
            act: int = epilogue.NONE, add: bool = False, blocks: int = 1,
            parallel: bool = True):
    """The kernel with the tile (reg_n x oc_bn), ic_bn, the width stride and, when
    unrolled, the kernel size compiled in (kh_fixed = kw_fixed = 0: runtime loops): tiles
    along each output row, the last one computed in full past the row's edge.

    A tile of an inner row (``oh_lo`` <= oh < ``oh_hi``) among the inner tiles (``t_lo`` <=
    tile < ``t_hi``) -- every tap of every pixel inside the input -- reads the caller's
    ``x`` in place; every other tile reads ``xp``, the zero-bordered copy, where
    :func:`_into_strips` put what those tiles read (:class:`BorderPlan`).  ``parallel``
    False: the same loops serial, for one thread (_numba_support.launched_build)."""
    REG_N, OC_BN, IC_BN, BLOCKS = reg_n, oc_bn, ic_bn, blocks
    X_STEP = sw * ic_bn
    W_TAP = ic_bn * oc_bn * blocks
    tile = _tile(reg_n, oc_bn, ic_bn, sw, kh_fixed, kw_fixed, act, add, blocks)

    def conv(x, xp, w, y, sh, ph, pw, dh, dw, ocb_chunk, oh_lo, oh_hi, t_lo,
             t_hi):  # pragma: no cover - jitted
        n_mb, icb_len, hp, wp, _ = xp.shape
        ih, iw = x.shape[2], x.shape[3]
        ocb_len, _, kh_len, kw_len, _, _ = w.shape   # tiles of BLOCKS output blocks
        _, y_blocks, oh_len, ow_len, _ = y.shape
        y_block = oh_len * ow_len * OC_BN
        ow_blocks = -(-ow_len // REG_N)
        xp_icb, xp_kh = hp * wp * IC_BN, (dh + 1) * wp * IC_BN
        x_icb, x_kh = ih * iw * IC_BN, (dh + 1) * iw * IC_BN
        x_kw = (dw + 1) * IC_BN
        w_ocb = icb_len * kh_len * kw_len * W_TAP
        for job in numba.prange(n_mb * ocb_len * oh_len):
            n, ocb, oh = _job_place(job, ocb_len, oh_len, ocb_chunk)
            xp_row = (n * icb_len * hp + oh * sh) * wp * IC_BN
            # the row's first input row in x (used only when the row is inner)
            x_row = ((n * icb_len * ih + oh * sh - ph) * iw - pw) * IC_BN
            inner = oh_lo <= oh < oh_hi
            y_row = ((n * y_blocks + ocb * BLOCKS) * oh_len + oh) * ow_len * OC_BN
            for owb in range(ow_blocks):
                ow0 = owb * REG_N
                # one call site of the inlined tile, its source chosen: two (one per
                # source) ran the stems 5-8% slower than the tile on the copy alone
                in_place = inner and t_lo <= owb < t_hi
                src = x if in_place else xp
                tile(src, (x_row if in_place else xp_row) + ow0 * X_STEP, w, ocb * w_ocb,
                     y, y_row + ow0 * OC_BN, y_block, min(REG_N, ow_len - ow0), icb_len,
                     kh_len, kw_len, x_icb if in_place else xp_icb,
                     x_kh if in_place else xp_kh, x_kw)

    key = _key(reg_n, oc_bn, ic_bn, sw, kh_fixed, kw_fixed, act, add, blocks)
    return cached_closure(closure_mode(key, parallel), parallel=parallel, fastmath=True)(conv)


def plane_tiled(problem: ConvProblem, reg_n: int) -> bool:
    """Whether the kernel tiles the layer's H x W output plane (:func:`_plane_kernel`)
    rather than its rows: a 1x1 unpadded layer, any stride (every output pixel reads one
    input pixel: in place, or, strided, from the plane its pixels are gathered into), and a
    strided layer whose rows reg_n does not divide (its taps gathered, :func:`_gather_taps`).

    Measured on the Zen 3 host, 1 thread, both kinds built in one process and timed
    round-robin, best of each over 6-8 (ic_bn, oc_bn, reg_n): the plane over the rows on
    ResNet-50's strided 1x1 layers 1.26x (res3a_branch1, rows of 28), 1.50x (res4a, 14),
    1.76x (res5a, 7); on its stride-2 3x3 layers of 14- and 7-wide rows 1.16-1.18x (rows of
    6 or 4 leave idle accumulators there), while on res3a_branch2b (rows of 28, which 4
    divides) rows won 1.13x, and on the stride-1 3x3 layers (7-28 wide) the two were within
    3%: a gathered plane per tap is 9x their input, so rows keep those.  Tuned (`convbench
    tune`, both thread counts and cache modes), nchwc now runs all three strided 1x1 layers
    fastest of the own kernels; the indirect GEMM still takes the stride-2 3x3 ones."""
    p = problem
    if p.g != 1:
        return False
    return _reads_one_pixel(p) or (_strided(p) and p.ow % reg_n != 0)


# A tile width the grid lacks joins a plane-tiled layer's sweep only where the grid's
# best leaves at least this many more FMA issue slots than it (plane_reg_ns): nearer
# than 5% is within one run's noise on these hosts.
PLANE_GAIN = 1.05


def issue_slots(pixels: int, reg_n: int, vectors: int) -> int:
    """FMA issue slots per input channel of a plane of ``pixels`` tiled by reg_n x
    ``vectors`` register tiles and a tail tile for the rest: each tile takes its
    accumulators' slots, or :data:`MIN_CHAINS` where it has fewer (it then waits on its own
    FMAs' latency).  A 7 x 7 plane at 2 registers a row (AVX2's oc_bn = 16): reg_n = 6
    makes 8 tiles of 12 and a 1-pixel tail of 2 waiting out 8 (104 slots for 98 FMAs),
    reg_n = 5 9 tiles of 10 and a tail of 8 (98)."""
    full, tail = divmod(pixels, reg_n)
    slots = full * max(reg_n * vectors, MIN_CHAINS)
    return slots + (max(tail * vectors, MIN_CHAINS) if tail else 0)


def plane_reg_ns(problem: ConvProblem) -> tuple[int, ...]:
    """Tile widths the sweep adds on a layer whose tiles run along its H x W plane (a
    1x1 unpadded or a strided layer, :func:`plane_tiled`): per OC_BN block, the fitting
    reg_n with the fewest :func:`issue_slots` (the most accumulators among equals) where
    REG_N's best takes :data:`PLANE_GAIN` times more.

    REG_N's widths divide the rows of the shipped networks, not their planes: a 7 x 7
    plane leaves AVX2's 6 x 16 a 1-pixel tail.  Zen 3 host, 1 thread, warm, one run with
    ONNX Runtime: at reg_n = 5 the 7 x 7 pointwise layers of ResNet-50 and MobileNet ran
    at 0.94-0.96 of peak against 0.89-0.91 at 6 (res5a_branch2c 1.081 vs 1.133 ms, ONNX
    Runtime's NCHW8c 1.147), res5a_branch1 (stride 2) 2.440 ms against 2.731."""
    p = problem
    if p.g != 1 or not (_reads_one_pixel(p) or _strided(p)):
        return ()
    pixels = p.oh * p.ow
    added = []
    for oc_bn in OC_BN:
        vectors = REGISTERS.vectors(oc_bn)
        fitting = [r for r in range(1, min(pixels, REG_N_BOUND) + 1)
                   if REGISTERS.tile_unfit(r, oc_bn) is None]
        grid = [issue_slots(pixels, r, vectors) for r in REG_N if r in fitting]
        best = min(fitting, key=lambda r: (issue_slots(pixels, r, vectors), -r))
        if not grid or min(grid) >= PLANE_GAIN * issue_slots(pixels, best, vectors):
            added.append(best)
    return tuple(sorted(set(added) - set(REG_N)))


def _reads_one_pixel(problem: ConvProblem) -> bool:
    """1x1 and unpadded: each output pixel reads the one input pixel under it (any stride)."""
    return (problem.kh, problem.kw, problem.ph, problem.pw) == (1, 1, 0, 0)


def _strided(problem: ConvProblem) -> bool:
    return problem.sh > 1 or problem.sw > 1


@numba.njit(parallel=True, cache=True)
def _gather_taps(x, xs, kh_len, kw_len, sh, sw, ph, pw, dh, dw):  # pragma: no cover - jitted
    """xs[n, c, (r * kw_len + s) * oh + i, j] = x[n, c, i * sh - ph + r * (dh + 1),
    j * sw - pw + s * (dw + 1)]: per channel block and kernel tap, the input pixels the
    layer's output plane reads, one contiguous plane (a channel block per parallel job);
    pixels in the zero border are never written (xs was allocated zeroed).

    Flat unsigned offsets, each row's in-bounds columns worked out before its loop: numba
    checks every signed index for wrap-around, and per pixel its slice copy
    (``xs[..., j, :] = x[..., wi, :]``) cost more than the 32 bytes it moved.
    res5a_branch2b (14 x 14 x 512, 3x3 stride 2: 903 KB gathered), Zen 3 host, the three
    alternating in 10 rounds (median of each round's best of 50): 287 us that way (about
    8% of the call), 151 us this way, 32 us for a copy of the same bytes at 1 thread; 151 /
    82 / 31 us at 2."""
    n_mb, icb_len, rows, ow, cb = xs.shape
    _, _, ih, iw, _ = x.shape
    oh = rows // (kh_len * kw_len)
    src, dst = x.ravel(), xs.ravel()
    for block in numba.prange(n_mb * icb_len):   # an (image, channel block) pair
        src0, dst0 = block * ih * iw * cb, block * rows * ow * cb
        for row in range(rows):
            r, s = (row // oh) // kw_len, (row // oh) % kw_len
            hi = (row % oh) * sh - ph + r * (dh + 1)
            if 0 <= hi < ih:
                off = s * (dw + 1) - pw           # the input column of output column 0
                j0 = 0 if off >= 0 else (sw - 1 - off) // sw
                j1 = min(ow, (iw - off + sw - 1) // sw)
                for j in range(j0, j1):
                    at = numba.uint64(src0 + (hi * iw + j * sw + off) * cb)
                    to = numba.uint64(dst0 + (row * ow + j) * cb)
                    for c in range(numba.uint64(cb)):
                        dst[to + c] = src[at + c]


@numba.njit(parallel=True, cache=True)
def _into_strips(x, xp, ph, pw, full_rows, col_l, col_r):  # pragma: no cover - jitted
    """Of xp[n, c, ph + i, pw:pw + iw] = x[n, c, i], what the row kernel reads from the
    zero-bordered copy (:class:`BorderPlan`): the whole of each input row marked in
    ``full_rows``, of the others their first ``col_l`` and their columns from ``col_r``
    on; rows shared among the threads (numpy's slice copy ran on one thread: 36 us of
    res3a_branch2b's 559 at 2 threads, Zen 5 host, where the kernel's own work splits in
    two).  The border, written once in build, is never touched, nor is what the kernel
    reads in place."""
    n_mb, icb_len, ih, iw, cb = x.shape
    hp, wp = xp.shape[2], xp.shape[3]
    src, dst = x.ravel(), xp.ravel()
    for job in numba.prange(n_mb * icb_len * ih):   # (image, channel block, row)
        block, i = job // ih, job % ih
        at = numba.uint64(job * iw * cb)
        to = numba.uint64(((block * hp + ph + i) * wp + pw) * cb)
        if full_rows[i]:
            for k in range(numba.uint64(iw * cb)):
                dst[to + k] = src[at + k]
        else:
            for k in range(numba.uint64(col_l * cb)):
                dst[to + k] = src[at + k]
            for k in range(numba.uint64(col_r * cb), numba.uint64(iw * cb)):
                dst[to + k] = src[at + k]


@dataclass(frozen=True)
class BorderPlan:
    """Which tiles of a padded layer's row kernel read the caller's input in place and what
    the others need copied into the zero-bordered buffer.

    Inner rows (``oh_lo`` <= oh < ``oh_hi``) and inner tiles (``t_lo`` <= tile < ``t_hi``,
    whole reg_n-wide tiles) are those whose every tap lies inside the input; a tile of an
    inner row among the inner tiles reads it in place.  The rest -- the rows along the top
    and bottom border, the tiles at each end of a row -- read the buffer, which holds the
    input rows those border rows read in full (``full_rows``) and of every other row the
    first ``col_l`` and the columns from ``col_r`` on.

    Copying all of it was the largest cost besides the FMAs on the IC = 3 stems: MobileNet's
    conv1 (224 x 224 x 3, stride 2), Zen 5 host, one process, reg_n 7: 12.0 of 103.3 us at
    1 thread (the kernel alone 0.97 of the peak), 5.8 of 54.9 at 2.  numpy copies the same
    bytes flat in 7.8 us, and a copy per row job of its own input rows into its thread's
    buffer cost the same at 1 thread and 80 instead of 62 us at 2.  With this plan, against
    the kernel before it (the full copy) in one process, alternating rounds (median of 31
    per-round ratios, 1 / 2 threads): MobileNet V2's and V1's stems 1.08 / 1.06 and 1.07 /
    1.10x, VGG-16's conv1_1 1.03 / 0.99, ResNet-50's res2a_branch2b and a 14 x 14 x 256 3x3
    layer 1.00 / 1.00."""

    oh_lo: int
    oh_hi: int
    t_lo: int
    t_hi: int
    full_rows: np.ndarray   # uint8 per input row
    col_l: int
    col_r: int

    @classmethod
    def of(cls, p: ConvProblem, reg_n: int) -> BorderPlan:
        span_h, span_w = (p.kh - 1) * (p.dh + 1) + 1, (p.kw - 1) * (p.dw + 1) + 1

        def inside(first: int, span: int, size: int) -> bool:
            return first >= 0 and first + span <= size

        rows = [oh for oh in range(p.oh) if inside(oh * p.sh - p.ph, span_h, p.ih)]
        oh_lo, oh_hi = (rows[0], rows[-1] + 1) if rows else (0, 0)
        tiles = [t for t in range(p.ow // reg_n)
                 if inside(t * reg_n * p.sw - p.pw, (reg_n - 1) * p.sw + span_w, p.iw)]
        t_lo, t_hi = (tiles[0], tiles[-1] + 1) if tiles and oh_hi > oh_lo else (0, 0)
        full_rows = np.zeros(p.ih, np.uint8)
        for oh in (*range(oh_lo), *range(oh_hi, p.oh)):
            first = oh * p.sh - p.ph
            for r in range(p.kh):
                if 0 <= first + r * (p.dh + 1) < p.ih:
                    full_rows[first + r * (p.dh + 1)] = 1
        if t_hi == t_lo:   # nothing in place: every row in full
            full_rows[:] = 1
        # the columns the tiles before t_lo and from t_hi on read (clipped to the input)
        col_l = min(p.iw, max(0, (t_lo * reg_n - 1) * p.sw - p.pw + span_w)) if t_lo else 0
        col_r = max(0, t_hi * reg_n * p.sw - p.pw) if t_hi < -(-p.ow // reg_n) else p.iw
        return cls(oh_lo, oh_hi, t_lo, t_hi, full_rows, col_l, col_r)


@cache
def _plane_kernel(reg_n: int, oc_bn: int, ic_bn: int, tail: int, taps: int = 1,
                  act: int = epilogue.NONE, add: bool = False, blocks: int = 1,
                  parallel: bool = True):
    """The kernel of a layer :func:`plane_tiled` names, whose output pixels of one channel
    block are one contiguous run, as are the input pixels it reads (a pointwise layer's
    input in place, or the planes :func:`_gather_taps` gathered): reg_n x oc_bn tiles along
    the whole H x W plane, and a ``tail`` x oc_bn tile (compiled in) for the plane's last
    H x W mod reg_n pixels, so no tile computes or reads past the plane.  ``taps`` > 1: the
    input holds a plane per kernel tap and a tile sums over them as over channel blocks.

    Tiles along each row would leave a 7- or 14-wide row to reg_n = 7 or 14 (7 x 16 spills
    AVX2's 16 ymm) or compute idle accumulators (6 + 6 for 7 pixels).  MobileNet V2's
    block_14_project (960 -> 160, 7 x 7), 1 thread, warm, Zen 3 host (AVX2), in one loop:
    6 x 16 along the plane 169 us, the best row tile 255, ONNX Runtime's NCHW8c 190; over its
    19 pointwise layers (``convbench run``, every variant, same rounds) the best own / the
    fastest library went to 1.04 geomean warm, 1.06 cold-weights."""
    REG_N, OC_BN, IC_BN, TAIL, TAPS, BLOCKS = reg_n, oc_bn, ic_bn, tail, taps, blocks
    W_TAP = ic_bn * oc_bn * blocks
    tile = _tile(reg_n, oc_bn, ic_bn, 1, taps, 1, act, add, blocks)
    # no tail: the full tile stands in (never called), so no unused tile is compiled
    tail_tile = _tile(tail, oc_bn, ic_bn, 1, taps, 1, act, add, blocks) if tail else tile

    def conv(x, w, y, tiles_per_job, ocb_chunk):  # pragma: no cover - jitted
        n_mb, icb_len = x.shape[0], x.shape[1]
        ocb_len = w.shape[0]   # tiles of BLOCKS output blocks
        y_blocks = y.shape[1]
        plane = y.shape[2] * y.shape[3]
        y_block = plane * OC_BN
        full = plane // REG_N
        # the tail, when there is one, is the last job's (alone when full tiles fill them)
        jobs = -(-(full + (TAIL > 0)) // tiles_per_job)
        x_tap = plane * IC_BN
        x_icb = TAPS * x_tap
        w_ocb = icb_len * TAPS * W_TAP
        for job in numba.prange(n_mb * ocb_len * jobs):
            n, ocb, grp = _job_place(job, ocb_len, jobs, ocb_chunk)
            t0 = grp * tiles_per_job
            x_img = n * icb_len * x_icb
            y_blk = (n * y_blocks + ocb * BLOCKS) * plane * OC_BN
            for t in range(t0, min(t0 + tiles_per_job, full)):
                p0 = t * REG_N
                tile(x, x_img + p0 * IC_BN, w, ocb * w_ocb, y, y_blk + p0 * OC_BN, y_block,
                     REG_N, icb_len, TAPS, 1, x_icb, x_tap, 0)
            if TAIL > 0 and grp == jobs - 1:
                p0 = full * REG_N
                tail_tile(x, x_img + p0 * IC_BN, w, ocb * w_ocb, y, y_blk + p0 * OC_BN,
                          y_block, TAIL, icb_len, TAPS, 1, x_icb, x_tap, 0)

    key = (f"pw_r{reg_n}_oc{oc_bn}" + (f"x{blocks}" if blocks > 1 else "")
           + f"_ic{ic_bn}_t{tail}" + (f"_k{taps}" if taps > 1 else "")
           + epilogue.key_suffix(act, add))
    return cached_closure(closure_mode(key, parallel), parallel=parallel, fastmath=True)(conv)


@cache
def weight_budget() -> int:
    """Bytes of weights a run of output blocks keeps in L2 while its tiles sweep the input
    (:func:`ocb_chunk`): half of CPU 0's L2 (the rest for the tiles' inputs), 512 KiB of L2
    where sysfs does not give it.  Read on first use, not at import: sysfs takes ~1 ms
    and every worker imports this module."""
    l2 = next((c.size_bytes for c in host.caches() if c.level == 2 and c.kind != "Instruction"),
              512 << 10)
    return l2 // 2


def ocb_chunk(w: np.ndarray, budget: int | None = None) -> int:
    """Output blocks (of the packed weights ``w``, a block per leading index) whose weights
    fit ``budget``: the kernels run their tiles over the whole plane (or every row) for a
    run of that many blocks before the next run (:func:`_job_place`), so each run's
    weights are read from L2 once per tile and the input once per run, not once per block.

    One block a run (the output-block-major order it had) reads the input plane once per
    block, from L3 where it outgrows L2.  Zen 3 host (512 KiB L2), one process, the runs
    alternating in 21 rounds, median per-round speedup over one block a run (1 / 2
    threads): res3a_branch1 (a strided 1x1, 256 -> 512) 1.11 / 1.12, res4a_branch1 1.08 /
    1.12, res4a_branch2a 1.09 / 1.12, res4b_branch2a 1.04 / 1.05, MobileNet V1's
    conv_pw_6 0.99 / 1.07; 0.985-1.03 on the 7 x 7 layers, res3a_branch2a and
    block_2_project.  Every block in one run did as well but on res5a_branch2b (288 KiB
    of weights a block) at 2 threads: 0.94.  The row kernel's layers (ResNet-50's and
    VGG-16's 3x3, the stems), whose rows reuse their input across taps, ran within 0.98-1.03
    of one block a run."""
    budget = weight_budget() if budget is None else budget
    blocks = w.shape[0]
    return max(1, min(blocks, budget // max(1, w[0].nbytes)))


class BlockedNCHWc(epilogue.CompiledIn, Prepared):
    """NCHW[ic_bn]c in, NCHW[oc_bn]c out; workspace: the zero-bordered input copy, where
    the layer needs a border, or the planes a strided layer's taps read.  A layer
    :func:`plane_tiled` names runs :func:`_plane_kernel` (tiles along the whole pixel
    plane), every other layer :func:`_kernel` (tiles along rows)."""

    def __init__(self, problem: ConvProblem, w: np.ndarray, ic_bn: int, oc_bn: int,
                 reg_n: int, unroll_ker: bool, oc_blocks: int = 1):
        p = self.p = problem
        refused = _blocks_refusal(p, oc_bn, oc_blocks)
        if refused:
            raise ValueError(refused)
        self.ic_bn, self.oc_bn, self.oc_blocks = ic_bn, oc_bn, oc_blocks
        self.in_layout, self.out_layout = layouts.blocked_name(ic_bn), layouts.blocked_name(oc_bn)
        # packed for the tile: a block of oc_blocks x oc_bn output channels, as it reads them
        self.w = packed_weights(layouts.oihw_to_kcrsxcyk(np.asarray(w, np.float32), ic_bn,
                                                         oc_bn * oc_blocks))
        self.packed_weight_bytes = self.w.nbytes
        self.ic_blocks = -(-p.ic // ic_bn)
        self.x_shape = (p.mb, self.ic_blocks, p.ih, p.iw, ic_bn)
        self.plane = plane_tiled(p, reg_n)
        self.reg_n, self.unroll_ker = reg_n, unroll_ker
        self.ocb_chunk = ocb_chunk(self.w)
        self.xp = self.xs = None
        self.border: BorderPlan | None = None
        self.kernel = self._compiled()
        if self.plane:
            taps = p.kh * p.kw
            # about a row of pixels a parallel job, as the row kernel's jobs are
            self.tiles_per_job = -(-p.ow // reg_n)
            if not p.is_pointwise:
                # Strided: the pixels (of each tap) the output plane reads, gathered per
                # call into a plane of their own (plane_tiled: why)
                self.xs = page_aligned_zeros(
                    (p.mb, self.ic_blocks, taps * p.oh, p.ow, ic_bn))
        else:
            # wide enough for the last reg_n block's reads past the output's right edge
            ow_padded = -(-p.ow // reg_n) * reg_n
            wp = max(p.iw + 2 * p.pw, (ow_padded - 1) * p.sw + (p.kw - 1) * (p.dw + 1) + 1)
            hp = p.ih + 2 * p.ph
            # no border to add (unpadded layers whose reg_n runs end at the row's edge):
            # the kernel reads the caller's input as it is.  The copy it skips was a
            # quarter of the time of MobileNet V2's 112 x 112 x 32 -> 16 projection
            # (150.6 -> 115.7 us on the Zen 4 host), less on layers with less input per FLOP.
            # A layer with a border copies only what its border tiles read (BorderPlan).
            if (hp, wp) != (p.ih, p.iw):
                self.xp = page_aligned_zeros((p.mb, self.ic_blocks, hp, wp, ic_bn))
                self.border = BorderPlan.of(p, reg_n)
        self.in_place = self.xp is None and self.xs is None
        self.workspace_bytes = sum(b.nbytes for b in (self.xp, self.xs) if b is not None)
        self._transform_seconds: dict[str, float] | None = None

    def _compiled(self):
        # a dispatcher compiles at its first call: switching twice compiles once
        p, reg_n = self.p, self.reg_n
        if self.plane:
            return launched_build(lambda parallel: _plane_kernel(
                reg_n, self.oc_bn, self.ic_bn, (p.oh * p.ow) % reg_n, p.kh * p.kw, self.act,
                self.add, self.oc_blocks, parallel))
        fixed = (p.kh, p.kw) if self.unroll_ker else (0, 0)
        return launched_build(lambda parallel: _kernel(
            reg_n, self.oc_bn, self.ic_bn, p.sw, *fixed, self.act, self.add, self.oc_blocks,
            parallel))

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        p = self.p
        if not (y.flags.c_contiguous and y.dtype == np.float32):
            raise ValueError("y must be a C-contiguous float32 array (the kernel's offsets)")
        if self.xp is not None:
            if x.shape != self.x_shape:   # the copy reads x through flat offsets
                raise ValueError(f"x must be a {self.in_layout} array of shape {self.x_shape}")
            b = self.border
            x = np.ascontiguousarray(x, np.float32)
            _into_strips(x, self.xp, p.ph, p.pw, b.full_rows, b.col_l, b.col_r)
            self.kernel(x, self.xp, self.w, y, p.sh, p.ph, p.pw, p.dh, p.dw, self.ocb_chunk,
                        b.oh_lo, b.oh_hi, b.t_lo, b.t_hi)
            return
        if not (x.flags.c_contiguous and x.dtype == np.float32
                and x.shape == self.x_shape):
            raise ValueError(f"x must be a C-contiguous float32 {self.in_layout} array "
                             f"of {self.ic_blocks} channel blocks (the kernel's offsets)")
        if self.xs is not None:
            _gather_taps(x, self.xs, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw)
            self.kernel(self.xs, self.w, y, self.tiles_per_job, self.ocb_chunk)
        elif self.plane:
            self.kernel(x, self.w, y, self.tiles_per_job, self.ocb_chunk)
        else:   # no border: every tile reads x as the bordered buffer
            self.kernel(x, x, self.w, y, p.sh, 0, 0, p.dh, p.dw, self.ocb_chunk, 0, 0, 0, 0)

    def hot_kernels(self) -> tuple[object, ...]:
        return (self.kernel,)   # the gather (strided layers) only copies: no FMA

    def info(self) -> dict[str, ParamValue]:
        if self._transform_seconds is None:   # measured on first request, never in run
            self._transform_seconds = layout_transform_seconds(self.p, self.ic_bn, self.oc_bn)
        return {**self._transform_seconds, "ic_blocks": self.ic_blocks,
                "input_copied": not self.in_place, "tiles_along": (
                    "plane" if self.plane else "rows")}


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
    reg_n, oc_bn = (int(params.get("reg_n", DEFAULT_REG_N)),
                    int(params.get("oc_bn", DEFAULT_OC_BN)))
    oc_blocks = int(params.get("oc_blocks", 1))
    return _blocks_refusal(problem, oc_bn, oc_blocks) or REGISTERS.tile_unfit(
        reg_n, oc_bn * oc_blocks)


def _blocks_refusal(problem: ConvProblem, oc_bn: int, oc_blocks: int) -> str | None:
    """Why a tile cannot span ``oc_blocks`` output blocks of ``oc_bn`` on this layer."""
    if oc_blocks == 1:
        return None
    if oc_bn % LANES:
        return (f"oc_blocks = {oc_blocks} needs oc_bn a multiple of {LANES} (whole "
                f"vectors per block), got {oc_bn}")
    blocks = -(-problem.oc // oc_bn)
    if blocks % oc_blocks:
        return (f"oc_blocks = {oc_blocks} does not divide the layer's {blocks} output "
                f"blocks of {oc_bn}")
    return None


def _io_layouts(layout: str, params: Mapping[str, ParamValue]) -> tuple[str, str]:
    return (layouts.blocked_name(int(params.get("ic_bn", DEFAULT_IC_BN))),
            layouts.blocked_name(int(params.get("oc_bn", DEFAULT_OC_BN))))


def _factors(n: int, knob: str) -> list[int]:
    """The factors of ``n`` that the knob's :class:`Param` allows."""
    allowed = ALGORITHMS[0].param(knob).allowed
    assert isinstance(allowed, Ints)
    # only up to the allowed bound: a layer's dimension may be up to 2^31 - 1
    return [f for f in range(allowed.lo, min(n, allowed.hi) + 1) if n % f == 0 and f in allowed]


def _distance(params: Mapping[str, ParamValue]) -> float:
    """How far a candidate's blocks lie from the grid's default, in octaves."""
    return (abs(np.log2(int(params["ic_bn"]) / DEFAULT_IC_BN))
            + abs(np.log2(int(params["oc_bn"]) / DEFAULT_OC_BN)))


def work_ratio(problem: ConvProblem, params: Mapping[str, ParamValue]) -> float:
    """Multiply-adds computed per one needed: channels zero padded to whole ic_bn and oc_bn
    blocks (oc_bn = 32 on a 16-channel layer computes twice its outputs)."""
    def padded(channels: int, block: int) -> float:
        return -(-channels // block) * block / channels

    return (padded(problem.ic, int(params["ic_bn"]))
            * padded(problem.oc, int(params["oc_bn"])))


def _tiled_width(problem: ConvProblem) -> int:
    """The run of output pixels the kernel tiles: a row, or a 1x1 layer's plane."""
    return problem.oh * problem.ow if _reads_one_pixel(problem) else problem.ow


def tuning_space(problem: ConvProblem) -> list[dict[str, ParamValue]]:
    """NeoCPU's local search space for one layer (seed 002, section 3.3.1), pruned and
    capped at :data:`SPACE_CAP` candidates:

    - ic_bn among the factors of the input channels, oc_bn among those of the output
      channels that are whole vector registers (multiples of :data:`LANES`; all factors when
      none is), reg_n among the factors of the output width (a factor leaves no
      zero-padded block and no idle accumulator), each within its :class:`Param`'s bounds;
      on a 1x1 unpadded layer, whose tiles run along the H x W plane with a tail tile of
      their own, among the factors of H x W and the sweep grid's REG_N;
      unroll_ker both ways;
    - register tiles that do not fit the register file dropped (:func:`_applies`), and
      those with fewer than :data:`MIN_CHAINS` accumulators where the layer has a tile
      with that many (at the layer's largest tile otherwise);
    - always in: the sweep grid's variants whose reg_n fits the output width and the
      default -- what the grid measures and what won there (7 x 32 on ResNet-50's 3x3);
      and, at the grid's blocks, tiles spanning 2 or 4 output blocks (``oc_blocks``, at
      most 64 lanes, dividing the layer's blocks): NCHW16c's speed of a 32- or 64-lane tile.
      A 16-lane tile loads a weight vector per reg_n FMAs and broadcasts an input per FMA;
      MobileNet V2's 1x1 layers (Zen 5 host, 1 thread, warm, one process with ORT's NCHWc
      conv) ran 0.80-0.89 of ORT's time at oc_bn = 16, reg_n = 8, and 0.97-1.05 with
      oc_blocks = 2 (block_13_project 45.3 -> 35.6 us), as fast as oc_bn = 32 while the
      tensors around them stay NCHW16c;
    - over the cap, the rest ordered by unroll_ker off first (it made no measurable
      difference), then blocks nearest the default (ic_bn, oc_bn in octaves), then more
      accumulators, and cut at the cap.

    A layer the kernel does not run (groups > 1) gets the default alone, which the tuner
    then counts as not applicable with :func:`_applies`'s reason."""
    default: dict[str, ParamValue] = {"ic_bn": DEFAULT_IC_BN, "oc_bn": DEFAULT_OC_BN,
                                      "reg_n": DEFAULT_REG_N, "unroll_ker": False}
    if problem.g != 1:
        return [default]
    ic_bns = _factors(problem.ic, "ic_bn")
    oc_factors = _factors(problem.oc, "oc_bn")
    oc_bns = [f for f in oc_factors if f % LANES == 0] or oc_factors
    width = _tiled_width(problem)
    tail_widths = plane_reg_ns(problem)   # past a strided layer's row: its plane's tiles
    reg_ns = _factors(width, "reg_n")
    if _reads_one_pixel(problem) or _strided(problem):
        # the plane's remainder has a tile of its own; on a strided layer a reg_n that
        # does not divide its rows tiles the plane (plane_tiled)
        reg_ns = sorted({*reg_ns, *(r for r in REG_N if r <= problem.oh * problem.ow),
                         *tail_widths})
    unroll = ALGORITHMS[0].param("unroll_ker")
    unrolls = [v for v in (False, True) if unroll.rejects(v) is None]

    def fits(reg_n: int, oc_bn: int, oc_blocks: int = 1) -> bool:
        return _applies(problem, "nchwxc", {"reg_n": reg_n, "oc_bn": oc_bn,
                                            "oc_blocks": oc_blocks}) is None

    tiles = [(r, o) for o in oc_bns for r in reg_ns if fits(r, o)]
    chains = min(MIN_CHAINS, max((REGISTERS.tile_accumulators(r, o) for r, o in tiles), default=0))
    tiles = [(r, o) for r, o in tiles if REGISTERS.tile_accumulators(r, o) >= chains]
    found = [{"ic_bn": i, "oc_bn": o, "reg_n": r, "unroll_ker": u}
             for u in unrolls for i in ic_bns for r, o in tiles]
    grid = [{"ic_bn": i, "oc_bn": o, "reg_n": r, "unroll_ker": u}
            for i in IC_BN for o in OC_BN for r in (*REG_N, *tail_widths) for u in UNROLL_KER
            if (r <= width or r in tail_widths) and fits(r, o)]
    spans = [(r, o, k) for o in OC_BN for k in (2, 4) if k * o <= SPAN_LANES
             for r in reg_ns if fits(r, o, k)
             and REGISTERS.tile_accumulators(r, k * o) >= chains]
    wide = [{"ic_bn": i, "oc_bn": o, "reg_n": r, "unroll_ker": False, "oc_blocks": k}
            for i in IC_BN for r, o, k in spans]
    kept = [default, *grid, *wide]   # the default fits: 7 x 32 is 14 accumulators
    rest = sorted((c for c in found if c not in kept),
                  key=lambda c: (c["unroll_ker"], _distance(c),
                                 -REGISTERS.tile_accumulators(int(c["reg_n"]), int(c["oc_bn"]))))
    unique = list({tuple(sorted(c.items())): c for c in kept}.values())
    return [*unique, *rest][:max(SPACE_CAP, len(unique))]


def layer_domains(problem: ConvProblem) -> dict[str, tuple[ParamValue, ...]]:
    """The sweep grid's blocks for one layer where OC_BN / IC_BN fit it badly:

    - a layer with fewer input channels than the smallest IC_BN block runs them as one
      block (NeoCPU's first layer: ic_bn = 3).  With IC_BN's blocks the stem pads 3
      channels to 8 or 16 and computes 2.7-5.3x the multiply-adds: ResNet-50's conv1 (2
      threads, Zen 3 host) ran best as spatial_pack, 3.74 ms against ONNX Runtime's 2.11,
      while the tuner's ic_bn = 1 and 3 ran it in 1.85-1.91 ms (cold weights);
    - a layer whose output channels are at most three whole registers, neither in OC_BN nor
      a multiple of its widest block, also sweeps oc_bn = OC: MobileNet V2's 24-channel
      projections on AVX2 otherwise pad 24 to 16 x 2 or run rows of one register, each
      broadcast feeding one FMA (block_1_project, 1 thread, Zen 3 host: 0.82 of ONNX
      Runtime's NCHW8c at the grid's best; 4 x 24, each broadcast feeding three FMAs,
      1.14 in one process);
    - a layer tiled along its plane whose pixels REG_N's widths leave a costly tail also
      sweeps the width :func:`plane_reg_ns` finds (reg_n = 5 on a 7 x 7 plane on AVX2)."""
    domains: dict[str, tuple[ParamValue, ...]] = {}
    wider = plane_reg_ns(problem)
    if wider:
        domains["reg_n"] = tuple(sorted({*REG_N, *wider}))
    if problem.ic < min(IC_BN):
        domains["ic_bn"] = (problem.ic,)
    oc = problem.oc
    if oc % LANES == 0 and oc % max(OC_BN) and oc not in OC_BN and oc <= 3 * LANES:
        domains["oc_bn"] = (*OC_BN, oc)
    return domains


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    return BlockedNCHWc(problem, w, int(params["ic_bn"]), int(params["oc_bn"]),
                        int(params["reg_n"]), bool(params["unroll_ker"]),
                        int(params.get("oc_blocks", 1)))


ALGORITHMS = [
    Algorithm(
        name="nchwc",
        title="Blocked NCHW[x]c (NeoCPU Algorithm 1)",
        source="NeoCPU (Liu et al., USENIX ATC 2019); seed 002",
        layouts=("nchwxc",),
        build=_build,
        epilogues=lambda problem, layout: ACTIVATIONS | {"add"},
        params=(
            # Any block computes correctly (channels are zero padded to whole blocks);
            # 64 bounds the padding and one accumulator vector (oc_bn lanes).  reg_n past
            # REG_N_BOUND needs more registers than exist at any oc_bn (_applies).
            Param("ic_bn", IC_BN, DEFAULT_IC_BN, "input channels per block (x of NCHW[x]c)",
                  allowed=Ints(1, 64)),
            Param("oc_bn", OC_BN, DEFAULT_OC_BN, "output channels per block: lanes (y)",
                  allowed=Ints(1, 64)),
            Param("reg_n", REG_N, DEFAULT_REG_N, "output-width positions per register tile",
                  allowed=Ints(1, REG_N_BOUND)),
            Param("unroll_ker", UNROLL_KER, False, "compile the kernel's R x S in",
                  allowed=(False, True)),
            # not NeoCPU's: its tile is one block wide.  The sweep grid keeps 1; the tuner
            # searches more (tuning_space).  Quiet at 1: the ids recorded before it stay.
            Param("oc_blocks", (1,), 1, "output-channel blocks of oc_bn per register tile "
                  "(MLAS's FilterCount): the tile is reg_n x (oc_blocks * oc_bn) and writes "
                  "that many NCHW[oc_bn]c blocks", allowed=Ints(1, 4), quiet_default=True),
        ),
        applies=_applies,
        io_layouts=_io_layouts,
        tuning_space=tuning_space,
        layer_domains=layer_domains,
        work_ratio=work_ratio,
        notes="Channels zero padded to whole blocks (any IC, OC); any kernel, stride, "
              "padding, dilation; groups 1. Tiles over the register file skipped. Layout "
              "transforms timed by layout_transform_seconds / info(), not in run.",
    )
]
