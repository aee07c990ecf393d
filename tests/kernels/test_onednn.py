"""oneDNN-through-PyTorch baseline: skipped with its reason without torch, correct with it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convbench.kernels import onednn
from convbench.kernels.registry import get
from convbench.spec.problem import ConvProblem
from tests.kernels.gemm_family_support import check_variant, conv_problems


def test_is_a_baseline_skipped_with_a_reason_when_torch_is_missing(monkeypatch):
    alg = get("onednn")
    assert alg.baseline
    monkeypatch.setattr(onednn, "torch_available", lambda: False)
    p = ConvProblem.make(ic=3, oc=4, ih=5, kh=3)
    assert alg.applies(p, "nchw", {}) == "torch not installed"


@settings(max_examples=10, deadline=None)
@given(problem=conv_problems(), layout=st.sampled_from(["nchw", "nhwc"]))
def test_matches_reference(problem, layout):
    pytest.importorskip("torch")
    assert check_variant(problem, "onednn", layout) == "ok"


def test_grouped_and_reports_threads():
    torch = pytest.importorskip("torch")
    import numba

    from convbench.harness.inputs import make_inputs

    p = ConvProblem.make(g=4, mb=2, ic=8, oc=12, ih=6, kh=3, ph=1, dh=1)
    for layout in ("nchw", "nhwc"):
        assert check_variant(p, "onednn", layout) == "ok"
    _x, w = make_inputs(p)
    info = onednn.TorchConv(p, w, "nhwc").info()
    assert info["torch"] == torch.__version__
    assert info["torch_threads"] == numba.get_num_threads()
