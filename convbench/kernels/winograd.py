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
as preparation).  Both numba transforms vectorise over channels (contiguous in NHWC) and
thread over tiles.

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

import numba
import numpy as np

from convbench.kernels.base import (
    PERFORMED_FLOPS,
    Algorithm,
    Ints,
    Param,
    ParamValue,
    Prepared,
)
from convbench.kernels.gemm import (
    DEFAULT_MR,
    DEFAULT_NR,
    GEMM_BACKEND,
    GEMM_BACKENDS,
    MR_CHOICES,
    Blocking,
    gemm_backend,
    tile_unfit,
)
from convbench.kernels.winograd_transforms import TRANSFORMS, Transform
from convbench.spec.problem import ConvProblem

TILE_BLOCKS = (64, 256, 1024)

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
#   max 29.9;  450 with IC <= 5: F(2x2) max 0.44.
# Why F(4x4) is worse and why small K is its worst case: the rule scales with S_i, the
# magnitude of output i's own 3x3xIC products, but Winograd's rounding scales with the
# whole 6x6 input tile times transform entries up to 5 (B^T), 1/6 (G) and 8 (A^T); when
# K is small, S_i of one output can be far below its tile's.  The growth declared leaves
# about 2x headroom over the worst seen (so F(4x4)'s check is 64x looser than direct's:
# a wrong transform coefficient errs by about S_i itself and still fails: see the tests).
ERROR_GROWTH = {2: 2.0, 4: 64.0}


@numba.njit(inline="always")
def _accumulate(dst, src, coef, first):  # pragma: no cover - jitted
    """dst (+)= coef * src over a channel vector; ``first`` overwrites instead of adding."""
    if first:
        for c in range(dst.shape[0]):
            dst[c] = coef * src[c]
    else:
        for c in range(dst.shape[0]):
            dst[c] += coef * src[c]


