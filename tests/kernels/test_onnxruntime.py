"""ONNX Runtime baseline: skipped with its reason without the library, correct with it, and
the blocked layout runs ORT's NCHWc Conv alone."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convbench.harness.inputs import make_inputs
from convbench.kernels import layouts, onnxruntime_conv
from convbench.kernels.reference import Reference
from convbench.kernels.registry import get
from convbench.spec.problem import ConvProblem
from tests.conftest import numba_threads
from tests.kernels.gemm_family_support import check_variant, conv_problems
from tests.strategies import depthwise_problems, general_problems


def _blocked_layout() -> str:
    """nchw{x}c with MLAS's block on this host; skips where MLAS has no NCHWc kernels."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    block = onnxruntime_conv.mlas_nchwc_block()
    if block == 1:
        pytest.skip("MLAS has no NCHWc kernels on this host")
    return layouts.blocked_name(block)


def _check(problem: ConvProblem, layout: str) -> None:
    """The variant matches the reference, or is skipped with a reason (never silently)."""
    reason = get("onnxruntime").applies(problem, layout, {})
    if reason is None:
        assert check_variant(problem, "onnxruntime", layout) == "ok"
    else:
        assert layout != "nchw" and "NCHWc" in reason, reason


def test_is_a_baseline_skipped_with_a_reason_when_onnxruntime_is_missing(monkeypatch):
    alg = get("onnxruntime")
    assert alg.baseline
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    p = ConvProblem.make(ic=3, oc=4, ih=5, kh=3)
    for layout in alg.layouts:
        assert alg.applies(p, layout, {}) == "onnxruntime not installed"


def test_nhwc_is_skipped_with_its_reason():
    pytest.importorskip("onnxruntime")
    p = ConvProblem.make(ic=16, oc=16, ih=5, kh=3)
    assert get("onnxruntime").applies(p, "nhwc", {}) == onnxruntime_conv.NHWC_REASON


@settings(max_examples=10, deadline=None)
@given(problem=conv_problems(max_channels=40), blocked=st.booleans())
def test_matches_reference(problem, blocked):
    """Strided, padded, dilated, odd channel counts (padded to whole blocks)."""
    _check(problem, _blocked_layout() if blocked else "nchw")


@settings(max_examples=10, deadline=None)
@given(problem=st.one_of(general_problems(max_channels=20), depthwise_problems()),
       blocked=st.booleans())
def test_grouped_and_depthwise_match_reference(problem, blocked):
    _check(problem, _blocked_layout() if blocked else "nchw")


@pytest.mark.parametrize("problem", [
    ConvProblem.make(g=2, ic=32, oc=64, ih=7, kh=3, ph=1),          # whole blocks per group
    ConvProblem.make(g=40, ic=40, oc=40, ih=9, kh=3, sh=2, ph=1),   # depthwise, padded to 48
])
def test_blocked_groups_run(problem):
    layout = _blocked_layout()
    assert get("onnxruntime").applies(problem, layout, {}) is None
    assert check_variant(problem, "onnxruntime", layout) == "ok"


def test_blocked_layout_runs_the_nchwc_conv_alone_and_records_threads():
    import numba

    layout = _blocked_layout()
    p = ConvProblem.make(ic=32, oc=32, ih=8, kh=3, ph=1)
    _x, w = make_inputs(p)
    as_deployed = onnxruntime_conv.OrtConv(p, w, "nchw").info()
    assert as_deployed["ort_nodes"] == "ReorderInput>Conv(nchwc)>ReorderOutput"
    threads = numba.get_num_threads()
    with numba_threads(1):
        info = onnxruntime_conv.OrtConv(p, w, layout).info()
    assert info["ort_nodes"] == "Conv(nchwc)"
    assert info["ort_threads"] == 1 and as_deployed["ort_threads"] == threads
    assert info["onnxruntime"] == __import__("onnxruntime").__version__
    assert info["ort_spin"] == "session.intra_op.spin_duration_us=50"


def test_rebinds_when_the_buffers_change():
    """The IOBinding follows new input/output arrays (the harness may pass others)."""
    pytest.importorskip("onnxruntime")
    p = ConvProblem.make(mb=2, ic=5, oc=7, ih=6, kh=3, ph=1)
    x, w = make_inputs(p)
    prepared = onnxruntime_conv.OrtConv(p, w, "nchw")
    for x_now in (x, np.ascontiguousarray(x[:, :, ::-1])):
        y = np.full(p.output_shape, np.nan, np.float32)
        prepared.run(x_now, y)
        report = Reference(p, x_now, w).compare(y)
        assert report.passed, report.reason


def test_models_carry_an_ir_version_older_runtimes_load():
    # onnx writes its newest IR by default; ORT 1.30 refused onnx 1.23's IR 14 on the
    # lent Intel machine and the whole sweep stopped with a traceback.
    pytest.importorskip("onnx")
    model = onnxruntime_conv._conv_model(ConvProblem.make(ic=1, oc=1, ih=1, kh=1),
                                         np.ones((1, 1, 1, 1)), (1, 1), 1)
    assert model.ir_version == onnxruntime_conv.IR_VERSION


def test_a_runtime_that_cannot_load_the_model_is_a_skip_with_its_reason(monkeypatch):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")

    def refuse() -> int:
        raise RuntimeError("[ONNXRuntimeError] : 1 : FAIL : Unsupported model IR version\nmore")

    monkeypatch.setattr(onnxruntime_conv, "mlas_nchwc_block", refuse)
    onnxruntime_conv.load_failure.cache_clear()
    try:
        reason = get("onnxruntime").applies(ConvProblem.make(ic=8, oc=8, ih=6, kh=3), "nchw", {})
    finally:
        onnxruntime_conv.load_failure.cache_clear()
    assert reason == ("onnxruntime cannot load a one-Conv model here: "
                      "[ONNXRuntimeError] : 1 : FAIL : Unsupported model IR version")
