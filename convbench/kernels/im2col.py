"""im2col + GEMM (Caffe): unfold the input into a matrix, then one GEMM per group.

NCHW: cols is (IC/g*KH*KW) x (OH*OW) and Y_g = W_g (OC/g x K) @ cols.
NHWC: cols is (OH*OW) x (KH*KW*IC/g) and Y_g = cols @ W_g (K x OC/g), W in HWIO order.
A 1x1, stride-1, unpadded conv needs no unfold: the input already is the matrix.
The workspace (the cols matrix) is about KH*KW times the input.
The GEMM is BLAS sgemm (numpy.matmul) or our packed GEMM (:mod:`convbench.kernels.gemm`),
whose constant operand (the weights) is packed once in ``build``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numba
import numpy as np

from convbench.kernels._numba_support import U
from convbench.kernels.base import Algorithm, ParamValue, Prepared
from convbench.kernels.buffers import packed_weights, page_aligned_empty
from convbench.kernels.gemm import GEMM_BACKEND, Blocking, hot_gemm, own_blocking
from convbench.spec.problem import ConvProblem

# The unfolds index flat buffers with unsigned (U) offsets: numba's wraparound test on
# signed indices, a 3-d index per element and an array view per tap kept them scalar and
# slow (1 thread, Zen 3 host: NCHW 1.3-5 GB/s of cols on ResNet-50's 3 x 3 layers; NHWC on
# conv1's 3 channels 0.6 GB/s, 11.6 ms).


@numba.njit(parallel=True, cache=True)
def _unfold_nchw(x, cols, c0, icg, kh_len, kw_len, sh, sw, ph, pw, dh, dw,
                 oh_len, ow_len):  # pragma: no cover - jitted
    """cols[(c*KH + kh)*KW + kw, oh*OW + ow] = x[c0 + c, ih, iw] (0 in the padding)."""
    _, ih_len, iw_len = x.shape
    xf, cf = x.reshape(-1), cols.reshape(-1)
    for r in numba.prange(icg * kh_len * kw_len):
        c = r // (kh_len * kw_len)
        kh = (r // kw_len) % kh_len
        kw = r % kw_len
        # the output columns whose input column lies inside x: [ow0, ow1)
        off = kw * (dw + 1) - pw
        ow0 = min(ow_len, max(0, (-off + sw - 1) // sw))
        ow1 = max(ow0, min(ow_len, (iw_len - off + sw - 1) // sw))
        for oh in range(oh_len):
            ih = oh * sh + kh * (dh + 1) - ph
            dst = U((r * oh_len + oh) * ow_len)
            if ih < 0 or ih >= ih_len:
                for ow in range(U(ow_len)):
                    cf[dst + ow] = 0.0
                continue
            src = U(((c0 + c) * ih_len + ih) * iw_len + off + ow0 * sw)   # column ow0's
            for ow in range(U(ow0)):
                cf[dst + ow] = 0.0
            inside = dst + U(ow0)
            for j in range(U(ow1 - ow0)):
                cf[inside + j] = xf[src + j * U(sw)]
            for ow in range(U(ow1), U(ow_len)):
                cf[dst + ow] = 0.0


@numba.njit(parallel=True, cache=True)
def _unfold_nhwc(x, cols, c0, icg, kh_len, kw_len, sh, sw, ph, pw, dh, dw,
                 oh_len, ow_len):  # pragma: no cover - jitted
    """cols[oh*OW + ow, (kh*KW + kw)*ICg + c] = x[ih, iw, c0 + c] (0 in the padding)."""
    ih_len, iw_len, c_len = x.shape
    xf, cf = x.reshape(-1), cols.reshape(-1)
    row_len = kh_len * kw_len * icg
    for oh in numba.prange(oh_len):
        for ow in range(ow_len):
            row = U((oh * ow_len + ow) * row_len)
            for kh in range(kh_len):
                ih = oh * sh + kh * (dh + 1) - ph
                for kw in range(kw_len):
                    iw = ow * sw + kw * (dw + 1) - pw
                    dst = row + U((kh * kw_len + kw) * icg)
                    if ih < 0 or ih >= ih_len or iw < 0 or iw >= iw_len:
                        for c in range(U(icg)):
                            cf[dst + c] = 0.0
                    else:
                        src = U((ih * iw_len + iw) * c_len + c0)
                        for c in range(U(icg)):
                            cf[dst + c] = xf[src + c]


class Im2colNCHW(Prepared):
    in_layout = out_layout = "nchw"

    def __init__(self, problem: ConvProblem, w: np.ndarray, blocking: Blocking | None = None):
        p = self.p = problem
        self.wmat = packed_weights(np.asarray(w, np.float32).reshape(p.g, p.ocg,
                                                                      p.reduction_length))
        self.skip_unfold = p.is_pointwise   # the im2col matrix is the input itself
        k = p.reduction_length
        self.cols = None if self.skip_unfold else page_aligned_empty((k, p.oh * p.ow))
        self.workspace_bytes = 0 if self.cols is None else self.cols.nbytes
        self.blocking = blocking
        if blocking is not None:  # Y_g = W_g @ cols: W_g is the packed A, cols the packed B
            self.wpacked = [packed_weights(blocking.pack_a(self.wmat[g])) for g in range(p.g)]
            self.colpacked = page_aligned_empty(blocking.packed_b_shape(k, p.oh * p.ow))
            self.packed_weight_bytes = sum(a.nbytes for a in self.wpacked)
            self.workspace_bytes += self.colpacked.nbytes

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        p = self.p
        for n in range(p.mb):
            yn = y[n].reshape(p.g, p.ocg, p.oh * p.ow)
            for g in range(p.g):
                if self.skip_unfold:
                    cols = x[n, g * p.icg:(g + 1) * p.icg].reshape(p.icg, p.ih * p.iw)
                else:
                    cols = self.cols
                    _unfold_nchw(x[n], cols, g * p.icg, p.icg, p.kh, p.kw, p.sh, p.sw,
                                 p.ph, p.pw, p.dh, p.dw, p.oh, p.ow)
                if self.blocking is None:
                    np.matmul(self.wmat[g], cols, out=yn[g])
                else:
                    self.blocking.pack_b(cols, self.colpacked)
                    self.blocking.multiply_packed(self.wpacked[g], self.colpacked, yn[g],
                                                  p.reduction_length)

    def info(self) -> dict[str, ParamValue]:
        return {"unfold_skipped": self.skip_unfold}

    def hot_kernels(self) -> tuple[object, ...]:
        return (*(() if self.skip_unfold else (_unfold_nchw,)), *hot_gemm(self.blocking))


class Im2colNHWC(Prepared):
    in_layout = out_layout = "nhwc"

    def __init__(self, problem: ConvProblem, w: np.ndarray, blocking: Blocking | None = None):
        p = self.p = problem
        # (g, KH*KW*ICg, OCg) so that cols @ wmat[g] gives a group's outputs
        wg = np.asarray(w, np.float32).reshape(p.g, p.ocg, p.icg, p.kh, p.kw)
        self.wmat = packed_weights(wg.transpose(0, 3, 4, 2, 1).reshape(p.g, p.reduction_length,
                                                                       p.ocg))
        self.packed_weight_bytes = self.wmat.nbytes
        self.skip_unfold = p.is_pointwise and p.g == 1
        k = p.reduction_length
        self.cols = None if self.skip_unfold else page_aligned_empty((p.oh * p.ow, k))
        self.gout = page_aligned_empty((p.oh * p.ow, p.ocg)) if p.g > 1 else None
        self.workspace_bytes = sum(a.nbytes for a in (self.cols, self.gout) if a is not None)
        self.blocking = blocking
        if blocking is not None:  # Y = cols @ W_g: cols is the packed A, W_g the packed B
            self.wpacked = [packed_weights(blocking.pack_b(self.wmat[g])) for g in range(p.g)]
            self.colpacked = page_aligned_empty(blocking.packed_a_shape(p.oh * p.ow, k))
            self.packed_weight_bytes = sum(b.nbytes for b in self.wpacked)
            self.workspace_bytes += self.colpacked.nbytes

    def _gemm(self, cols: np.ndarray, g: int, out: np.ndarray) -> None:
        if self.blocking is None:
            np.matmul(cols, self.wmat[g], out=out)
        else:
            self.blocking.pack_a(cols, self.colpacked)
            self.blocking.multiply_packed(self.colpacked, self.wpacked[g], out,
                                          self.p.reduction_length)

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        p = self.p
        for n in range(p.mb):
            yn = y[n].reshape(p.oh * p.ow, p.oc)
            for g in range(p.g):
                if self.skip_unfold:
                    cols = x[n].reshape(p.ih * p.iw, p.ic)
                else:
                    cols = self.cols
                    _unfold_nhwc(x[n], cols, g * p.icg, p.icg, p.kh, p.kw, p.sh, p.sw,
                                 p.ph, p.pw, p.dh, p.dw, p.oh, p.ow)
                if self.gout is None:
                    self._gemm(cols, 0, yn)
                else:  # a group's output columns are strided in NHWC: GEMM, then copy
                    self._gemm(cols, g, self.gout)
                    yn[:, g * p.ocg:(g + 1) * p.ocg] = self.gout

    def info(self) -> dict[str, ParamValue]:
        return {"unfold_skipped": self.skip_unfold}

    def hot_kernels(self) -> tuple[object, ...]:
        return (*(() if self.skip_unfold else (_unfold_nhwc,)), *hot_gemm(self.blocking))


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    # gemm=own uses the default blocking: the blocking sweep lives with the own-GEMM
    # algorithms (indirect, spatial_pack), keeping im2col's variant ids short and stable
    kind = Im2colNCHW if layout == "nchw" else Im2colNHWC
    return kind(problem, w, own_blocking(params))


ALGORITHMS = [
    Algorithm(
        name="im2col",
        title="im2col + GEMM",
        source="Caffe (Jia 2014); seed 000 section 2",
        layouts=("nchw", "nhwc"),
        build=_build,
        params=(GEMM_BACKEND,),
        notes="gemm=blas: BLAS sgemm through numpy.matmul (a library baseline); gemm=own: "
              "our packed GEMM.  The 1x1 stride-1 case skips the unfold.",
    )
]
