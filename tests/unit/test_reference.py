"""The float64 reference and the tolerance rule: float32 kernels pass, buggy ones fail."""

import numpy as np
import pytest

from convbench.harness.inputs import make_inputs
from convbench.kernels.reference import EPS32, Reference, conv2d_reference
from convbench.spec.problem import ConvProblem


def _naive(p: ConvProblem, x, w):
    x, w = x.astype(np.float64), w.astype(np.float64)
    y = np.zeros(p.output_shape)
    for n in range(p.mb):
        for o in range(p.oc):
            g = o // p.ocg
            for a in range(p.oh):
                for b in range(p.ow):
                    for c in range(p.icg):
                        for i in range(p.kh):
                            for j in range(p.kw):
                                h = a * p.sh - p.ph + i * (p.dh + 1)
                                v = b * p.sw - p.pw + j * (p.dw + 1)
                                if 0 <= h < p.ih and 0 <= v < p.iw:
                                    y[n, o, a, b] += x[n, g * p.icg + c, h, v] * w[o, c, i, j]
    return y


@pytest.mark.parametrize("fields", [
    dict(mb=2, g=1, ic=3, ih=7, iw=5, oc=4, kh=3, kw=2, sh=2, sw=1, ph=1, pw=0, dh=1, dw=0),
    dict(mb=1, g=3, ic=6, ih=6, iw=6, oc=9, kh=2, kw=3, sh=1, sw=2, ph=0, pw=2, dh=0, dw=1),
    dict(mb=1, g=4, ic=4, ih=5, iw=8, oc=4, kh=3, kw=3, sh=2, sw=2, ph=1, pw=1),
])
def test_reference_equals_naive_loops(fields):
    p = ConvProblem.make(**fields)
    x, w = make_inputs(p, seed=3)
    np.testing.assert_allclose(conv2d_reference(p, x, w), _naive(p, x, w), rtol=1e-12,
                               atol=1e-12)


def _float32_gemm_conv(p: ConvProblem, x, w):
    """1x1-as-GEMM or 3x3 via shifted float32 GEMMs: a correct float32 kernel."""
    xp = np.pad(x, ((0, 0), (0, 0), (p.ph, p.ph), (p.pw, p.pw)))
    y = np.zeros(p.output_shape, np.float32)
    for i in range(p.kh):
        for j in range(p.kw):
            tap = xp[0, :, i:i + p.oh, j:j + p.ow].reshape(p.ic, -1)
            y[0] += (w[:, :, i, j] @ tap).reshape(p.oc, p.oh, p.ow)
    return y


@pytest.mark.parametrize("ic, k", [(1, 3), (16, 1), (64, 3), (512, 3), (2048, 1)])
def test_float32_kernels_pass_and_a_missing_tap_fails(ic, k):
    p = ConvProblem.make(ic=ic, ih=7, oc=32, kh=k, ph=k // 2)
    x, w = make_inputs(p, seed=4)
    ref = Reference(p, x, w)
    good = ref.compare(_float32_gemm_conv(p, x, w))
    assert good.passed, good.reason
    assert good.worst_ratio < 0.5  # comfortable margin for correct float32 summation
    w_bug = w.copy()
    w_bug[:, -1, -1, -1] = 0.0       # one product missing from every output
    bad = ref.compare(_float32_gemm_conv(p, x, w_bug))
    assert not bad.passed


def test_bound_scales_with_sqrt_k_and_growth():
    p = ConvProblem.make(ic=100, ih=3, oc=1, kh=1)
    ref = Reference(p, np.ones(p.input_shape, np.float32), np.ones(p.weight_shape, np.float32))
    np.testing.assert_allclose(ref.bound(), 2 * EPS32 * 10 * 100, rtol=1e-9)
    np.testing.assert_allclose(ref.bound(4.0), 4 * ref.bound(), rtol=1e-9)


def test_nan_and_shape_errors_fail_with_reason():
    p = ConvProblem.make(ic=2, ih=4, oc=2, kh=3, ph=1)
    x, w = make_inputs(p)
    ref = Reference(p, x, w)
    y = ref.y.astype(np.float32)
    y[0, 1, 2, 3] = np.nan
    rep = ref.compare(y)
    assert not rep.passed and "non-finite" in rep.reason
    assert "shape" in ref.compare(y[:, :1]).reason
