"""Shared test helpers for the GEMM-family kernels: random odd conv shapes and the check."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from hypothesis import strategies as st

from convbench.harness.inputs import make_inputs
from convbench.harness.verify import verify
from convbench.kernels.base import ParamValue, Variant
from convbench.kernels.reference import ErrorReport, Reference
from convbench.spec.problem import ConvProblem, output_size


@st.composite
def conv_problems(draw: st.DrawFn, pointwise: bool = False, max_channels: int = 19
                  ) -> ConvProblem:
    """Small problems with odd sizes (not multiples of MR, NR or a tile).

    ``pointwise``: 1x1, stride 1, no padding (Strassen's domain)."""
    mb = draw(st.integers(1, 2))
    ic = draw(st.integers(1, max_channels))
    oc = draw(st.integers(1, max_channels))
    if pointwise:
        ih, iw = draw(st.integers(1, 13)), draw(st.integers(1, 13))
        return ConvProblem.make(mb=mb, ic=ic, oc=oc, ih=ih, iw=iw, kh=1, kw=1)
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    ph, pw = draw(st.integers(0, kh)), draw(st.integers(0, kw))
    ih = draw(st.integers(max(1, (kh - 1) * (dh + 1) + 1 - 2 * ph), 15))
    iw = draw(st.integers(max(1, (kw - 1) * (dw + 1) + 1 - 2 * pw), 15))
    if output_size(ih, kh, sh, ph, dh) < 1 or output_size(iw, kw, sw, pw, dw) < 1:
        ih, iw, ph, pw = ih + 2 * kh * (dh + 1), iw + 2 * kw * (dw + 1), 0, 0
    return ConvProblem.make(mb=mb, ic=ic, oc=oc, ih=ih, iw=iw, kh=kh, kw=kw, sh=sh, sw=sw,
                            ph=ph, pw=pw, dh=dh, dw=dw)


def check_variant(problem: ConvProblem, algorithm: str, layout: str,
                  params: Mapping[str, ParamValue] | None = None, seed: int = 0) -> str:
    """Run one variant through the harness's verify; returns "ok"/"fail" (+ reason)."""
    x, w = make_inputs(problem, seed)
    verdict, _ = verify(problem, Variant.of(algorithm, layout, params), Reference(problem, x, w),
                        x, w)
    return verdict.status if verdict.status == "ok" else f"{verdict.status}: {verdict.reason}"


def compare_output(problem: ConvProblem, y_nchw: np.ndarray, growth: float = 1.0,
                   seed: int = 0) -> ErrorReport:
    """The reference's verdict on an output computed outside the registry (broken variants)."""
    x, w = make_inputs(problem, seed)
    return Reference(problem, x, w).compare(y_nchw, growth)
