"""Hypothesis strategies for small conv problems, shared by the kernel tests."""

from __future__ import annotations

from hypothesis import strategies as st

from convbench.spec.problem import ConvProblem


@st.composite
def general_problems(draw, max_channels: int = 9, max_size: int = 11) -> ConvProblem:
    """Any stride, padding, dilation, groups, non-square; small enough to check quickly."""
    g = draw(st.sampled_from([1, 1, 1, 2, 3]))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dh, dw = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    ph, pw = draw(st.integers(0, kh)), draw(st.integers(0, kw))
    ih = draw(st.integers(max(1, (kh - 1) * (dh + 1) + 1 - 2 * ph), max_size))
    iw = draw(st.integers(max(1, (kw - 1) * (dw + 1) + 1 - 2 * pw), max_size))
    return ConvProblem.make(
        mb=draw(st.integers(1, 2)), g=g, ic=g * draw(st.integers(1, max_channels)),
        oc=g * draw(st.integers(1, max_channels)), ih=ih, iw=iw, kh=kh, kw=kw,
        sh=draw(st.integers(1, 3)), sw=draw(st.integers(1, 3)), ph=ph, pw=pw, dh=dh, dw=dw,
        name="general")


@st.composite
def depthwise_problems(draw) -> ConvProblem:
    c = draw(st.integers(1, 40))
    s = draw(st.integers(1, 2))
    return ConvProblem.make(mb=draw(st.integers(1, 2)), g=c, ic=c, oc=c,
                            ih=draw(st.integers(3, 19)), iw=draw(st.integers(3, 19)),
                            kh=3, kw=3, sh=s, sw=s, ph=1, pw=1, name="depthwise")


@st.composite
def dense_3x3_problems(draw) -> ConvProblem:
    """3x3 stride 1 pad 1, groups 1: the shapes Winograd and blocked kernels target."""
    return ConvProblem.make(mb=draw(st.integers(1, 2)), ic=draw(st.integers(1, 35)),
                            oc=draw(st.integers(1, 35)), ih=draw(st.integers(1, 17)),
                            iw=draw(st.integers(1, 17)), kh=3, kw=3, ph=1, pw=1,
                            name="dense3x3")


@st.composite
def pointwise_problems(draw) -> ConvProblem:
    """1x1 stride 1: the shapes of im2col's shortcut, Strassen and MobileNet's pw layers."""
    return ConvProblem.make(mb=draw(st.integers(1, 2)), ic=draw(st.integers(1, 70)),
                            oc=draw(st.integers(1, 70)), ih=draw(st.integers(1, 13)),
                            iw=draw(st.integers(1, 13)), kh=1, kw=1, name="pointwise")


any_problem = st.one_of(general_problems(), depthwise_problems(), dense_3x3_problems(),
                        pointwise_problems())