@numba.njit(inline="always")
def _tile_origin(tile, tiles_h, tiles_w, m):  # pragma: no cover - jitted
    per_image = tiles_h * tiles_w
    n = tile // per_image
    rem = tile - n * per_image
    return n, (rem // tiles_w) * m, (rem % tiles_w) * m


@numba.njit(parallel=True, fastmath=True, cache=True)
def _input_transform(xp, bt, v, t0, nt, tiles_h, tiles_w, m, n_chunks):  # pragma: no cover - jitted
    """v[a*alpha + b, t, :] = (B^T d B)[a, b] for tiles t0 .. t0+nt of the padded input xp."""
    alpha = bt.shape[0]
    c_len = xp.shape[3]
    for chunk in numba.prange(n_chunks):
        tmp = np.empty((alpha, alpha, c_len), np.float32)   # B^T d, one per thread
        for t in range(chunk, nt, n_chunks):
            n, h0, w0 = _tile_origin(t0 + t, tiles_h, tiles_w, m)
            for a in range(alpha):
                for j in range(alpha):
                    first = True
                    for k in range(alpha):
                        if bt[a, k] != 0.0:
                            _accumulate(tmp[a, j], xp[n, h0 + k, w0 + j], bt[a, k], first)
                            first = False
            for a in range(alpha):
                for b in range(alpha):
                    first = True
                    for j in range(alpha):
                        if bt[b, j] != 0.0:
                            _accumulate(v[a * alpha + b, t], tmp[a, j], bt[b, j], first)
                            first = False


@numba.njit(parallel=True, fastmath=True, cache=True)
def _output_transform(mm, at, y, t0, nt, tiles_h, tiles_w, n_chunks):  # pragma: no cover - jitted
    """y[tile] = A^T M A for tiles t0 .. t0+nt, dropping the part past the output's edge."""
    m, alpha = at.shape
    oh_len, ow_len, oc = y.shape[1], y.shape[2], y.shape[3]
    for chunk in numba.prange(n_chunks):
        tmp = np.empty((m, alpha, oc), np.float32)   # A^T M, one per thread
        for t in range(chunk, nt, n_chunks):
            n, h0, w0 = _tile_origin(t0 + t, tiles_h, tiles_w, m)
            for a in range(m):
                for j in range(alpha):
                    first = True
                    for i in range(alpha):
                        if at[a, i] != 0.0:
                            _accumulate(tmp[a, j], mm[i * alpha + j, t], at[a, i], first)
                            first = False
            for a in range(min(m, oh_len - h0)):
                for b in range(min(m, ow_len - w0)):
                    first = True
                    for j in range(alpha):
                        if at[b, j] != 0.0:
                            _accumulate(y[n, h0 + a, w0 + b], tmp[a, j], at[b, j], first)
                            first = False


class WinogradNHWC(Prepared):
    """F(m x m, 3 x 3) on NHWC tensors; workspace: padded input plus one block of V and M."""

    in_layout = out_layout = "nhwc"

    def __init__(self, problem: ConvProblem, w: np.ndarray, transform: Transform,
                 tile_block: int, gemm: str = "blas", mr: int | None = None):
        """``mr``: gemm=own's micro-tile rows; None picks them with :func:`micro_rows`."""
        p = self.p = problem
        t = self.transform = transform
        m, alpha = t.m, t.alpha
        # U[xi] is IC x OC so that V (tiles x IC) @ U gives NHWC-ordered outputs.
        u = t.weights(w).reshape(alpha * alpha, p.oc, p.ic).transpose(0, 2, 1)
        if gemm not in GEMM_BACKENDS:
            raise ValueError(f"unknown gemm backend {gemm!r}")
        self.gemm = gemm
        self.tiles_h, self.tiles_w = -(-p.oh // m), -(-p.ow // m)
        self.n_tiles = p.mb * self.tiles_h * self.tiles_w
        self.tile_block = min(tile_block, self.n_tiles)
        self.blocking = Blocking(MR=mr or micro_rows(self.n_tiles, self.tile_block))
        if gemm == "own":   # only the panels are kept: (alpha^2, OC/NR, IC, NR)
            self.u = self.blocking.pack_b_batch(np.ascontiguousarray(u, np.float32))
        else:
            self.u = np.ascontiguousarray(u, dtype=np.float32)
        self.bt = np.ascontiguousarray(t.bt, dtype=np.float32)
        self.at = np.ascontiguousarray(t.at, dtype=np.float32)
        # Zero border written once; run() only refreshes the interior.
        self.xp = np.zeros((p.mb, self.tiles_h * m + 2, self.tiles_w * m + 2, p.ic),
                           np.float32)
        # gemm=own computes whole MR-row panels: V gets rows up to a multiple of MR (zeros
        # at first, stale tiles later: either way finite and their products never stored).
        mr = self.blocking.MR
        v_rows = -(-self.tile_block // mr) * mr if gemm == "own" else self.tile_block
        self.v = np.zeros((alpha * alpha, v_rows, p.ic), np.float32)
        self.rows = (np.arange(v_rows, dtype=np.int64) * p.ic).reshape(v_rows, 1)
        self.mm = np.empty((alpha * alpha, self.tile_block, p.oc), np.float32)
        self.packed_weight_bytes = self.u.nbytes
        self.workspace_bytes = self.xp.nbytes + self.v.nbytes + self.mm.nbytes
        if gemm == "own":
            self.workspace_bytes += self.rows.nbytes

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        p = self.p
        self.xp[:, p.ph:p.ph + p.ih, p.pw:p.pw + p.iw] = x
        for t0 in range(0, self.n_tiles, self.tile_block):
            nt = min(self.tile_block, self.n_tiles - t0)
            chunks = min(nt, numba.get_num_threads())   # one scratch tile per thread
            _input_transform(self.xp, self.bt, self.v, t0, nt, self.tiles_h, self.tiles_w,
                             self.transform.m, chunks)
            if self.gemm == "own":
                self.blocking.kernels.batched(self.v, self.rows, nt, self.u, self.mm)
            else:
                np.matmul(self.v[:, :nt], self.u, out=self.mm[:, :nt])
            _output_transform(self.mm, self.at, y, t0, nt, self.tiles_h, self.tiles_w, chunks)

    def hot_kernels(self) -> tuple[object, ...]:
        gemm = (self.blocking.kernels.batched,) if self.gemm == "own" else ()
        return (_input_transform, *gemm, _output_transform)

    def info(self) -> dict[str, ParamValue]:
        m, alpha = self.transform.m, self.transform.alpha
        return {"tiles": self.n_tiles, "tile_block": self.tile_block,
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
    if gemm_backend(params) == "own" and mr != "auto":
        return tile_unfit(int(mr), DEFAULT_NR)
    return None


def _builder(m: int):
    def build(problem: ConvProblem, w: np.ndarray, layout: str,
              params: Mapping[str, ParamValue]) -> Prepared:
        mr = params.get("MR", "auto")
        return WinogradNHWC(problem, w, TRANSFORMS[m], int(params["tile_block"]),
                            gemm_backend(params), None if mr == "auto" else int(mr))
    return build


def _algorithm(m: int) -> Algorithm:
    alpha = m + 2
    return Algorithm(
        name=f"winograd{m}x{m}",
        title=f"Winograd F({m}x{m},3x3)",
        source="Lavin & Gray 2015, Fast Algorithms for CNNs; seeds 000 and 004",
        layouts=("nhwc",),
        build=_builder(m),
        params=(
            # Any block computes correctly (tests run 1, 3, 7); the scratch of one block
            # grows with it (tiles x alpha^2 x channels), so 4096 bounds it.
            Param("tile_block", TILE_BLOCKS, 1024,
                  "output tiles transformed and multiplied per block (cache blocking)",
                  allowed=Ints(1, 4096)),
            GEMM_BACKEND,
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
