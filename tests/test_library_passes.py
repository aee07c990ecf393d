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
