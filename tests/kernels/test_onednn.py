"""The two oneDNN-through-PyTorch baselines (``torch_eager``, prepacked ``onednn``): skipped
with their reason without torch, correct with it, and the prepacked one reorders no
weights per call (oneDNN's own verbose log, read from a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convbench.kernels import onednn
from convbench.kernels.registry import get
from convbench.spec.problem import ConvProblem
from tests.kernels.gemm_family_support import check_variant, conv_problems

ALGORITHMS = ("torch_eager", "onednn")
LAYOUTS = st.sampled_from(["nchw", "nhwc"])


@pytest.mark.parametrize("name", ALGORITHMS)
def test_is_a_baseline_skipped_with_a_reason_when_torch_is_missing(monkeypatch, name):
    alg = get(name)
    assert alg.baseline
    monkeypatch.setattr(onednn, "torch_available", lambda: False)
    p = ConvProblem.make(ic=3, oc=4, ih=5, kh=3)
    assert alg.applies(p, "nchw", {}) == "torch not installed"


@pytest.mark.parametrize("name", ALGORITHMS)
@settings(max_examples=10, deadline=None)
@given(problem=conv_problems(), layout=LAYOUTS)
def test_matches_reference(name, problem, layout):
    pytest.importorskip("torch", reason="torch not installed (the onednn extra)")
    assert check_variant(problem, name, layout) == "ok"


@st.composite
def grouped_problems(draw: st.DrawFn) -> ConvProblem:
    """Grouped and depthwise problems, strided, padded and dilated."""
    g = draw(st.integers(2, 6))
    depthwise = draw(st.booleans())
    icg, ocg = (1, 1) if depthwise else (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    kh, dh, ph, sh = (draw(st.integers(1, 3)), draw(st.integers(0, 1)), draw(st.integers(0, 1)),
                      draw(st.integers(1, 2)))
    ih = draw(st.integers((kh - 1) * (dh + 1) + 1, 12))
    return ConvProblem.make(mb=draw(st.integers(1, 2)), g=g, ic=g * icg, oc=g * ocg, ih=ih,
                            kh=kh, sh=sh, ph=ph, dh=dh)


@settings(max_examples=10, deadline=None)
@given(problem=grouped_problems(), layout=LAYOUTS)
def test_prepacked_matches_reference_grouped_and_depthwise(problem, layout):
    pytest.importorskip("torch", reason="torch not installed (the onednn extra)")
    assert check_variant(problem, "onednn", layout) == "ok"


def test_grouped_and_reports_threads():
    torch = pytest.importorskip("torch", reason="torch not installed (the onednn extra)")
    import numba

    from convbench.harness.inputs import make_inputs

    p = ConvProblem.make(g=4, mb=2, ic=8, oc=12, ih=6, kh=3, ph=1, dh=1)
    for name in ALGORITHMS:
        for layout in ("nchw", "nhwc"):
            assert check_variant(p, name, layout) == "ok"
    _x, w = make_inputs(p)
    for prepared in (onednn.TorchConv(p, w, "nhwc"), onednn.PrepackedConv(p, w, "nhwc")):
        info = prepared.info()
        assert info["torch"] == torch.__version__
        assert info["torch_threads"] == numba.get_num_threads()
    assert onednn.TorchConv(p, w, "nchw").info()["backend"] == "Mkldnn"   # grouped: oneDNN
    assert onednn.PrepackedConv(p, w, "nchw").packed_weight_bytes >= w.size * 4


# Builds one variant, then runs it CALLS times after a marker line; oneDNN prints one line
# per primitive executed ("onednn_verbose,...,primitive,exec,cpu,<kind>,...").
_VERBOSE_PROBE = textwrap.dedent("""
    import sys
    import numpy as np
    from convbench.harness.inputs import make_inputs
    from convbench.kernels.layouts import to_layout
    from convbench.kernels.registry import get
    from convbench.spec.problem import ConvProblem

    name, layout, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    # Large enough (64x20x20 input, 3x3) that eager torch picks oneDNN, not its own im2col.
    p = ConvProblem.make(ic=64, oc=32, ih=20, kh=3, ph=1)
    x, w = make_inputs(p)
    prepared = get(name).build(p, w, layout, {})
    xl = to_layout(x, layout)
    y = np.empty(to_layout(np.empty(p.output_shape, np.float32), layout).shape, np.float32)
    prepared.run(xl, y)                       # first call: primitive creation, caches
    sys.stdout.flush()
    print("=== calls", flush=True)
    for _ in range(calls):
        prepared.run(xl, y)
    sys.stdout.flush()
""")


def _executed_primitives(name: str, layout: str, calls: int) -> list[str]:
    """The kinds of oneDNN primitives executed during ``calls`` runs after the first."""
    env = dict(os.environ, ONEDNN_VERBOSE="1", DNNL_VERBOSE="1")
    out = subprocess.run([sys.executable, "-c", _VERBOSE_PROBE, name, layout, str(calls)],
                         capture_output=True, text=True, env=env, timeout=120, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    after = out.stdout.partition("=== calls")[2]
    return [line.split(",")[5] for line in after.splitlines()
            if line.startswith("onednn_verbose,") and ",primitive,exec," in line]


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_prepacked_weights_are_not_reordered_per_call(layout):
    pytest.importorskip("torch", reason="torch not installed (the onednn extra)")
    calls = 3
    eager = _executed_primitives("torch_eager", layout, calls)
    prepacked = _executed_primitives("onednn", layout, calls)
    # The log works here and eager reorders (at least the weights) on every call ...
    assert eager.count("convolution") == calls, eager
    assert eager.count("reorder") >= calls, eager
    # ... while the prepacked path runs the convolution alone.
    assert prepacked == ["convolution"] * calls, prepacked
