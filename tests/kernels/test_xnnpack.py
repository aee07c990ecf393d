"""XNNPACK-through-LiteRT baseline: skipped with its reason without ai-edge-litert, correct
on the problems TFLite's SAME/VALID padding can express, skipped with the reason elsewhere."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convbench.kernels import xnnpack
from convbench.kernels.registry import get
from convbench.spec.problem import ConvProblem, output_size
from tests.kernels.gemm_family_support import check_variant


@st.composite
def tflite_problems(draw: st.DrawFn) -> ConvProblem:
    """Small problems padded VALID or SAME (SAME only where its padding is symmetric), any
    stride 1-2 and dilation, dense, grouped or depthwise (multiplier 1 or 2)."""
    kind = draw(st.sampled_from(["dense", "grouped", "depthwise"]))
    g = 1 if kind == "dense" else draw(st.integers(2, 4))
    icg = 1 if kind == "depthwise" else draw(st.integers(1, 6))
    ocg = draw(st.integers(1, 2)) if kind == "depthwise" else draw(st.integers(1, 6))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    dh, dw = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    ih = draw(st.integers((kh - 1) * (dh + 1) + 1, 14))
    iw = draw(st.integers((kw - 1) * (dw + 1) + 1, 14))
    ph = pw = 0
    if draw(st.booleans()):  # SAME where it is symmetric on an axis, else VALID there too
        before, after = xnnpack._same_padding(ih, kh, sh, dh)
        ph = before if before == after else 0
        before, after = xnnpack._same_padding(iw, kw, sw, dw)
        pw = before if before == after else 0
    p = ConvProblem.make(g=g, mb=draw(st.integers(1, 2)), ic=g * icg, oc=g * ocg, ih=ih,
                         iw=iw, kh=kh, kw=kw, sh=sh, sw=sw, ph=ph, pw=pw, dh=dh, dw=dw)
    if xnnpack.tflite_padding(p) is None:  # SAME on one axis, VALID on the other
        p = p.replace(ph=0, pw=0, oh=output_size(ih, kh, sh, 0, dh),
                      ow=output_size(iw, kw, sw, 0, dw))
    return p


def test_is_a_baseline_skipped_with_a_reason_when_litert_is_missing(monkeypatch):
    alg = get("xnnpack")
    assert alg.baseline and alg.layouts == ("nhwc",)
    monkeypatch.setattr(xnnpack, "litert_available", lambda: False)
    p = ConvProblem.make(ic=3, oc=4, ih=5, kh=3, ph=1)
    assert alg.applies(p, "nhwc", {}) == "ai-edge-litert not installed"


@pytest.mark.parametrize("fields, padding", [
    (dict(ih=5, kh=3, ph=0), "VALID"),
    (dict(ih=5, kh=3, ph=1), "SAME"),
    (dict(ih=9, kh=3, sh=2, ph=1), "SAME"),      # odd input: SAME pads 1 before, 1 after
    (dict(ih=8, kh=3, sh=2, ph=1), None),        # even input: SAME pads 0 before, 1 after
    (dict(ih=224, kh=7, sh=2, ph=3), None),      # ResNet conv1: SAME pads 2 before, 3 after
    (dict(ih=7, kh=3, dh=1, ph=2), "SAME"),      # dilated: effective kernel 5
    (dict(ih=5, kh=3, ph=2), None),              # more than SAME
    (dict(ih=5, iw=6, kh=3, kw=1, ph=1, pw=0), "SAME"),  # 1-wide kernel: SAME pads w by 0
])
def test_tflite_padding_follows_the_same_rule(fields, padding):
    assert xnnpack.tflite_padding(ConvProblem.make(ic=2, oc=2, **fields)) == padding


def test_padding_tflite_cannot_express_is_skipped_with_the_reason(monkeypatch):
    monkeypatch.setattr(xnnpack, "litert_available", lambda: True)
    reason = get("xnnpack").applies(ConvProblem.make(ic=8, oc=8, ih=56, kh=3, sh=2, ph=1),
                                    "nhwc", {})
    assert reason == ("TFLite pads only VALID (0) or SAME (before, after: h=(0, 1), "
                      "w=(0, 1) here), not ph=1 pw=1 on both sides")


@settings(max_examples=25, deadline=None)
@given(problem=tflite_problems())
def test_matches_reference(problem):
    pytest.importorskip("ai_edge_litert")
    assert check_variant(problem, "xnnpack", "nhwc") == "ok"


def test_depthwise_is_delegated_and_reports_threads():
    pytest.importorskip("ai_edge_litert")
    import numba

    from convbench.harness.inputs import make_inputs

    p = ConvProblem.make(g=8, ic=8, oc=8, ih=9, kh=3, sh=2, ph=1)  # MobileNet's s2 shape
    assert check_variant(p, "xnnpack", "nhwc") == "ok"
    _x, w = make_inputs(p)
    prepared = xnnpack.LiteRTConv(p, w)  # raises unless XNNPACK took the node
    ops = [op["op_name"] for op in prepared.interpreter._get_ops_details()]
    assert ops == ["DEPTHWISE_CONV_2D", "DELEGATE"]
    info = prepared.info()
    assert info["delegate"] == "XNNPACK" and info["io"] == "copy"
    assert info["litert_threads"] == numba.get_num_threads()
