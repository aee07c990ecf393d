"""The libraries over a whole network (run --network's ``onednn`` and ``onnxruntime``
passes): every shipped network's graph builds in each, the output matches the float64
reference pass, a second call computes afresh, and ONNX Runtime runs every conv as its
fused NCHWc kernel (what makes it the yardstick a deployed model is)."""

from __future__ import annotations

import numpy as np
import pytest

from convbench.network import executor
from convbench.network.reference import run_reference
from convbench.spec.suite import load_suite
from tests.conftest import DATA

NETWORKS = ("mobilenet_v1", "mobilenet_v2", "resnet18", "resnet50", "vgg16",
            str(DATA / "net_suite.yaml"))


def _ort_pass(graph, weights, threads=1):
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed (the baselines extra)")
    pytest.importorskip("onnx", reason="onnx not installed (the baselines extra)")
    from convbench.network import onnxruntime_pass

    assert onnxruntime_pass.unavailable() is None
    return onnxruntime_pass.OrtPass(graph, weights, threads), onnxruntime_pass.pass_tensors


def _onednn_pass(graph, weights, threads=1):
    pytest.importorskip("torch", reason="torch not installed (the onednn extra)")
    from convbench.network import onednn_pass

    if onednn_pass.unavailable():
        pytest.skip(onednn_pass.unavailable())
    return onednn_pass.OneDNNPass(graph, weights), onednn_pass.pass_tensors


BUILDERS = {"onnxruntime": _ort_pass, "onednn": _onednn_pass}


@pytest.mark.parametrize("library", sorted(BUILDERS))
@pytest.mark.parametrize("network", NETWORKS)
def test_a_library_pass_matches_the_reference(network, library):
    suite = load_suite(network)
    graph = suite.graph
    x, weights = executor.network_inputs(graph, seed=1)
    as_float64 = {k: w.astype(np.float64) for k, w in weights.items()}
    built, tensors_of = BUILDERS[library](graph, weights)
    for sign in (1, -1):   # the second call on another input: nothing kept between calls
        built.input[...] = sign * x
        built()
        reference = run_reference(graph, suite, as_float64, sign * x)
        verdict = executor.check(graph, reference, tensors_of(built))
        assert verdict.passed, verdict.reason
        assert graph.output in tensors_of(built)
        np.testing.assert_allclose(built.output(), reference[graph.output], rtol=1e-3,
                                   atol=1e-4 * np.abs(reference[graph.output]).max())


@pytest.mark.parametrize("network", NETWORKS[:5])
def test_onnxruntime_runs_every_conv_fused_in_nchwc(network):
    """No conv left as a plain Conv and no relu, clip or add left on its own: ORT fused
    them into its NCHWc convs, as in deployment (the shipped networks' glue all follows a
    conv).  The graph is the network's: as many convs as the network has."""
    graph = load_suite(network).graph
    _x, weights = executor.network_inputs(graph, seed=0)
    built, _ = _ort_pass(graph, weights)
    assert built.nodes.get("Conv(nchwc)") == len(graph.convs), built.nodes
    assert not {"Conv", "Relu", "Clip", "Add", "Sum"} & set(built.nodes), built.nodes


def test_orts_fused_nodes_are_named_back_to_our_convs():
    """ORT names a conv+relu node after the relu (VGG's relu1_1_nchwc is conv1_1) and a
    conv+add+relu node after the conv; pools keep their names; reorders are ORT's own."""
    from convbench.network.onnxruntime_pass import _our_op

    vgg = {op.name: op for op in load_suite("vgg16").graph.ops}
    assert _our_op(vgg, "relu1_1_nchwc") == "conv1_1"
    assert _our_op(vgg, "pool1_nchwc") == "pool1"
    assert _our_op(vgg, "ReorderOutput") is None
    resnet = {op.name: op for op in load_suite("resnet50").graph.ops}
    assert _our_op(resnet, "res2a_branch2c_nchwc") == "res2a_branch2c"
    assert _our_op(resnet, "res2a_branch2a_relu_nchwc") == "res2a_branch2a"


def test_orts_profile_names_every_conv_and_adds_up_to_the_pass():
    """The profile of a real session: one "op" entry per conv of ours, nothing unnamed
    but ORT's reorders, and (ORT's profiler adding 5-20 us a run outside the kernels) a sum
    of the same order as the pass (a factor of 3: it guards units and double counting)."""
    import time

    graph = load_suite("mobilenet_v2").graph
    x, weights = executor.network_inputs(graph, seed=0)
    built, _ = _ort_pass(graph, weights)
    built.input[...] = x
    built()
    t0 = time.perf_counter()
    for _ in range(5):
        built()
    one_pass = (time.perf_counter() - t0) / 5
    parts = built.profile(5)
    assert {op for op, part in parts if part == "op"} >= {op.name for op in graph.convs}
    assert all(part == "op" or op == "output" or op in {o.name for o in graph.ops}
               for op, part in parts)
    assert 1 / 3 < sum(parts.values()) / one_pass < 3


def test_the_in_pass_comparison_is_per_conv_by_class_and_counts_the_rest():
    """A hand-made profile: two 1x1 convs where ORT's node takes 2x and 0.5x ours, one
    depthwise at 1x; our relu is "the rest" on our side only (ORT fused it)."""
    import pandas as pd

    from convbench.harness import network_run

    rows = []
    for label, times in (("plan", (1e-3, 1e-3, 2e-3)), ("onnxruntime", (2e-3, 0.5e-3, 2e-3))):
        for op, cls, t in zip(("a", "b", "dw"), ("1x1", "1x1", "depthwise"), times,
                              strict=True):
            rows.append({"pass": label, "threads": 2, "op": op, "kind": "conv",
                         "layer_class": cls, "part": "op", "measured_s": t})
    rows.append({"pass": "plan", "threads": 2, "op": "r", "kind": "relu", "layer_class": "",
                 "part": "op", "measured_s": 0.5e-3})
    ops = pd.DataFrame(rows)
    table = network_run.library_in_pass(ops)
    assert dict(zip(table.op, table.ratio, strict=True)) == {"a": 2.0, "b": 0.5, "dw": 1.0}
    text = "\n".join(network_run.library_in_pass_lines(ops))
    assert "at 2 thread(s)" in text and "all 1.00" in text
    assert "1x1 1.00 (min 0.50 b)" in text and "depthwise 1.00 (min 1.00 dw)" in text
    assert "plan convs 4.000 ms + the rest 0.500 ms" in text
    assert "onnxruntime convs 4.500 ms + the rest 0.000 ms" in text
    assert text.index("b 0.50") < text.index("dw 1.00 (2.000")
