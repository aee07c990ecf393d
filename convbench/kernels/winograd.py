"""Winograd F(m x m, 3 x 3) convolution, m = 2 and 4 (Lavin & Gray 2015; seeds 000, 004).

NHWC activations.  The output is cut into m x m tiles (numbered over batch, tile rows and
tile columns); each needs an alpha x alpha input tile, alpha = m + 2.  Per block of
``tile_block`` tiles (so the transformed block stays in cache):

1. input transform, numba, fused: V[xi, t, c] = (B^T d_t,c B)[xi] read straight from a
   zero-bordered copy of the input (the border is written once, in build);
2. alpha^2 GEMMs  M[xi] (tiles x OC) = V[xi] (tiles x IC) @ U[xi] (IC x OC), either
   ``gemm=blas`` (one batched ``np.matmul``) or ``gemm=own``: the packed GEMM of
   :mod:`convbench.kernels.gemm` with U prepacked into NR panels in build, V read in
   place through a row-offset buffer (no per-run packing at all), threads over xi;
3. output transform, numba, fused: y[tile] = A^T M A, clipped at the output's edge.

U = G g G^T is computed (and for ``gemm=own`` packed) once in build (the harness times it
as preparation).  Both transforms run over channels (contiguous in NHWC) in runs of 16,
with B^T and A^T compiled in as constants (:mod:`convbench.kernels.winograd_lanes`: each
input and output vector touches memory once, zero entries cost nothing), and thread over
tiles.  On the Zen 3 host (1 thread, fused, F(4x4)) that took VGG-16's conv1_2 (IC = 64,
where the transforms weigh most against the K = 64 GEMMs) from 22.0-23.4 to 16.3-17.5 ms
(fastest of three runs each, the row-by-row numba loops before it accumulated through
memory); 256 x 56 x 56 and deeper layers, GEMM-bound, moved within the host's noise.

``schedule``: ``staged`` runs the three steps above one after another per block, the
threads splitting each step (three parallel regions per block, the input first copied into
a zero-bordered buffer by one thread); ``fused`` (gemm=own) gives each thread whole blocks
to take through all three steps in a V and an M of its own, reading the input in place, in
one parallel region per call.  On the Zen 3 host (1 and 2 threads, warm, F(4x4)) fused ran
VGG-16's conv1_2 in 26.8 / 15.2 ms against staged's 29.5 / 21.6, ResNet-50's res2a_branch2b
in 1.66 / 0.90 ms against 1.87 / 1.17.  The fused schedule's threads share out whole blocks,
so it cuts the tiles into at least one block per thread, of even size and no smaller than
FUSED_MIN_TILES (:func:`fused_block`): with ``tile_block`` taken as given, a 14x14 layer
(16 tiles) at tile_block = 16 was one block, and one thread did all the work --
res4b_branch2b ran 1.04x faster on 2 threads than on 1 (Zen 3 host), 1.07x on 16 (lent
16-core Intel VM).  Where reading U bounds the GEMMs (U larger than the last-level cache,
or too few tiles to cut for every thread: the 7x7 layers, VGG-16's conv5) the threads share
each block's output channels instead (:func:`fused_split`): every cut block reads all of U.

Why ``gemm=own``: with few tiles (ResNet-50's 7x7 layers: 4 tiles of 4x4) the GEMMs have
M = 4 and are bound by reading U (36 * IC * OC * 4 bytes: 37.7 MB at IC = OC = 512, more
than the L3); BLAS packs U again on every call, reading it and writing a copy, while the
prepacked U is streamed exactly once per tile block.  That read is the bound at 1 thread:
on the Zen 4 host the 36 GEMMs of res5b_branch2b took 0.92-0.97 ms with MR = 4, the same
as a plain read of 37.7 MB in the same process (0.96 ms, 39 GB/s; STREAM triad from DRAM
32 GB/s gives 1.17 ms); BLAS took 2.7-4.4 ms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import numba
import numpy as np

from convbench import host
from convbench.kernels import epilogue
from convbench.kernels._numba_support import cached_closure
from convbench.kernels.base import (
    ACTIVATIONS,
    PERFORMED_FLOPS,
    Algorithm,
    Ints,
    Param,
    ParamValue,
    Prepared,
)
from convbench.kernels.buffers import packed_weights, page_aligned_empty, page_aligned_zeros
from convbench.kernels.gemm import (
    DEFAULT_MR,
    DEFAULT_NR,
    GEMM_BACKEND,
    GEMM_BACKENDS,
    MR_CHOICES,
    Blocking,
    even_block,
    gemm_backend,
    micro_kernels,
    tile_unfit,
)
from convbench.kernels.winograd_lanes import digest as lane_digest
from convbench.kernels.winograd_lanes import lane_transform
from convbench.kernels.winograd_transforms import TRANSFORMS, Transform
from convbench.spec.problem import ConvProblem

# 16: the fused schedule's blocks stay in L2 (V and M of 16 tiles: 147 KB each at IC = OC
# = 64) and ResNet-50's 28x28 layers (49 tiles) still split over threads.
TILE_BLOCKS = (16, 64, 256, 1024)
STAGED, FUSED = "staged", "fused"
SCHEDULES = (STAGED, FUSED)

# gemm=own's micro-tile rows MR (M = tiles of a block, padded up to whole MR panels).  The
# 5 x 64 default wastes a fifth of its FMAs on ResNet-50's 7x7 layers (4 tiles) and on
# 14x14 ones (16 tiles as 4 panels of 5 rows); "auto" picks from MR_AUTO the fewest padded
# rows.  MR = 4 ran ~10% below 5 and 6 per row at equal padding on the Zen 4 host (one
# B load per 4 instead of 5 or 6 FMAs; 91 vs 100 GFLOP/s at 64 tiles x 256 x 256), so
# its rows count MR4_ROW_COST; 8 (32 zmm accumulators, all the registers) ran at ~60
# GFLOP/s and is left out.  On AVX2 the GEMM's 16-wide default row fits 4, 5 and 6 rows
# too (12 ymm accumulators at 6).  On 4-lane NEON a 64-wide row takes 16 of the 32
# registers: MR = 1, the GEMM's default there, is the only tile that fits.
MR_AUTO = tuple(mr for mr in (4, 5, 6) if tile_unfit(mr, DEFAULT_NR) is None) or (DEFAULT_MR,)
MR4_ROW_COST = 1.1


# The fused schedule's smallest block cut for threads: each block's GEMMs read all of U, so
# blocks of fewer tiles than a GEMM panel's rows (MR_AUTO's least) add reads of U and little
# parallel work: on the lent 16-core Intel VM VGG-16's conv5_1 (16 tiles) ran in 2.50 ms at
# 16 threads with blocks of 1 tile, 1.96 ms at 4 threads with blocks of 4.
FUSED_MIN_TILES = 4


def fused_block(n_tiles: int, tile_block: int, threads: int) -> int:
    """Tiles per block of the fused schedule: the fewest blocks of at most ``tile_block``
    tiles whose count is a multiple of ``threads``, all of one size but the last, and none
    cut below FUSED_MIN_TILES tiles for the threads' sake.  Where that floor does not bind,
    each thread then gets as many blocks and as many tiles as the others (less one block's
    remainder); where it does, some threads get none (16 tiles on 16 threads: 4 blocks of 4,
    12 threads idle).  49 tiles at tile_block 16 on 2 threads are 4 blocks of 13, 13, 13
    and 10 (not 16, 16, 16 and 1: 32 tiles on one thread, 17 on the other), and 16 tiles on
    2 threads are 2 blocks of 8."""
    floor = min(max(1, min(tile_block, n_tiles)), FUSED_MIN_TILES)
    return max(even_block(n_tiles, tile_block, threads), floor)


@cache
def last_level_cache() -> int:
    """Bytes of CPU 0's largest cache (sysfs; 32 MiB where it does not say).  Read on first
    use, not at import (every worker imports this module), and once: every fused build asks."""
    return max((c.size_bytes for c in host.caches() if c.kind != "Instruction"),
               default=32 << 20)


def fused_split(n_tiles: int, tile_block: int, threads: int, panels: int, u_bytes: int,
                llc_bytes: int) -> tuple[int, int]:
    """(tiles per block, parts) of the fused schedule: ``parts`` > 1 shares out each
    block's ``panels`` (NR columns of output channels) among the threads instead of cutting
    the tiles into blocks for them (:func:`fused_block`).

    A cut block's GEMMs read all of U (``u_bytes``) again, M / threads rows at a time; a
    part reads its share of U once per block, all M rows at a time, but transforms the
    block's whole input again.  Parts pay where reading U bounds the GEMMs: where the cut
    leaves a thread without a block (4 tiles on 2 threads), or where U is larger than the
    last-level cache and comes from memory at every call.  Where U stays cached the cut
    transforms each tile once and was mostly the faster.  Measured on the Zen 5 host (2
    threads, fused, warm / cold-weights, us, parts against cut): F(4x4) res5b_branch2b (4
    tiles, U 37.7 MB) 525 / 880 against 952 / 1143 (one thread had idled), VGG-16's conv5_1
    (16 tiles, U 37.7 MB) 1137 / 1333 against 1547 / 1619; but F(4x4) res4b_branch2b (16
    tiles, U 9.4 MB) 252-255 / 410-453 against 228-233 / 435-445 and res3b_branch2b (49
    tiles at tile_block 64, U 2.4 MB) 182 / 285 against 160 / 254 (F(2x2) res5b_branch2b,
    U 16.8 MB, is left to the cut: 357 / 581 with parts against 388 / 723)."""
    block = even_block(n_tiles, tile_block)
    blocks = -(-n_tiles // block)
    cut = fused_block(n_tiles, tile_block, threads)
    idle = -(-n_tiles // cut) < threads
    parts = min(threads // blocks, panels)
    if parts > 1 and (idle or u_bytes > llc_bytes):
        return block, parts
    return cut, 1


def micro_rows(n_tiles: int, tile_block: int) -> int:
    """The MR of ``MR_AUTO`` computing the fewest (weighted) rows over all tile blocks."""
    full, rest = divmod(n_tiles, tile_block)

    def cost(mr: int) -> float:
        rows = full * -(-tile_block // mr) * mr + -(-rest // mr) * mr
        return rows * (MR4_ROW_COST if mr == 4 else 1.0)

    return min(MR_AUTO, key=lambda mr: (cost(mr), -mr))

# Rounding-error growth over the reference rule (worst error / growth-1 bound, measured):
#   network 3x3 stride-1 layers of VGG-16 and ResNet (K = 576..4608): F(2x2) <= 0.02,
#   F(4x4) <= 0.48;  VGG-16 conv1_1 (IC = 3, K = 27): F(2x2) 0.20, F(4x4) 3.7;
#   1,500 random problems with IC <= 2 (K <= 18): F(4x4) median 1.7, 99th percentile 10.9,
#   max 29.9;  450 with IC <= 5: F(2x2) max 0.44; 546 more with IC <= 3: F(2x2) median
#   0.15, 99th percentile 0.69, max 0.80 -- but one drawn by hypothesis, mb1ic1ih15iw14oc14
#   with make_inputs seed 1, reached 9.0 (every gemm and schedule alike): the tail is long.
# Why F(4x4) is worse and why small K is its worst case: the rule scales with S_i, the
# magnitude of output i's own 3x3xIC products, but Winograd's rounding scales with the
# whole 6x6 input tile times transform entries up to 5 (B^T), 1/6 (G) and 8 (A^T); when
# K is small, S_i of one output can be far below its tile's.  The growth declared leaves
# about 2x headroom over the worst seen (so F(4x4)'s check is 64x looser than direct's:
# a wrong transform coefficient errs by about S_i itself and still fails: see the tests).
ERROR_GROWTH = {2: 16.0, 4: 64.0}


@numba.njit(inline="always")
def _tile_origin(tile, tiles_h, tiles_w, m):  # pragma: no cover - jitted
    per_image = tiles_h * tiles_w
    n = tile // per_image
    rem = tile - n * per_image
    return n, (rem // tiles_w) * m, (rem % tiles_w) * m


# Channels per run of the tile transforms: a 64-byte cache line of floats (one zmm, two
# ymm).  A tile's 36 rows of V (and of M) lie a block's rows x C x 4 bytes apart (16 KB in
# ResNet-50's res3 at 16 tiles a block), all in one L1 set; in runs of one ymm each line was
# written in halves with 35 other lines between, and res3's 256 x 56 x 56 ran 5-8% slower
# than the row-by-row loops it replaced (Zen 3 host, 1 thread).
RUN_LANES = 16


@dataclass(frozen=True)
class TileKernels:
    """One transform's compiled tile steps (:func:`tile_kernels`)."""

    key: str                 # names the compiled code: F(m) and a digest of B^T and A^T
    scratch: int             # floats of the ``tmp`` a tile step needs (alpha^2 x lanes)
    input_tile: object       # (xp, v, row, n, h0, w0, tmp, lo, hi): a tile's B^T d B into v
    output_tile: object      # (mm, y, row, n, h0, w0, tmp, lo, hi): a tile's A^T M A into y
    input_transform: object  # staged: a block's input tiles, threaded
    output_transform: object  # staged: a block's output tiles, threaded


