"""Indirect convolution (QNNPACK; Dukhan 2019; seed 001): GEMM through an indirection buffer.

NHWC.  For every output pixel p (all images, M = N*OH*OW rows) and kernel tap t (KH*KW),
the indirection buffer holds the address of the input row of IC values that tap reads;
taps that fall into the padding point at one shared zero vector.  The MR x NR micro-kernel
of :mod:`convbench.kernels.gemm` reads its A operand through the buffer, so nothing is
copied: the weights are the packed B (HWIO rows, KC x NR panels), the output the C matrix.

``build`` computes the buffer (done once).  Entries are element offsets from the input's
data pointer; the zero vector lives outside the input, so its entries depend on where the
input is: like QNNPACK, which rebuilds its pointers when the input pointer changes,
``run`` sets them the first time it sees an input buffer and again only if it moves.
Parameters MR, NR, MC, KC are the packed GEMM's (KC here counts K = tap x channel rows).
A relu or relu6 after the conv runs in the micro-kernel's stores of each tile's last K
chunk (``fuse_activation``), as in the other kernels a network plan picks; VGG-16's plans
run conv1_1 (IC = 3) here, whose relu as glue streamed 12 MiB again: 140 us of a 29 ms
pass at 2 threads (Zen 5 host).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from convbench.kernels import epilogue
from convbench.kernels.base import ACTIVATIONS, Algorithm, ParamValue, Prepared
from convbench.kernels.buffers import packed_weights, page_aligned_empty, page_aligned_zeros
from convbench.kernels.gemm import (
    BLOCKING_PARAMS,
    DEFAULT_KC,
    DEFAULT_MC,
    Blocking,
    block_panels,
    blocking_from,
    blocking_unfit,
    micro_kernels,
    tile_space,
)
from convbench.spec.problem import ConvProblem

_PAD = -1   # offset marking a padding tap (bound to the zero vector)

PARAMS = tuple(p for p in BLOCKING_PARAMS if p.name != "NC")   # B is never re-blocked by N


def input_row_offsets(p: ConvProblem, rows: int) -> np.ndarray:
    """(rows, KH*KW) element offsets of each output pixel's input rows in flat NHWC input.

    Row r < N*OH*OW is pixel (n, oh, ow) in order; taps run kh-major.  Padding taps and the
    rows past N*OH*OW (filling the last MR panel) hold ``_PAD``."""
    n, oh, ow, kh, kw = np.meshgrid(np.arange(p.mb), np.arange(p.oh), np.arange(p.ow),
                                    np.arange(p.kh), np.arange(p.kw), indexing="ij")
    ih = oh * p.sh + kh * (p.dh + 1) - p.ph
    iw = ow * p.sw + kw * (p.dw + 1) - p.pw
    inside = (ih >= 0) & (ih < p.ih) & (iw >= 0) & (iw < p.iw)
    offsets = np.where(inside, ((n * p.ih + ih) * p.iw + iw) * p.ic, _PAD)
    out = np.full((rows, p.kh * p.kw), _PAD, np.int64)
    out[:p.mb * p.oh * p.ow] = offsets.reshape(-1, p.kh * p.kw)
    return out


class IndirectNHWC(Prepared):
    in_layout = out_layout = "nhwc"

    def __init__(self, problem: ConvProblem, w: np.ndarray, blocking: Blocking):
        p = self.p = problem
        self.blocking = blocking
        self.kernels = blocking.kernels
        self.taps = p.kh * p.kw
        m = p.mb * p.oh * p.ow
        rows = -(-m // blocking.MR) * blocking.MR
        self.offsets = input_row_offsets(p, rows)
        self.bound = np.empty_like(self.offsets)     # offsets with the zero vector's set
        self.zero = page_aligned_zeros(p.ic)                    # the shared zero vector
        self.bound_to = -1
        self.rebinds = 0
        # B: per group the HWIO weights (taps*ICg x OCg) as one KC block of NR panels
        k = p.reduction_length
        wg = np.asarray(w, np.float32).reshape(p.g, p.ocg, p.icg, p.kh, p.kw)
        # C order even where the reshape is a view (1x1: F order): one pack_b signature
        hwio = np.ascontiguousarray(wg.transpose(0, 3, 4, 2, 1).reshape(p.g, k, p.ocg))
        whole_k = Blocking(blocking.MR, blocking.NR, blocking.MC, k, blocking.NC)
        self.wpacked = [packed_weights(whole_k.pack_b(hwio[g])[0]) for g in range(p.g)]
        self.taps_per_chunk = max(1, blocking.KC // p.icg)
        self.panels_per_block = block_panels(rows // blocking.MR, blocking.MR, blocking.MC)
        self.packed_weight_bytes = sum(b.nbytes for b in self.wpacked)
        # a group's output columns are strided in NHWC: it is computed into a contiguous
        # buffer and copied, so the kernel sees one layout of C (a strided C is another
        # signature to compile: ~2.8 s on the smoke suite's depthwise layer, AMD host)
        self.gout = page_aligned_empty((m, p.ocg)) if p.g > 1 else None
        self.workspace_bytes = sum(a.nbytes for a in (self.offsets, self.bound, self.zero,
                                                      self.gout) if a is not None)

    def _bind(self, x: np.ndarray) -> None:
        """Point the padding taps at the zero vector, relative to input buffer ``x``."""
        base = x.ctypes.data
        gap = self.zero.ctypes.data - base
        if gap % 4:
            raise ValueError("input buffer is not 4-byte aligned")
        np.copyto(self.bound, self.offsets)
        self.bound[self.offsets == _PAD] = gap // 4
        self.bound_to = base
        self.rebinds += 1

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        p = self.p
        if not x.flags.c_contiguous:
            raise ValueError("indirect convolution needs a C-contiguous NHWC input")
        if x.ctypes.data != self.bound_to:
            self._bind(x)
        c = y.reshape(p.mb * p.oh * p.ow, p.oc)
        flat = x.reshape(-1)
        for g in range(p.g):   # a group reads its channels: shift x (and the zero vector's gap)
            out = c if self.gout is None else self.gout
            self.kernels.indirect(flat[g * p.icg:], self.bound, self.taps, p.icg,
                                  self.wpacked[g], out, self.taps_per_chunk, self.panels_per_block)
            if self.gout is not None:
                c[:, g * p.ocg:(g + 1) * p.ocg] = self.gout

    def fuse_activation(self, kind: str) -> bool:
        """The activation in the last K chunk's stores (:func:`~convbench.kernels.gemm.
        micro_kernels`); not with groups, whose output goes through a copy."""
        if self.gout is not None:
            return False
        self.kernels = micro_kernels(self.blocking.MR, self.blocking.NR, epilogue.CODES[kind])
        return True

    def hot_kernels(self) -> tuple[object, ...]:
        return (self.kernels.indirect,)

    def info(self) -> dict[str, ParamValue]:
        padding_taps = int(np.count_nonzero(self.offsets[:self.p.mb * self.p.oh * self.p.ow]
                                            == _PAD))
        return {"indirection_bytes": int(self.offsets.nbytes),
                "indirection_entries": int(self.offsets.size),
                "zero_vector_taps": padding_taps,
                "taps_per_chunk": self.taps_per_chunk,
                "panels_per_block": self.panels_per_block,
                "rebinds": self.rebinds}


def tuning_space(problem: ConvProblem) -> list[dict[str, ParamValue]]:
    """What ``convbench tune`` measures for a layer: the GEMM's register tiles for its
    C = (N*OH*OW) x OCg (:func:`~convbench.kernels.gemm.tile_space`: the best tile moves
    with the layer -- 49 output rows on res5 pad to 54 with MR = 6, to 50 with MR = 5), each
    at the default KC and, where the reduction (taps x ICg) is longer, at twice it (fewer
    passes over C; more taps per L1-resident B chunk).  Groups > 1 keep the default: a
    group's GEMM is ICg = 1 wide on depthwise layers, where the tile is not what counts."""
    if problem.g != 1:
        return [{p.name: p.default for p in PARAMS}]
    depths = [DEFAULT_KC] + ([2 * DEFAULT_KC] if problem.reduction_length > DEFAULT_KC else [])
    return [{"MR": mr, "NR": nr, "MC": DEFAULT_MC, "KC": kc}
            for mr, nr in tile_space(problem.mb * problem.oh * problem.ow, problem.ocg)
            for kc in depths]


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    return IndirectNHWC(problem, w, blocking_from(params))


ALGORITHMS = [
    Algorithm(
        name="indirect",
        title="indirect convolution",
        source="QNNPACK (Dukhan 2019, 'The Indirect Convolution Algorithm'); seed 001",
        layouts=("nhwc",),
        build=_build,
        params=PARAMS,
        applies=lambda problem, layout, params: blocking_unfit(params),
        epilogues=lambda problem, layout: ACTIVATIONS if problem.g == 1 else frozenset(),
        tuning_space=tuning_space,
        notes="No im2col copy: the packed-GEMM micro-kernel reads input rows through an "
              "indirection buffer of addresses; padding taps read one zero vector.",
    )
]
