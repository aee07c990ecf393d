"""Packed single-precision GEMM of our own (Goto & van de Geijn 2008; BLIS, Van Zee 2015).

C (M x N) = A (M x K) @ B (K x N), float32.  Names follow BLIS: B is packed into KC x NR
panels, A into KC x MR panels (MR rows interleaved per k), and an MR x NR register
micro-kernel sums one KC-deep rank update into a tile of C.  MC, KC and NC are the cache
blocks (A block MC x KC meant for L2, B panel KC x NR for L1, B block KC x NC for L3).
Threads run over (MC block, NR panel) pairs of each (NC, KC) block with ``numba.prange``.

Vectorisation (read with :mod:`convbench.kernels.asm`): the accumulators are a register
tile of explicit LLVM vectors (:mod:`convbench.kernels.register_tile`, shared with
NCHW[x]c), which LLVM promotes to registers.  Written as numba loops over a stack buffer,
the micro-kernel vectorised on the Zen 4 host for NR in {48, 64, 80} (5 x 64: 95-105 GFLOP/s
of the ~117 peak on cache-resident panels) but every NR = 32 kernel compiled to scalar or
spilled code (2-7 GFLOP/s: LLVM fully unrolls a 32-wide loop before the loop vectoriser
sees it); on the AVX2 host 6 x 16 became xmm FMAs and 2 x 48 kept accumulators on the
stack, so the best tile that fitted, 1 x 64, ran at 27 GFLOP/s of the 39 peak on 1024^3
(OpenBLAS 36).  As vectors, 6 x 16 and 4 x 24 run at 34-35 there and every NR in
:data:`NR_CHOICES` compiles to MR x NR / lanes packed FMAs per k step with no stack access
in the loop (zmm and ymm checked).  NR = 64 fits the channel counts of CNNs (64, 128, ...)
with no padded columns; NR = 48 wastes a third of the FMAs on OC = 64.

On aarch64 (numba's code for a Neoverse N1 under tools/arm64.sh, 4-lane NEON) the numba-loop
micro-kernel vectorised only at NR = 64, 16 ``fmla v.4s`` a row of the tile.  A row then
takes 16 of the 32 q registers, so there MR = 1 is the default (16 accumulators, no
reload); 2 x 64 (32) reloaded 15 registers in the loop and 5 x 64 (80) 88.  Tiles over
the register file are skipped with a reason (:func:`tile_unfit`), on x86 too (8 x 64
needs 32 zmm).

Edge tiles are computed full size on zero-padded panels; only the valid part is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import numba
import numpy as np

from convbench import host
from convbench.kernels import epilogue
from convbench.kernels._numba_support import cached_closure, stack_f32
from convbench.kernels.base import Ints, Param, ParamValue
from convbench.kernels.buffers import page_aligned_empty
from convbench.kernels.register_tile import (
    MIN_CHAINS,
    tile_fma,
    tile_fma_rows,
    tile_store,
    tile_zero,
)

# Micro-tiles that vectorise on the hosts measured (see module docstring): what a suite
# may ask for on any host; the ones over this host's register file are skipped there.
MR_CHOICES = (1, 2, 4, 5, 6, 8)
NR_CHOICES = (16, 24, 32, 48, 64)
REGISTERS = host.register_file()
# 5 x 64 is 20 zmm accumulators; on AVX2's 16 ymm 6 x 16 (12, BLIS's Haswell tile) ran at
# 34 GFLOP/s of the 39 peak on 1024^3 where 1 x 64 ran at 28; on 4-lane NEON a 64-wide row
# alone takes 16 q registers
if REGISTERS.lanes >= 16:
    DEFAULT_MR, DEFAULT_NR = 5, 64
elif REGISTERS.lanes == 8:
    DEFAULT_MR, DEFAULT_NR = 6, 16
else:
    DEFAULT_MR, DEFAULT_NR = 1, 64
# A block 100 x 256 floats = 100 KiB (L2), B panel 256 x 64 = 64 KiB (L1 + L2), NC = 63 panels
DEFAULT_MC, DEFAULT_KC, DEFAULT_NC = 100, 256, 4032


@dataclass(frozen=True)
class MicroKernels:
    """Jitted functions for one MR x NR micro-tile (MR, NR are compile-time constants)."""

    mr: int
    nr: int
    pack_a: object        # (a, ap): a (M, K) -> ap (KC blocks, M panels, KC, MR)
    pack_b: object        # (b, bp): b (K, N) -> bp (KC blocks, N panels, KC, NR)
    macro: object         # one (NC, KC) block of C += A_block @ B_block
    gather: object        # indirect micro-kernel: A rows read through offsets
    indirect: object      # threaded driver of ``gather`` over a whole indirection buffer
    batched_task: object  # one (GEMM, NR panel) task of ``batched``, for a caller's own loop
    batched: object       # threaded driver of ``gather``: a batch of GEMMs, B prepacked


@cache
def micro_kernels(mr: int, nr: int, act: int = epilogue.NONE) -> MicroKernels:
    """Compile (or load from numba's cache) the kernels for an MR x NR micro-tile.

    ``act``: an activation (a :mod:`convbench.kernels.epilogue` code) applied as a tile's
    last K chunk is stored (``last``), on the sums in registers; the earlier chunks store
    partial sums, which must not be clamped.  Plain kernels keep their cache names."""
    MR, NR, MN = mr, nr, mr * nr
    ACT = act
    tile = f"{mr}x{nr}" + epilogue.key_suffix(act)

    @cached_closure(tile, parallel=True)
    def pack_a(a, ap):  # pragma: no cover - jitted
        m, k = a.shape
        n_pc, n_ip, kc_max, _ = ap.shape
        for t in numba.prange(n_pc * n_ip):
            pc = t // n_ip
            ip = t % n_ip
            k0 = pc * kc_max
            kc = min(kc_max, k - k0)
            rows = min(MR, m - ip * MR)
            panel = ap[pc, ip]
            for kk in range(kc):
                for i in range(MR):
                    panel[kk, i] = a[ip * MR + i, k0 + kk] if i < rows else 0.0

    @cached_closure(tile, parallel=True)
    def pack_b(b, bp):  # pragma: no cover - jitted
        k, n = b.shape
        n_pc, n_jp, kc_max, _ = bp.shape
        for t in numba.prange(n_pc * n_jp):
            pc = t // n_jp
            jp = t % n_jp
            k0 = pc * kc_max
            kc = min(kc_max, k - k0)
            cols = min(NR, n - jp * NR)
            panel = bp[pc, jp]
            for kk in range(kc):
                src = b[k0 + kk, jp * NR:jp * NR + cols]
                for j in range(cols):
                    panel[kk, j] = src[j]
                for j in range(NR - cols):
                    panel[kk, cols + j] = 0.0

    @cached_closure(tile, fastmath=True, inline="always")
    def store_scalar(acc, c, i0, j0, first, last):  # pragma: no cover - jitted
        """C[i0:, j0:] (+)= acc (an MR x NR array), clipped to C's edges; the activation
        applied to the result when ``last``."""
        rows = min(MR, c.shape[0] - i0)
        cols = min(NR, c.shape[1] - j0)
        for i in range(rows):
            crow = c[i0 + i, j0:j0 + cols]
            if first:
                for j in range(cols):
                    crow[j] = acc[i, j]
            else:
                for j in range(cols):
                    crow[j] += acc[i, j]
            if ACT != epilogue.NONE and last:
                for j in range(cols):
                    crow[j] = epilogue.scalar(crow[j], ACT)


    @cached_closure(tile, fastmath=True, inline="always")
    def store_tile(acc, c, i0, j0, first, last):  # pragma: no cover - jitted
        """C[i0:, j0:] (+)= the register tile ``acc``, clipped to C's edges: whole vectors
        into C's rows when the tile's columns fit, else through a stack copy; the
        activation applied in the stores of the ``last`` K chunk (ACT is a closure
        constant: without one the branch folds away)."""
        rows = min(MR, c.shape[0] - i0)
        ldc = c.strides[0] // 4
        if j0 + NR <= c.shape[1]:
            if ACT != epilogue.NONE and last:
                if first:
                    tile_store(acc, c, i0 * ldc + j0, ldc, rows, MR, NR, False, ACT)
                else:
                    tile_store(acc, c, i0 * ldc + j0, ldc, rows, MR, NR, True, ACT)
            elif first:
                tile_store(acc, c, i0 * ldc + j0, ldc, rows, MR, NR, False, 0)
            else:
                tile_store(acc, c, i0 * ldc + j0, ldc, rows, MR, NR, True, 0)
        else:
            edge = numba.carray(stack_f32(MN), (MR, NR))
            tile_store(acc, edge, 0, NR, MR, MR, NR, False, 0)
            store_scalar(edge, c, i0, j0, first, last)

    @cached_closure(tile, fastmath=True)
    def micro(kc, a_panel, b_panel, c, i0, j0, first, last):  # pragma: no cover - jitted
        """MR x NR tile of C (+)= a_panel (kc x MR)^T @ b_panel (kc x NR)."""
        acc = tile_zero(MR, NR)
        for kk in range(kc):
            tile_fma(acc, a_panel, kk * MR, 1, b_panel, kk * NR, MR, NR)
        store_tile(acc, c, i0, j0, first, last)


    @cached_closure(tile, parallel=True, fastmath=True)
    def macro(ap, bp, c, kc, jp0, jp1, per_block, first, last):  # pragma: no cover - jitted
        """C[:, jp0*NR : jp1*NR] (+)= A_pc @ B_pc; ap: (M panels, KC, MR) of one KC block,
        in MC blocks of ``per_block`` panels (:func:`block_panels`)."""
        n_ip = ap.shape[0]
        n_ib = (n_ip + per_block - 1) // per_block
        n_jp = jp1 - jp0
        a_flat = ap.reshape(ap.shape[0], ap.shape[1] * MR)
        b_flat = bp.reshape(bp.shape[0], bp.shape[1] * NR)
        for t in numba.prange(n_ib * n_jp):   # task = (MC block, NR panel)
            ib = t // n_jp
            jp = jp0 + t % n_jp
            ip_end = min(n_ip, (ib + 1) * per_block)
            for ip in range(ib * per_block, ip_end):
                micro(kc, a_flat[ip], b_flat[jp], c, ip * MR, jp * NR, first, last)

    @cached_closure(tile, fastmath=True)
    def gather(x, ind, p0, t0, nt, icg, b_chunk, c, j0, first, last):  # pragma: no cover
        """MR x NR tile of C (+)= sum over taps t0 + t (t < nt) and channels q of
        row_{t0+t}(p0 + i)[q] * b_chunk[t*icg + q, j]: QNNPACK's indirect micro-kernel.

        ``ind[p, t]`` is the element offset from ``x``'s data of output pixel p's input row
        for tap t, or of the shared zero vector (outside ``x``).
        ``ind`` has rows up to p0 + MR: pad rows point at the zero vector.  The tile's
        loads and FMAs are :func:`~convbench.kernels.register_tile.tile_fma_rows`'s vectors
        (as numba loops, an index with a signed argument made the B loads gathers: 3.6
        GFLOP/s)."""
        acc = tile_zero(MR, NR)
        for t in range(nt):
            for q in range(icg):
                tile_fma_rows(acc, x, ind, p0, t0 + t, q, b_chunk, (t * icg + q) * NR, MR, NR)
        store_tile(acc, c, p0, j0, first, last)


    @cached_closure(tile, parallel=True, fastmath=True)
    def indirect(x, ind, taps, icg, bp, c, kt, per_block):  # pragma: no cover - jitted
        """C (M x N) = indirect-A @ B; bp: (N panels, taps*icg, NR).  Threads over
        (MC block of ``per_block`` row panels, NR panel) tasks (:func:`block_panels`);
        taps in chunks of ``kt`` so a B chunk stays in L1."""
        n_ip = ind.shape[0] // MR
        n_ib = (n_ip + per_block - 1) // per_block
        n_jp = bp.shape[0]
        b_flat = bp.reshape(n_jp, bp.shape[1] * NR)
        n_chunks = (taps + kt - 1) // kt
        for task in numba.prange(n_ib * n_jp):
            ib = task // n_jp
            jp = task % n_jp
            ip_end = min(n_ip, (ib + 1) * per_block)
            for ch in range(n_chunks):
                t0 = ch * kt
                b_chunk = b_flat[jp, t0 * icg * NR:]
                for ip in range(ib * per_block, ip_end):
                    gather(x, ind, ip * MR, t0, min(kt, taps - t0), icg, b_chunk, c,
                           jp * NR, ch == 0, ch == n_chunks - 1)

    @cached_closure(tile, fastmath=True, inline="always")
    def batched_task(a, rows, m, bp, c, b, jp):  # pragma: no cover - jitted
        """C[b, :m, NR panel jp] = A[b] @ B[b]'s panel jp: one task of :func:`batched`,
        its B panel streamed once over all of A[b]'s rows."""
        k = bp.shape[2]
        b_panel = bp[b, jp].reshape(k * NR)
        cb = c[b, :m]
        for ip in range((m + MR - 1) // MR):
            gather(a[b], rows, ip * MR, 0, 1, k, b_panel, cb, jp * NR, True, True)

    @cached_closure(tile, parallel=True, fastmath=True)
    def batched(a, rows, m, bp, c):  # pragma: no cover - jitted
        """C[b, :m] = A[b] @ B[b] for every b of a batch of GEMMs (Winograd's alpha^2).

        A[b] is not packed: its row p starts at element ``rows[p, 0]`` of ``a[b]`` (a
        one-tap indirection buffer), which ``gather`` reads directly, so only the
        prepacked B is in panel form.  bp: (batch, N panels, K, NR), one KC block of
        the whole K; ``rows`` has at least ceil(m / MR) * MR rows, each inside ``a[b]``;
        c: (batch, >= m, N).  Threads over (b, NR panel) tasks, b outermost."""
        n_jp = bp.shape[1]
        for task in numba.prange(bp.shape[0] * n_jp):
            batched_task(a, rows, m, bp, c, task // n_jp, task % n_jp)

    return MicroKernels(mr, nr, pack_a, pack_b, macro, gather, indirect, batched_task,
                        batched)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Blocking:
    """The BLIS blocking parameters of one GEMM."""

    MR: int = DEFAULT_MR
    NR: int = DEFAULT_NR
    MC: int = DEFAULT_MC
    KC: int = DEFAULT_KC
    NC: int = DEFAULT_NC

    def __post_init__(self) -> None:
        if min(self.MR, self.NR, self.MC, self.KC, self.NC) < 1:
            raise ValueError(f"blocking sizes must be positive: {self}")

    @property
    def kernels(self) -> MicroKernels:
        return micro_kernels(self.MR, self.NR)

    def packed_a_shape(self, m: int, k: int) -> tuple[int, int, int, int]:
        return (_ceil(k, self.KC), _ceil(m, self.MR), min(self.KC, k), self.MR)

    def packed_b_shape(self, k: int, n: int) -> tuple[int, int, int, int]:
        return (_ceil(k, self.KC), _ceil(n, self.NR), min(self.KC, k), self.NR)

    def pack_a(self, a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """A (M x K) into KC x MR panels: shape (K/KC, M/MR, KC, MR), zero-padded."""
        m, k = a.shape
        out = page_aligned_empty(self.packed_a_shape(m, k)) if out is None else out
        self.kernels.pack_a(a, out)
        return out

    def pack_b(self, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """B (K x N) into KC x NR panels: shape (K/KC, N/NR, KC, NR), zero-padded.

        Every memory layout of ``b`` (C, F, strided) is a signature numba compiles and
        caches on its own, and a worker that compiles is restarted before it measures
        (harness/compiled.py): callers pass C-contiguous B where they can (a 1x1 conv's
        HWIO weights are an F-order view of OIHW; packing them as such cost the smoke
        suite's 1x1 layer a second worker)."""
        k, n = b.shape
        out = page_aligned_empty(self.packed_b_shape(k, n)) if out is None else out
        self.kernels.pack_b(b, out)
        return out

    def pack_b_batch(self, b: np.ndarray) -> np.ndarray:
        """A batch of B (batch x K x N), each as one whole-K block of NR panels:
        shape (batch, N/NR, K, NR), the operand of ``kernels.batched`` (KC is not used)."""
        batch, k, n = b.shape
        whole_k = Blocking(self.MR, self.NR, self.MC, max(k, 1), self.NC)
        out = page_aligned_empty((batch, *whole_k.packed_b_shape(k, n)[1:]))
        for i in range(batch):
            whole_k.kernels.pack_b(b[i], out[i][np.newaxis])
        return out

    def multiply_packed(self, ap: np.ndarray, bp: np.ndarray, c: np.ndarray, k: int,
                        accumulate: bool = False) -> None:
        """C (+)= A @ B from packed operands; loops NC (jc) then KC (pc), threads inside."""
        if c.strides[1] != c.itemsize:
            raise ValueError("c's rows must be contiguous (the micro-kernel stores vectors)")
        n = c.shape[1]
        n_jp = _ceil(n, self.NR)
        panels_per_nc = max(1, self.NC // self.NR)
        macro = self.kernels.macro
        per_block = block_panels(ap.shape[1], self.MR, self.MC)
        for jp0 in range(0, n_jp, panels_per_nc):
            jp1 = min(n_jp, jp0 + panels_per_nc)
            for pc in range(ap.shape[0]):
                kc = min(self.KC, k - pc * self.KC)
                macro(ap[pc], bp[pc], c, kc, jp0, jp1, per_block, pc == 0 and not accumulate,
                      pc == ap.shape[0] - 1)


_SCRATCH: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}


def _scratch(role: str, shape: tuple[int, ...]) -> np.ndarray:
    """A reused packing buffer: a fresh multi-MiB ``np.empty`` per call page-faults on
    first touch, which cost ~30% of a 2048^3 sgemm on 2 threads (faults serialise)."""
    key = (role, shape)
    if key not in _SCRATCH:
        if len(_SCRATCH) >= 8:
            _SCRATCH.pop(next(iter(_SCRATCH)))
        _SCRATCH[key] = page_aligned_empty(shape)
    return _SCRATCH[key]


def sgemm(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None,
          blocking: Blocking | None = None, accumulate: bool = False) -> np.ndarray:
    """C (+)= A @ B with the packed GEMM; a drop-in for ``np.matmul(a, b, out=c)``.

    ``c`` must be C-contiguous float32 (M x N) when given; it is allocated when not.
    Both operands are packed on every call (into buffers kept between calls, so sgemm
    is not reentrant across Python threads): prepack constant weights with
    :meth:`Blocking.pack_a`/:meth:`Blocking.pack_b` and call ``multiply_packed`` instead.
    """
    blocking = blocking or Blocking()
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: {a.shape} @ {b.shape}")
    if c is None:
        c = np.empty((m, n), np.float32)
    if c.shape != (m, n) or c.dtype != np.float32 or not c.flags.c_contiguous:
        raise ValueError("c must be a C-contiguous float32 array of shape (M, N)")
    if k == 0:
        if not accumulate:
            c[:] = 0.0
        return c
    ap = blocking.pack_a(a, _scratch("a", blocking.packed_a_shape(m, k)))
    bp = blocking.pack_b(b, _scratch("b", blocking.packed_b_shape(k, n)))
    blocking.multiply_packed(ap, bp, c, k, accumulate)
    return c


# The blocking as sweep parameters.  Each domain holds only the default, so the check of
# every network layer stays small; a suite widens them through ``sweep.params``.
# A suite may choose the micro-tiles that vectorise (module docstring: any other MR x NR
# computes correctly but compiles to scalar or spilling code, a new compile each) and any
# cache block: the drivers clamp blocks to the matrix (``min(KC, k)``, ``max(1, MC // MR)``),
# so a block size allocates nothing beyond the operands; 2^20 only keeps it a C int.
BLOCK_SIZES = Ints(1, 1 << 20)
BLOCKING_PARAMS = (
    Param("MR", (DEFAULT_MR,), DEFAULT_MR, f"micro-tile rows (vectorise: {MR_CHOICES})",
          allowed=MR_CHOICES),
    Param("NR", (DEFAULT_NR,), DEFAULT_NR, f"micro-tile columns (vectorise: {NR_CHOICES})",
          allowed=NR_CHOICES),
    Param("MC", (DEFAULT_MC,), DEFAULT_MC, "rows of the A block kept in L2",
          allowed=BLOCK_SIZES),
    Param("KC", (DEFAULT_KC,), DEFAULT_KC, "depth of a packed panel", allowed=BLOCK_SIZES),
    Param("NC", (DEFAULT_NC,), DEFAULT_NC, "columns of the B block kept in L3",
          allowed=BLOCK_SIZES),
)


def blocking_from(params: Mapping[str, ParamValue]) -> Blocking:
    """The :class:`Blocking` named by a variant's parameters (defaults for missing ones)."""
    return Blocking(*(int(params.get(p.name, p.default)) for p in BLOCKING_PARAMS))


def even_block(n: int, most: int, multiple: int = 1) -> int:
    """Items per block when ``n`` items are cut into the fewest blocks of at most ``most``,
    their count rounded up to a multiple of ``multiple`` (the threads; never more blocks than
    items), all of one size but the last, which is short by fewer items than there are
    blocks.  The rule behind :func:`block_panels` and Winograd's ``fused_block``: threads
    that take equal counts of blocks then get equal work."""
    n = max(1, n)
    blocks = _ceil(n, max(1, min(most, n)))
    return _ceil(n, min(n, _ceil(blocks, multiple) * multiple))


def block_panels(n_panels: int, mr: int, mc: int) -> int:
    """MR row panels per MC block (:func:`even_block`: as few blocks as MC rows allow, one
    size).  The threads take (MC block, NR panel) tasks in equal counts, so a block of one
    panel beside blocks of 16 left a thread idle: on a 14 x 14 layer (196 rows, 33 panels of
    MR = 6) blocks of 16, 16, 1 gave one of 2 threads 73% of the work (the indirect kernel
    ran res4b_branch2a only 1.35x faster on 2 threads than on 1, Zen 3); 11, 11, 11 give
    each half."""
    return even_block(n_panels, mc // mr)


# The GEMM behind im2col, Winograd and Strassen, one sweep parameter for all three.
GEMM_BACKENDS = ("blas", "own")
GEMM_BACKEND = Param("gemm", GEMM_BACKENDS, "blas",
                     "GEMM: blas = BLAS sgemm through numpy.matmul (a library baseline), "
                     "own = the packed GEMM of convbench.kernels.gemm")


def gemm_backend(params: Mapping[str, ParamValue]) -> str:
    """The variant's GEMM backend (:data:`GEMM_BACKEND`'s default when not given)."""
    return str(params.get(GEMM_BACKEND.name, GEMM_BACKEND.default))


def own_blocking(params: Mapping[str, ParamValue]) -> Blocking | None:
    """The default :class:`Blocking` for ``gemm=own``, None for ``gemm=blas``."""
    return Blocking() if gemm_backend(params) == "own" else None


def tile_unfit(mr: int, nr: int) -> str | None:
    """Why an MR x NR micro-tile does not fit this host's vector registers (it would spill
    accumulators in the micro-kernel's loop); None when it fits."""
    reason = REGISTERS.tile_unfit(mr, nr)
    return f"MR x NR = {reason}" if reason else None


# At most this many MR x NR tiles per layer in a tuning space: 6 x 16, 5 x 16, 4 x 24, 4 x 16,
# 2 x 32 and 1 x 64 are all the AVX2 host has; on zmm the cap keeps the best-filled ones.
TILE_SPACE_CAP = 6


def padded_work(rows: int, cols: int, mr: int, nr: int) -> float:
    """FMAs an MR x NR tiling of a rows x cols C computes per useful one (edge tiles run
    full size): ResNet-50's res5 has rows = 7 x 7 = 49, which MR = 6 pads to 54 (1.10)."""
    return (_ceil(rows, mr) * mr * _ceil(cols, nr) * nr) / (rows * cols)


def tile_space(rows: int, cols: int) -> list[tuple[int, int]]:
    """The MR x NR tiles worth measuring on a GEMM whose C is rows x cols, at most
    :data:`TILE_SPACE_CAP`: the default first, then the tiles of :data:`MR_CHOICES` x
    :data:`NR_CHOICES` that fit this host's registers with at least
    :data:`~convbench.kernels.register_tile.MIN_CHAINS` accumulators, least padded work
    first, then most accumulators (ties: more rows reuse each loaded B vector more)."""
    fit = [(mr, nr) for mr in MR_CHOICES for nr in NR_CHOICES
           if tile_unfit(mr, nr) is None
           and REGISTERS.tile_accumulators(mr, nr) >= MIN_CHAINS
           and (mr, nr) != (DEFAULT_MR, DEFAULT_NR)]
    fit.sort(key=lambda t: (round(padded_work(rows, cols, *t), 3),
                            -REGISTERS.tile_accumulators(*t), -t[0]))
    return [(DEFAULT_MR, DEFAULT_NR), *fit][:TILE_SPACE_CAP]


def blocking_unfit(params: Mapping[str, ParamValue]) -> str | None:
    """:func:`tile_unfit` for a variant's MR and NR parameters (defaults when absent)."""
    blocking = blocking_from(params)
    return tile_unfit(blocking.MR, blocking.NR)


def hot_gemm(blocking: Blocking | None) -> tuple[object, ...]:
    """The dispatcher doing an own-GEMM caller's arithmetic, for the static code profile
    (``Prepared.hot_kernels``): the macro-kernel, whose code holds the micro-kernel; none
    for BLAS (``blocking`` None), which is no code of ours."""
    return (blocking.kernels.macro,) if blocking is not None else ()


def blocking_unused(params: Mapping[str, ParamValue]) -> str | None:
    """Skip reason for non-default blocking on a variant that calls BLAS instead."""
    changed = [p.name for p in BLOCKING_PARAMS if params.get(p.name, p.default) != p.default]
    if changed:
        return f"{', '.join(changed)} only tune gemm=own"
    return None


def versus_blas(n: int, threads: int = 1, rounds: int = 5, blocking: Blocking | None = None,
                idle_s: float = 0.2) -> dict[str, float]:
    """GFLOP/s (best of ``rounds``) of :func:`sgemm` and numpy's BLAS on n^3, same process.

    Rounds alternate the two; ``idle_s`` of sleep before each call lets the other
    library's spinning worker threads (OpenBLAS, OpenMP) go quiet: without it, 2-thread
    figures of whichever ran second halved on the 2-core host.
    """
    import time

    from threadpoolctl import threadpool_limits

    blocking = blocking or Blocking()
    numba.set_num_threads(threads)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    c = np.empty((n, n), np.float32)
    best = {"own": np.inf, "blas": np.inf}
    with threadpool_limits(threads):
        sgemm(a, b, c, blocking)
        np.matmul(a, b, out=c)
        for _ in range(rounds):
            for name in best:
                time.sleep(idle_s)
                t0 = time.perf_counter()
                if name == "own":
                    sgemm(a, b, c, blocking)
                else:
                    np.matmul(a, b, out=c)
                best[name] = min(best[name], time.perf_counter() - t0)
    flops = 2.0 * n ** 3
    own, blas = flops / best["own"] / 1e9, flops / best["blas"] / 1e9
    return {"n": n, "threads": threads, "own_gflops": own, "blas_gflops": blas,
            "ratio": own / blas}