def tile_kernels(transform: Transform, act: int = epilogue.NONE) -> TileKernels:
    """The tile steps of ``transform``, its matrices compiled in as constants; ``act``: an
    activation the output tiles apply as they store (:mod:`convbench.kernels.epilogue`)."""
    bt, at = (np.ascontiguousarray(a, np.float32) for a in (transform.bt, transform.at))
    return _tile_kernels(transform.m, transform.alpha, bt.tobytes(), at.tobytes(), act)


def _lane_tiles(key: str, m: int, alpha: int, bt_bytes: bytes, at_bytes: bytes, lanes: int,
                act: int = epilogue.NONE):
    """A tile's input and output transforms over channels lo .. hi in runs of ``lanes``:
    the 1-D transform down each column into ``tmp``, then along each row of ``tmp`` (B^T d B
    as (B^T d) B).  The last run ends at ``hi`` and may overlap the one before: it
    recomputes the same values, so no tail loop is needed.  ``tmp`` holds one run
    (alpha x alpha x lanes: 2.3 KB for F(4x4)); laid out as alpha x alpha x C its rows were
    C x 4 bytes apart (1 KB at C = 256) and shared a few of the L1's sets."""
    b_apply = lane_transform(bt_bytes, alpha, alpha)
    a_apply = lane_transform(at_bytes, m, alpha)
    ALPHA, M, LANES, ACT = alpha, m, lanes, act
    PLAIN = epilogue.NONE   # the steps before the output tile's last store

    @cached_closure(f"{key}_{lanes}", inline="always")
    def input_tile(xp, v, row, n, h0, w0, tmp, lo, hi):  # pragma: no cover - jitted
        """v[a*alpha + b, row, lo:hi] = (B^T d B)[a, b], d the input tile at xp[n, h0:,
        w0:]; tmp: scratch for one run of B^T d."""
        s0, s1, s2 = xp.strides[0] // 4, xp.strides[1] // 4, xp.strides[2] // 4
        v0, v1 = v.strides[0] // 4, v.strides[1] // 4
        corner = n * s0 + h0 * s1 + w0 * s2
        for run in range(-(-(hi - lo) // LANES)):
            c0 = min(lo + run * LANES, hi - LANES)
            for j in range(ALPHA):
                b_apply(xp, corner + j * s2 + c0, s1, tmp, j * LANES, ALPHA * LANES, ALPHA,
                        LANES, PLAIN)
            for a in range(ALPHA):
                b_apply(tmp, a * ALPHA * LANES, LANES, v, a * ALPHA * v0 + row * v1 + c0, v0,
                        ALPHA, LANES, PLAIN)

    @cached_closure(f"{key}_{lanes}", inline="always")
    def output_tile(mm, y, row, n, h0, w0, tmp, lo, hi):  # pragma: no cover - jitted
        """y[n, h0:, w0:, lo:hi] = A^T M A of M = mm[:, row, lo:hi], clipped at the
        output's edge; tmp: scratch for one run of A^T M."""
        m0, m1 = mm.strides[0] // 4, mm.strides[1] // 4
        y0, y1, y2 = y.strides[0] // 4, y.strides[1] // 4, y.strides[2] // 4
        rows, cols = min(M, y.shape[1] - h0), min(M, y.shape[2] - w0)
        for run in range(-(-(hi - lo) // LANES)):
            c0 = min(lo + run * LANES, hi - LANES)
            for j in range(ALPHA):
                a_apply(mm, j * m0 + row * m1 + c0, ALPHA * m0, tmp, j * LANES, ALPHA * LANES,
                        M, LANES, PLAIN)
            for a in range(rows):
                a_apply(tmp, a * ALPHA * LANES, LANES, y, n * y0 + (h0 + a) * y1 + w0 * y2 + c0,
                        y2, cols, LANES, ACT)

    return input_tile, output_tile


@cache
def _tile_kernels(m: int, alpha: int, bt_bytes: bytes, at_bytes: bytes,
                  act: int = epilogue.NONE) -> TileKernels:
    key = f"f{m}_{lane_digest(bt_bytes, at_bytes)}" + epilogue.key_suffix(act)
    vec_in, vec_out = _lane_tiles(key, m, alpha, bt_bytes, at_bytes, RUN_LANES, act)
    # fewer channels than a run (VGG-16's conv1_1, IC = 3): one at a time
    one_in, one_out = _lane_tiles(key, m, alpha, bt_bytes, at_bytes, 1, act)
    input_tile = _by_channels(f"{key}_in", vec_in, one_in, on_source=True)
    output_tile = _by_channels(f"{key}_out", vec_out, one_out, on_source=False)
    scratch = alpha * alpha * RUN_LANES
    return TileKernels(key, scratch, input_tile, output_tile,
                       _over_tiles(f"{key}_in", input_tile, m, scratch),
                       _over_tiles(f"{key}_out", output_tile, m, scratch))


def _by_channels(key: str, vec_step, one_step, on_source: bool):
    """A tile step (src, dst, row, n, h0, w0, tmp, lo, hi) over channels lo .. hi (hi < 0:
    all of the tensor it walks the channels of, the input's (``on_source``) or the
    output's) that runs ``vec_step`` when they are a run's worth, else ``one_step``."""
    LANES, ON_SOURCE = RUN_LANES, on_source

    @cached_closure(key, inline="always")
    def step(src, dst, row, n, h0, w0, tmp, lo, hi):  # pragma: no cover - jitted
        if hi < 0:
            hi = src.shape[3] if ON_SOURCE else dst.shape[3]
        if hi - lo >= LANES:
            vec_step(src, dst, row, n, h0, w0, tmp, lo, hi)
        else:
            one_step(src, dst, row, n, h0, w0, tmp, lo, hi)

    return step


def _over_tiles(key: str, tile_step, m: int, scratch: int):
    """The staged schedule's threaded loop of ``tile_step`` over tiles t0 .. t0+nt of a
    block: the input transform (src the padded input, dst V) or the output transform (src
    M, dst y, dropping the part past the output's edge)."""
    M, SCRATCH = m, scratch

    @cached_closure(key, parallel=True)
    def over_tiles(src, dst, t0, nt, tiles_h, tiles_w, n_chunks):  # pragma: no cover
        for chunk in numba.prange(n_chunks):
            tmp = np.empty(SCRATCH, np.float32)   # one run of B^T d or A^T M, per thread
            for t in range(chunk, nt, n_chunks):
                n, h0, w0 = _tile_origin(t0 + t, tiles_h, tiles_w, M)
                tile_step(src, dst, t, n, h0, w0, tmp, 0, -1)

    return over_tiles


@numba.njit(inline="always")
def _edge_tile(x, n, hi, wi, edge):  # pragma: no cover - jitted
    """edge[0] = the alpha x alpha tile of x at (hi, wi), zero where it lies outside x."""
    for a in range(edge.shape[1]):
        for j in range(edge.shape[2]):
            h, w = hi + a, wi + j
            if 0 <= h < x.shape[1] and 0 <= w < x.shape[2]:
                for c in range(x.shape[3]):
                    edge[0, a, j, c] = x[n, h, w, c]
            else:
                for c in range(x.shape[3]):
                    edge[0, a, j, c] = 0.0


@cache
def fused_pipeline(mr: int, nr: int, tiles: TileKernels):
    """The fused schedule for gemm=own's MR x NR micro-tile: each thread takes whole tile
    blocks through input transform, the alpha^2 GEMMs and output transform, in V and M
    buffers of its own, with one parallel region per call (the staged schedule opens three
    per block and joins the threads after each), reading the input in place (the staged
    schedule first copies it into a zero-bordered buffer, one thread).  With ``parts`` > 1
    the threads share each block's output channels instead (:func:`fused_split`): each
    transforms the block's whole input, then runs the GEMMs of its NR panels only and the
    output transform of their channels."""
    batched_task = micro_kernels(mr, nr).batched_task
    input_tile, output_tile, SCRATCH = tiles.input_tile, tiles.output_tile, tiles.scratch
    NR = nr

    @cached_closure(f"{mr}x{nr}_{tiles.key}", parallel=True, fastmath=True)
    def fused(x, ph, pw, alpha, m, bp, v, rows, mm, y, n_tiles, block, tiles_h, tiles_w,
              n_chunks, parts):  # pragma: no cover - jitted
        """x: the unpadded NHWC input (a tile reaching into the zero border is copied into
        a zero-filled scratch tile first); v: (chunks, alpha^2, >= ceil(block / MR) * MR,
        IC), mm: (chunks, alpha^2, block, OC), one per chunk; bp: U in panels (alpha^2,
        OC / NR, IC, NR).  Chunk c takes part c % parts of the NR panels in every
        (n_chunks / parts)-th block (n_chunks: a multiple of parts)."""
        ih, iw, ic = x.shape[1], x.shape[2], x.shape[3]
        batch, n_jp, oc = bp.shape[0], bp.shape[1], y.shape[3]
        n_blocks = (n_tiles + block - 1) // block
        for chunk in numba.prange(n_chunks):
            edge = np.empty((1, alpha, alpha, ic), np.float32)
            tmp = np.empty(SCRATCH, np.float32)
            vc, mc = v[chunk], mm[chunk]
            part = chunk % parts
            jp0, jp1 = part * n_jp // parts, (part + 1) * n_jp // parts
            c_lo, c_hi = jp0 * NR, min(jp1 * NR, oc)   # the part's output channels
            for blk in range(chunk // parts, n_blocks, n_chunks // parts):
                t0 = blk * block
                nt = min(block, n_tiles - t0)
                for t in range(nt):
                    n, h0, w0 = _tile_origin(t0 + t, tiles_h, tiles_w, m)
                    hi, wi = h0 - ph, w0 - pw   # the tile's corner in x
                    if hi >= 0 and wi >= 0 and hi + alpha <= ih and wi + alpha <= iw:
                        input_tile(x, vc, t, n, hi, wi, tmp, 0, -1)
                    else:
                        _edge_tile(x, n, hi, wi, edge)
                        input_tile(edge, vc, t, 0, 0, 0, tmp, 0, -1)
                for b in range(batch):
                    for jp in range(jp0, jp1):
                        batched_task(vc, rows, nt, bp, mc, b, jp)
                for t in range(nt):
                    n, h0, w0 = _tile_origin(t0 + t, tiles_h, tiles_w, m)
                    output_tile(mc, y, t, n, h0, w0, tmp, c_lo, c_hi)

    return fused


class WinogradNHWC(Prepared):
    """F(m x m, 3 x 3) on NHWC tensors; workspace: padded input plus one block of V and M."""

    in_layout = out_layout = "nhwc"

    def __init__(self, problem: ConvProblem, w: np.ndarray, transform: Transform,
                 tile_block: int, gemm: str = "blas", mr: int | None = None,
                 schedule: str = STAGED):
        """``mr``: gemm=own's micro-tile rows; None picks them with :func:`micro_rows`.
        ``schedule``: :data:`STAGED` or :data:`FUSED` (gemm=own only)."""
        p = self.p = problem
        t = self.transform = transform
        m, alpha = t.m, t.alpha
        # U[xi] is IC x OC so that V (tiles x IC) @ U gives NHWC-ordered outputs.
        u = t.weights(w).reshape(alpha * alpha, p.oc, p.ic).transpose(0, 2, 1)
        if gemm not in GEMM_BACKENDS:
            raise ValueError(f"unknown gemm backend {gemm!r}")
        if schedule not in SCHEDULES or (schedule == FUSED and gemm != "own"):
            raise ValueError(f"schedule {schedule!r} with gemm={gemm}")
        self.gemm, self.schedule = gemm, schedule
        self.tiles_h, self.tiles_w = -(-p.oh // m), -(-p.ow // m)
        self.n_tiles = p.mb * self.tiles_h * self.tiles_w
        # fused: built in the worker, under the threads it runs with
        self.tile_block, self.parts = (
            fused_split(self.n_tiles, tile_block, numba.get_num_threads(),
                        -(-p.oc // DEFAULT_NR), u.size * np.dtype(np.float32).itemsize,
                        last_level_cache())
            if schedule == FUSED else (min(tile_block, self.n_tiles), 1))
        self.blocking = Blocking(MR=mr or micro_rows(self.n_tiles, self.tile_block))
        if gemm == "own":   # only the panels are kept: (alpha^2, OC/NR, IC, NR)
            self.u = packed_weights(self.blocking.pack_b_batch(np.ascontiguousarray(u, np.float32)))
        else:
            self.u = packed_weights(np.asarray(u, dtype=np.float32))
        self.tiles = tile_kernels(t)
        # Zero border written once; run() only refreshes the interior (staged only: the
        # fused schedule reads x in place).
        xp_shape = (p.mb, self.tiles_h * m + 2, self.tiles_w * m + 2, p.ic)
        self.xp = page_aligned_zeros(xp_shape if schedule == STAGED else (0, 0, 0, 0))
        # gemm=own computes whole MR-row panels: V gets rows up to a multiple of MR (zeros
        # at first, stale tiles later: either way finite and their products never stored).
        mr = self.blocking.MR
        v_rows = -(-self.tile_block // mr) * mr if gemm == "own" else self.tile_block
        self.rows = (np.arange(v_rows, dtype=np.int64) * p.ic).reshape(v_rows, 1)
        if schedule == FUSED:   # a V and an M per thread that can get a block (or part)
            blocks = -(-self.n_tiles // self.tile_block)
            chunks = min(numba.config.NUMBA_NUM_THREADS // self.parts, blocks) * self.parts
            self.fused = fused_pipeline(self.blocking.MR, self.blocking.NR, self.tiles)
            self.v = page_aligned_zeros((chunks, alpha * alpha, v_rows, p.ic))
            self.mm = page_aligned_empty((chunks, alpha * alpha, self.tile_block, p.oc))
        else:
            self.v = page_aligned_zeros((alpha * alpha, v_rows, p.ic))
            self.mm = page_aligned_empty((alpha * alpha, self.tile_block, p.oc))
        self.packed_weight_bytes = self.u.nbytes
        self.workspace_bytes = self.xp.nbytes + self.v.nbytes + self.mm.nbytes
        if gemm == "own":
            self.workspace_bytes += self.rows.nbytes

    def fuse_activation(self, kind: str) -> bool:
        self.tiles = tile_kernels(self.transform, epilogue.CODES[kind])
        if self.schedule == FUSED:
            self.fused = fused_pipeline(self.blocking.MR, self.blocking.NR, self.tiles)
        return True

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        p = self.p
        # the tile transforms load and store runs of channels as whole vectors
        x = x if x.strides[3] == x.itemsize else np.ascontiguousarray(x)
        if y.strides[3] != y.itemsize:
            raise ValueError("Winograd writes runs of channels: y's channels must be adjacent")
        if self.schedule == FUSED:
            # every part of a block runs (chunks: a multiple of the parts)
            parts = self.parts
            chunks = max(1, min(self.v.shape[0], numba.get_num_threads()) // parts) * parts
            t = self.transform
            self.fused(x, p.ph, p.pw, t.alpha, t.m, self.u, self.v, self.rows, self.mm, y,
                       self.n_tiles, self.tile_block, self.tiles_h, self.tiles_w, chunks,
                       parts)
            return
        self.xp[:, p.ph:p.ph + p.ih, p.pw:p.pw + p.iw] = x
        threads = numba.get_num_threads()   # ~0.5 us a call (Zen 5 host): once a run
        for t0 in range(0, self.n_tiles, self.tile_block):
            nt = min(self.tile_block, self.n_tiles - t0)
            chunks = min(nt, threads)   # one scratch tile per thread
            self.tiles.input_transform(self.xp, self.v, t0, nt, self.tiles_h, self.tiles_w,
                                       chunks)
            if self.gemm == "own":
                self.blocking.kernels.batched(self.v, self.rows, nt, self.u, self.mm)
            else:
                np.matmul(self.v[:, :nt], self.u, out=self.mm[:, :nt])
            self.tiles.output_transform(self.mm, y, t0, nt, self.tiles_h, self.tiles_w, chunks)

    def hot_kernels(self) -> tuple[object, ...]:
        if self.schedule == FUSED:
            return (self.fused,)
        gemm = (self.blocking.kernels.batched,) if self.gemm == "own" else ()
        return (self.tiles.input_transform, *gemm, self.tiles.output_transform)

    def info(self) -> dict[str, ParamValue]:
        m, alpha = self.transform.m, self.transform.alpha
        return {"tiles": self.n_tiles, "tile_block": self.tile_block, "schedule": self.schedule,
                "oc_parts": self.parts,
                "multiply_reduction": (m * m * 9) / (alpha * alpha),
                PERFORMED_FLOPS: performed_flops(self.p, m)}


def performed_flops(problem: ConvProblem, m: int) -> int:
    """FLOPs of the alpha^2 batched GEMMs, 2 x alpha^2 x tiles x IC x OC (edge tiles count
    whole): the arithmetic F(m x m, 3 x 3) performs instead of 2 x 9 x OH x OW x IC x OC.
    The transforms are left out: additions and multiplies by small constants, O(alpha^2 x
    (IC + OC)) per tile against the GEMMs' alpha^2 x IC x OC, and no FMAs for the peak;
    gemm=own's padding of a block to whole MR panels is not useful work either."""
    p, alpha = problem, m + 2
    tiles = p.mb * -(-p.oh // m) * -(-p.ow // m)
    return 2 * alpha * alpha * tiles * p.ic * p.oc


def _applies(problem: ConvProblem, layout: str, params: Mapping[str, ParamValue]) -> str | None:
    p = problem
    if (p.kh, p.kw) != (3, 3):
        return "Winograd F(m,3) needs a 3x3 kernel"
    if (p.sh, p.sw) != (1, 1):
        return "Winograd needs stride 1"
    if (p.dh, p.dw) != (0, 0):
        return "Winograd needs a dense (undilated) kernel"
    if p.g != 1:
        return "Winograd here supports groups = 1 only"
    mr = params.get("MR", "auto")
    if gemm_backend(params) == "blas" and mr != "auto":
        return "MR only tunes gemm=own"
    if params.get("schedule", STAGED) == FUSED and gemm_backend(params) != "own":
        return "schedule=fused runs the own GEMM only (gemm=own)"
    if gemm_backend(params) == "own" and mr != "auto":
        return tile_unfit(int(mr), DEFAULT_NR)
    return None


def _builder(m: int):
    def build(problem: ConvProblem, w: np.ndarray, layout: str,
              params: Mapping[str, ParamValue]) -> Prepared:
        mr = params.get("MR", "auto")
        return WinogradNHWC(problem, w, TRANSFORMS[m], int(params["tile_block"]),
                            gemm_backend(params), None if mr == "auto" else int(mr),
                            str(params.get("schedule", STAGED)))
    return build


def _algorithm(m: int) -> Algorithm:
    alpha = m + 2
    return Algorithm(
        name=f"winograd{m}x{m}",
        title=f"Winograd F({m}x{m},3x3)",
        source="Lavin & Gray 2015, Fast Algorithms for CNNs; seeds 000 and 004",
        layouts=("nhwc",),
        build=_builder(m),
        epilogues=lambda problem, layout: ACTIVATIONS,
        params=(
            # Any block computes correctly (tests run 1, 3, 7); the scratch of one block
            # grows with it (tiles x alpha^2 x channels), so 4096 bounds it.
            Param("tile_block", TILE_BLOCKS, 1024,
                  "output tiles transformed and multiplied per block (cache blocking; fused: "
                  "at most, the tiles cut into at least one even block per thread)",
                  allowed=Ints(1, 4096)),
            GEMM_BACKEND,
            Param("schedule", SCHEDULES, STAGED,
                  "staged: each stage over a whole block, the threads splitting every stage "
                  "(three parallel regions per block); fused: each thread takes whole blocks "
                  "through all three stages in V and M buffers of its own (gemm=own only)"),
            # Only the default, so checks stay small; a suite widens it (e.g. [4, 5, 6]).
            Param("MR", ("auto",), "auto",
                  f"gemm=own micro-tile rows: auto (fewest padded rows of {MR_AUTO}) or one "
                  "of convbench.kernels.gemm.MR_CHOICES", allowed=("auto", *MR_CHOICES)),
        ),
        applies=_applies,
        error_growth=ERROR_GROWTH[m],
        notes=f"{alpha * alpha} multiplies per {m}x{m} output tile instead of {9 * m * m}; "
              "weights transformed in build; 3x3, stride 1, undilated, groups 1 only.",
    )


ALGORITHMS = [_algorithm(2), _algorithm(4)]
