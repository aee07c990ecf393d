"""Strassen 1x1: the cost model, odd shapes at every depth, the accuracy guard, a broken level."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convbench.harness.inputs import make_inputs
from convbench.kernels.registry import get
from convbench.kernels.strassen import (
    ERROR_GROWTH,
    StrassenNCHW,
    auto_depth,
    level_cost,
    max_accurate_depth,
)
from convbench.spec.problem import ConvProblem
from tests.kernels.gemm_family_support import check_variant, compare_output, conv_problems


def test_level_cost_follows_mnn_terms():
    cost = level_cost(e=8, l=4, h=6, penalty=1.0)
    assert cost.saved == 4 * 2 * 3                              # eSub * lSub * hSub
    assert cost.extra == 4 * 4 * 2 + 4 * 2 * 3 + 7 * 4 * 3     # A + B + C additions
    assert not cost.pays
    assert level_cost(3136, 256, 256).pays
    assert level_cost(3136, 256, 256, penalty=1e3).pays is False   # penalty scales extra


def test_auto_depth_recurses_while_a_level_pays_and_stays_accurate():
    assert auto_depth(3136, 32, 32) == 0          # small channel counts: extra > saved
    assert auto_depth(3136, 64, 64) == 1
    assert auto_depth(3136, 256, 256) == 3         # model says yes down to three levels
    assert auto_depth(3136, 256, 256, max_depth=2) == 2
    assert max_accurate_depth(7) == 0 and max_accurate_depth(8) == 1
    assert max_accurate_depth(16) == 2
    assert auto_depth(10**6, 15, 10**4) <= max_accurate_depth(15)


@settings(max_examples=15, deadline=None)
@given(problem=conv_problems(pointwise=True, max_channels=40),
       depth=st.sampled_from(["auto", 0, 1, 2]), gemm=st.sampled_from(["blas", "own"]))
def test_matches_reference_or_says_why_not(problem, depth, gemm):
    params = {"depth": depth, "gemm": gemm}
    reason = get("strassen").applies(problem, "nchw", params)
    if reason is None:
        assert check_variant(problem, "strassen", "nchw", params) == "ok"
    else:
        assert "IC >=" in reason


@pytest.mark.parametrize("depth", [1, 2])
def test_odd_sizes_are_padded_and_info_reports_savings(depth):
    p = ConvProblem.make(mb=2, ic=37, oc=23, ih=5, iw=7, kh=1)
    assert check_variant(p, "strassen", "nchw", {"depth": depth}) == "ok"
    _x, w = make_inputs(p)
    info = StrassenNCHW(p, w, depth, None).info()
    assert info["depth"] == depth
    unit = 2 ** depth                       # every dim padded to a multiple of 2^depth
    ic, oc, plane = (-(-v // unit) * unit for v in (37, 23, 35))
    assert info["macs_per_image"] == 7 ** depth * (ic * oc * plane) // 8 ** depth
    assert info["macs_saved"] == 37 * 23 * 35 - info["macs_per_image"]


def test_skips_what_is_not_a_unit_stride_1x1():
    alg = get("strassen")
    assert "1x1" in alg.applies(ConvProblem.make(ic=16, oc=16, ih=5, kh=3), "nchw", {})
    assert "1x1" in alg.applies(ConvProblem.make(ic=16, oc=16, ih=5, kh=1, sh=2), "nchw", {})
    few = ConvProblem.make(ic=6, oc=16, ih=5, kh=1)
    assert "IC >= 8" in alg.applies(few, "nchw", {"depth": 1})


def test_a_level_missing_one_product_fails_even_with_the_growth():
    p = ConvProblem.make(ic=32, oc=24, ih=6, kh=1)
    x, w = make_inputs(p)
    prepared = StrassenNCHW(p, w, 1, None)
    prepared.left.children[2].matrix[:] = 0.0     # M3 = S4 @ B22 vanishes: C12 is wrong
    y = np.empty(p.output_shape, np.float32)
    prepared.run(x, y)
    assert not compare_output(p, y, growth=ERROR_GROWTH).passed
