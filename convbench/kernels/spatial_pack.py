"""Spatial pack (seed 000 section 3; TVM's spatial-pack schedules): convolve tile by tile.

NHWC.  The output is split into tiles of tile_h x tile_w pixels (all output channels);
for each tile the input window it reads, tile plus halo, is copied into a contiguous buffer
(zeros where it overlaps the padding), then the tile is computed by the packed-GEMM
micro-kernel reading that buffer: the pixel/tap offsets inside a buffer are the same for
every tile, so they are computed once in ``build``.  Smaller tiles give better locality
but copy more halo; one-pixel tiles degenerate into im2col.

The halo follows from the kernel extent, stride and dilation on both axes:
window = (tile - 1) * stride + (k - 1) * (dilation + 1) + 1 rows (and columns).  (Seed 000's
formula puts the factor 2 of the halo on H only.)
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

import numba
import numpy as np

from convbench.kernels._numba_support import cached_closure
from convbench.kernels.base import Algorithm, Ints, Param, ParamValue, Prepared
from convbench.kernels.buffers import packed_weights
from convbench.kernels.gemm import BLOCKING_PARAMS, Blocking, blocking_from, blocking_unfit
from convbench.spec.problem import ConvProblem

PARAMS = (
    # Any tile computes correctly (clamped to the output); each thread's input window
    # (tile + halo) x IC grows with it, so 64 x 64 bounds it.
    Param("tile_h", (2, 4), 4, "output rows per tile", allowed=Ints(1, 64)),
    Param("tile_w", (8, 16), 16, "output columns per tile", allowed=Ints(1, 64)),
    *(p for p in BLOCKING_PARAMS if p.name in ("MR", "NR", "KC")),
)


def window(tile: int, k: int, stride: int, dilation_minus_one: int) -> int:
    """Input rows (or columns) a tile of ``tile`` outputs reads: tile plus halo."""
    return (tile - 1) * stride + (k - 1) * (dilation_minus_one + 1) + 1


def tile_offsets(p: ConvProblem, tile_h: int, tile_w: int, rows: int) -> np.ndarray:
    """(rows, KH*KW) element offsets, inside a tile's window buffer, of each tile pixel's
    input row per tap; rows past tile_h*tile_w point at the buffer's start (discarded)."""
    win_w = window(tile_w, p.kw, p.sw, p.dw)
    th, tw, kh, kw = np.meshgrid(np.arange(tile_h), np.arange(tile_w), np.arange(p.kh),
                                 np.arange(p.kw), indexing="ij")
    r = th * p.sh + kh * (p.dh + 1)
    c = tw * p.sw + kw * (p.dw + 1)
    out = np.zeros((rows, p.kh * p.kw), np.int64)
    out[:tile_h * tile_w] = ((r * win_w + c) * p.ic).reshape(-1, p.kh * p.kw)
    return out


@cache
def _tile_kernel(mr: int, nr: int):
    gather = Blocking(mr, nr).kernels.gather   # has a stable identity: the cache works

    @cached_closure(f"{mr}x{nr}", parallel=True, fastmath=True)
    def spatial(x, offs, bp, y, tile_h, tile_w, win_h, win_w, sh, sw, ph, pw,
                kt):  # pragma: no cover - jitted
        mb, ih_len, iw_len, ic = x.shape
        _, oh_len, ow_len, oc = y.shape
        taps = offs.shape[1]
        n_th = (oh_len + tile_h - 1) // tile_h
        n_tw = (ow_len + tile_w - 1) // tile_w
        n_ip = offs.shape[0] // mr
        n_jp = bp.shape[0]
        b_flat = bp.reshape(n_jp, bp.shape[1] * nr)
        n_chunks = (taps + kt - 1) // kt
        for task in numba.prange(mb * n_th * n_tw):
            n = task // (n_th * n_tw)
            oh0 = (task // n_tw) % n_th * tile_h
            ow0 = task % n_tw * tile_w
            # 1. pack: the tile's input window, zeros where it leaves the input
            buf = np.zeros(win_h * win_w * ic, np.float32)
            for r in range(win_h):
                ih = oh0 * sh - ph + r
                if ih < 0 or ih >= ih_len:
                    continue
                for cw in range(win_w):
                    iw = ow0 * sw - pw + cw
                    if iw >= 0 and iw < iw_len:
                        buf[(r * win_w + cw) * ic:(r * win_w + cw + 1) * ic] = x[n, ih, iw]
            # 2. compute the tile (all output channels) from the window
            out = np.empty((n_ip * mr, oc), np.float32)
            for jp in range(n_jp):
                for ch in range(n_chunks):
                    t0 = ch * kt
                    b_chunk = b_flat[jp, t0 * ic * nr:]
                    for ip in range(n_ip):
                        gather(buf, offs, ip * mr, t0, min(kt, taps - t0), ic, b_chunk, out,
                               jp * nr, ch == 0, ch == n_chunks - 1)
            # 3. scatter the tile's valid pixels into the output
            for r in range(min(tile_h, oh_len - oh0)):
                for cw in range(min(tile_w, ow_len - ow0)):
                    y[n, oh0 + r, ow0 + cw] = out[r * tile_w + cw]

    return spatial


class SpatialPackNHWC(Prepared):
    in_layout = out_layout = "nhwc"

    def __init__(self, problem: ConvProblem, w: np.ndarray, tile_h: int, tile_w: int,
                 blocking: Blocking):
        p = self.p = problem
        self.tile_h = min(tile_h, p.oh)
        self.tile_w = min(tile_w, p.ow)
        self.blocking = blocking
        self.win_h = window(self.tile_h, p.kh, p.sh, p.dh)
        self.win_w = window(self.tile_w, p.kw, p.sw, p.dw)
        rows = -(-self.tile_h * self.tile_w // blocking.MR) * blocking.MR
        self.offsets = tile_offsets(p, self.tile_h, self.tile_w, rows)
        k = p.reduction_length
        # C order even where the reshape is a view (1x1: F order): one pack_b signature
        hwio = np.ascontiguousarray(
            np.asarray(w, np.float32).transpose(2, 3, 1, 0).reshape(k, p.oc))
        self.wpacked = packed_weights(Blocking(blocking.MR, blocking.NR, KC=k).pack_b(hwio)[0])
        self.taps_per_chunk = max(1, blocking.KC // p.ic)
        self.kernel = _tile_kernel(blocking.MR, blocking.NR)
        self.n_tiles = p.mb * -(-p.oh // self.tile_h) * -(-p.ow // self.tile_w)
        # per thread: one window buffer and one tile of outputs
        per_thread = (self.win_h * self.win_w * p.ic + rows * p.oc) * 4
        self.workspace_bytes = numba.get_num_threads() * per_thread + self.offsets.nbytes
        self.packed_weight_bytes = self.wpacked.nbytes

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        p = self.p
        self.kernel(x, self.offsets, self.wpacked, y, self.tile_h, self.tile_w, self.win_h,
                    self.win_w, p.sh, p.sw, p.ph, p.pw, self.taps_per_chunk)

    def hot_kernels(self) -> tuple[object, ...]:
        return (self.kernel,)

    def info(self) -> dict[str, ParamValue]:
        """Halo overhead: input elements copied into windows per element of the input."""
        p = self.p
        copied = self.n_tiles * self.win_h * self.win_w * p.ic
        return {"tiles": self.n_tiles, "window_h": self.win_h, "window_w": self.win_w,
                "copied_bytes": copied * 4,
                "halo_overhead": round(copied / (p.mb * p.ih * p.iw * p.ic) - 1.0, 4)}


def _applies(problem: ConvProblem, layout: str, params: Mapping[str, ParamValue]
             ) -> str | None:
    if problem.g != 1:
        return "groups > 1 not supported (one window holds all input channels)"
    return blocking_unfit(params)


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    return SpatialPackNHWC(problem, w, int(params.get("tile_h", 4)),
                           int(params.get("tile_w", 16)), blocking_from(params))


ALGORITHMS = [
    Algorithm(
        name="spatial_pack",
        title="spatial pack",
        source="seed 000 section 3 (spatial pack); TVM conv2d spatial_pack schedules",
        layouts=("nhwc",),
        build=_build,
        params=PARAMS,
        applies=_applies,
        notes="Output tiles of tile_h x tile_w; each tile's input window (tile + halo) is "
              "copied contiguously, then computed by the packed-GEMM micro-kernel.",
    )
]
