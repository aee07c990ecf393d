"""Suites' networks: the shipped graphs, the loader's errors, and the reference executor.

The five network suites list their ops in execution order (``network.ops``).  Their convs
must follow the order of the independent reconstruction from the papers' tables in
:mod:`tests.test_suites`, run every layer ``count`` times, and add up to the suite's MACs;
the final shapes and residual adds are the architectures' known ones.  Every rejection is a
one-line SuiteError naming the file, the line, the op and the field.  The float64 executor
is checked on a tiny graph against numpy written independently here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convbench.errors import ConvbenchError, SuiteError
from convbench.network.reference import random_weights, run_reference
from convbench.spec import network_parse
from convbench.spec.network import Network, NetworkError, Op
from convbench.spec.problem import ConvProblem
from convbench.spec.suite import load_suite, parse_suite
from tests.test_suites import _BUILDERS, NETWORKS

# (the output tensor and its shape, a tensor inside with its shape, residual adds)
EXPECTED = {
    "resnet18": ("pool5", (1, 512, 1, 1), "res5b_relu", (1, 512, 7, 7), 8),
    "resnet50": ("pool5", (1, 2048, 1, 1), "res5c_relu", (1, 2048, 7, 7), 16),
    "vgg16": ("pool5", (1, 512, 7, 7), "relu5_3", (1, 512, 14, 14), 0),
    "mobilenet_v1": ("global_pool", (1, 1024, 1, 1), "conv_pw_13_relu", (1, 1024, 7, 7), 0),
    "mobilenet_v2": ("global_pool", (1, 1280, 1, 1), "out_relu", (1, 1280, 7, 7), 10),
}


# -- the shipped networks ---------------------------------------------------------------

@pytest.mark.parametrize("name", NETWORKS)
def test_shipped_network_loads_and_adds_up(name):
    suite = load_suite(name)
    graph = suite.graph
    assert graph is not None and graph.title == suite.network
    assert graph.input_shape == (1, 3, 224, 224)
    # every layer runs count times, and the occurrences' MACs are the suite's total
    assert graph.occurrences() == {layer.name: layer.count for layer in suite.layers}
    assert sum(suite.layer(op.layer).problem.macs for op in graph.convs) == suite.total_macs
    # shapes chain: each conv reads a tensor of its layer's input shape
    for op in graph.convs:
        assert graph.shape(op.inputs[0]) == suite.layer(op.layer).problem.input_shape
    output, shape, inner, inner_shape, adds = EXPECTED[name]
    assert (graph.output, graph.shape(graph.output)) == (output, shape)
    assert graph.shape(inner) == inner_shape
    assert graph.kinds()["add"] == adds if adds else "add" not in graph.kinds()
    assert graph.consumers(graph.output) == ()


@pytest.mark.parametrize("name", NETWORKS)
def test_conv_order_follows_the_papers_tables(name):
    """The convs in op order are the reconstruction's list (tests.test_suites), shape for
    shape: so the order, not only the counts, is the paper's."""
    suite = load_suite(name)
    ran = [suite.layer(op.layer).problem.replace(name="") for op in suite.graph.convs]
    assert ran == [p.replace(name="") for p in _BUILDERS[name]()]


def test_residual_adds_join_a_block_input_with_its_last_conv():
    graph = load_suite("mobilenet_v2").graph
    for op in graph.ops:
        if op.kind == "add":
            project, shortcut = (graph.op(name) for name in op.inputs)
            assert project.name.endswith("_project")
            # the shortcut is the block's input: what the block's expand conv read
            block = project.name.removesuffix("_project")
            assert graph.op(f"{block}_expand").inputs == (shortcut.name,)
    resnet = load_suite("resnet50").graph
    assert [op.name for op in resnet.consumers("pool1")] == ["res2a_branch1", "res2a_branch2a"]
    assert [op.name for op in resnet.consumers("res2a_relu")] == ["res2b_branch2a", "res2b"]


def test_a_title_alone_still_loads(tmp_path):
    suite = parse_suite(HEAD + "network: just a title\n", tmp_path / "t.yaml")
    assert (suite.network, suite.graph) == ("just a title", None)
    assert load_suite("smoke").graph is None


def test_show_summarises_the_graph(cli):
    code, out, err = cli("show", "resnet50")
    assert code == 0, err
    assert "network: 120 ops (53 conv, 49 relu, 1 maxpool, 1 avgpool, 16 add)" in out
    assert "(1, 2048, 1, 1)" in out


# -- the loader's errors ----------------------------------------------------------------

HEAD = """name: net
description: a tiny network
layers:
  - {name: a, shape: mb1ic4ih8oc8oh8kh3ph1, count: 2}
  - {name: b, shape: mb1ic8ih8oc8oh8kh3ph1, count: 1}
"""
NET = """network:
  title: tiny
  input: {c: 4, h: 8, w: 8}
  ops:
    - {name: x1, op: conv, layer: a}
    - {name: r1, op: relu}
    - {name: x2, op: conv, layer: a, from: input}
    - {name: sum, op: add, from: [r1, x2]}
    - {name: y, op: conv, layer: b}
    - {name: pool, op: maxpool, k: 2, s: 2}
    - {name: gap, op: avgpool, k: 4}
"""
FIRST_OP_LINE = HEAD.count("\n") + 5


def _load(tmp_path, text: str):
    path = tmp_path / "net.yaml"
    path.write_text(text)
    return path, load_suite(path)


def _refused(tmp_path, old: str, new: str) -> tuple[Path, str]:
    assert old in NET
    path = tmp_path / "net.yaml"
    path.write_text(HEAD + NET.replace(old, new, 1))
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}:")
    return path, message


def test_the_tiny_network_loads(tmp_path):
    _, suite = _load(tmp_path, HEAD + NET)
    graph = suite.graph
    assert [op.name for op in graph.ops] == ["x1", "r1", "x2", "sum", "y", "pool", "gap"]
    assert graph.op("r1").inputs == ("x1",) and graph.op("sum").inputs == ("r1", "x2")
    assert graph.shape("pool") == (1, 8, 4, 4) and graph.shape("gap") == (1, 8, 1, 1)
    assert [op.name for op in graph.consumers("input")] == ["x1", "x2"]


# (what to replace, by what, the op index, the field, words of the message)
OP_ERRORS = {
    "unknown kind": ("op: relu}", "op: gelu}", 1, "op", "expected one of conv, relu"),
    "unknown layer": ("layer: b}", "layer: zz}", 4, "layer", "unknown layer 'zz'"),
    "unknown input": ("from: input}", "from: nowhere}", 2, "from", "no such tensor"),
    "input defined later": ("layer: a}\n", "layer: a, from: sum}\n", 0, "from",
                            "defined later (ops[3])"),
    "own output": ("op: relu}", "op: relu, from: r1}", 1, "from", "its own output"),
    "conv input shape": ("from: input}", "from: r1}", 2, "from",
                         "(1, 8, 8, 8) (mb, c, h, w) but layer 'a' takes (1, 4, 8, 8)"),
    "add shapes": ("from: [r1, x2]", "from: [r1, input]", 3, "from",
                   "'r1' is (1, 8, 8, 8), 'input' is (1, 4, 8, 8)"),
    "add of one": ("from: [r1, x2]", "from: [r1]", 3, "from", "at least 2"),
    "pool too large": ("k: 4}", "k: 5}", 6, "k", "does not fit the 4x4 input"),
    "pool padding": ("k: 4}", "k: 4, p: 3}", 6, "p", "more than half the window"),
    "pool stride": ("k: 2, s: 2}", "k: 2, s: 0}", 5, "s", "expected an integer from 1"),
    "pool without k": ("k: 4}", "s: 1}", 6, "k", "missing"),
    "duplicate name": ("name: r1,", "name: x1,", 1, "name", "duplicate op name 'x1'"),
    "reserved name": ("name: r1,", "name: input,", 1, "name", "network's input"),
    "bad name": ("name: r1,", "name: 'r 1',", 1, "name", "expected up to 64 letters"),
    "unused output": ("{name: pool, op: maxpool, k: 2, s: 2}",
                      "{name: dead, op: relu}\n    - {name: pool, op: maxpool, k: 2, s: 2, "
                      "from: y}", 5, "name", "'dead' is never used"),
    "conv without layer": (", layer: b}", "}", 4, "layer", "names the suite layer"),
    "layer on a relu": ("op: relu}", "op: relu, layer: a}", 1, "layer", "only a conv"),
    "window on a conv": ("layer: b}", "layer: b, k: 3}", 4, "k", "only a pool"),
}


@pytest.mark.parametrize("case", OP_ERRORS)
def test_op_errors_name_the_op_and_field(tmp_path, case):
    old, new, index, fld, words = OP_ERRORS[case]
    path, message = _refused(tmp_path, old, new)
    assert f"network.ops[{index}]" in message
    assert f"field '{fld}'" in message
    assert words in message
    assert f"{path}:{FIRST_OP_LINE + index}:" in message


def test_unknown_op_field_names_the_op(tmp_path):
    _, message = _refused(tmp_path, "op: relu}", "op: relu, size: 3}")
    assert "network.ops[1] ('r1')" in message and "unknown field(s) size" in message


def test_yaml_errors_inside_an_op_name_it(tmp_path):
    _, message = _refused(tmp_path, "op: relu}", "op: relu, op: relu6}")
    assert "not valid YAML" in message and "network.ops[1]" in message
    assert f"{tmp_path / 'net.yaml'}:{FIRST_OP_LINE + 1}:" in message


def test_count_must_equal_occurrences(tmp_path):
    path = tmp_path / "net.yaml"
    path.write_text(HEAD.replace("count: 2", "count: 3") + NET)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    message = str(info.value)
    assert f"{path}:4: layer 0 ('a'): field 'count'" in message
    assert "count 3 but network.ops runs the layer 2 time(s) (ops[0], ops[2])" in message


@pytest.mark.parametrize("old, new, fld", [
    ("  input: {c: 4, h: 8, w: 8}\n", "", "network.input"),
    ("  input: {c: 4, h: 8, w: 8}", "  input: {c: 4, h: 0, w: 8}", "network.input.h"),
    ("  input: {c: 4, h: 8, w: 8}", "  input: {c: 4, h: 8, w: 8, mb: 2}", "network.input"),
    ("  title: tiny\n", "  title: tiny\n  layout: nchw\n", "network"),
])
def test_network_field_errors(tmp_path, old, new, fld):
    path = tmp_path / "net.yaml"
    path.write_text(HEAD + NET.replace(old, new))
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert f"field '{fld}'" in str(info.value) and f"{path}:" in str(info.value)


def test_the_number_of_ops_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(network_parse, "MAX_NETWORK_OPS", 3)
    path = tmp_path / "net.yaml"
    path.write_text(HEAD + NET)
    with pytest.raises(SuiteError, match=r"field 'network.ops': 7 ops, more than the limit of 3"):
        load_suite(path)


def test_a_network_built_in_code_is_checked_too():
    conv = ConvProblem.make(ic=4, ih=8, oc=8, kh=3, ph=1, name="a")
    with pytest.raises(NetworkError) as info:
        Network("t", (1, 8, 8, 8), (Op("x", "conv", ("input",), layer="a"),), (conv,))
    assert (info.value.index, info.value.field) == (0, "from")


# A valid network whose op fields hypothesis replaces: a valid graph or a located one-liner.
hostile = st.one_of(st.none(), st.booleans(), st.integers(-3, 10), st.integers(2**31, 2**70),
                    st.floats(allow_nan=True), st.text(max_size=8),
                    st.sampled_from(["input", "x1", "r1", "sum", "conv", "add", "a", "b"]),
                    st.lists(st.sampled_from(["input", "x1", "r1", "nope"]), max_size=3),
                    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@settings(max_examples=80, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, 6),
       fld=st.sampled_from(["op", "name", "from", "layer", "k", "s", "p", "x"]),
       value=hostile)
def test_fuzzed_ops_are_valid_or_refused_in_one_line(index, fld, value):
    import yaml

    raw = yaml.safe_load(HEAD + NET)
    raw["network"]["ops"][index][fld] = value
    path = Path("fuzz/net.yaml")
    try:
        parse_suite(yaml.safe_dump(raw), path)
    except ConvbenchError as exc:
        message = str(exc)
        assert "\n" not in message and len(message) <= 500
        assert message.startswith(f"{path}:")


# -- the reference executor ---------------------------------------------------------------

def _conv_numpy(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """Dense conv, written out as loops over the output pixels (g = 1)."""
    n, _, h, wd = x.shape
    o, _, k, _ = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - k) // stride + 1, (wd + 2 * pad - k) // stride + 1
    y = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * stride:i * stride + k, j * stride:j * stride + k]
            y[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return y


def _maxpool_numpy(x: np.ndarray, k: int, s: int, p: int) -> np.ndarray:
    n, c, h, w = x.shape
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    y = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            rows = slice(max(i * s - p, 0), min(i * s - p + k, h))
            cols = slice(max(j * s - p, 0), min(j * s - p + k, w))
            y[:, :, i, j] = x[:, :, rows, cols].max(axis=(2, 3))
    return y


def test_reference_executor_matches_numpy():
    # input 3x9x9 -> conv a (3x3 s1 p1) -> relu -> maxpool 3/2/1 -> 5x5; conv b (1x1 s1),
    # conv c (3x3 s1 p1) from the pool; add; relu6; global avgpool
    a = ConvProblem.make(mb=2, ic=3, ih=9, oc=6, kh=3, ph=1, name="a")
    b = ConvProblem.make(mb=2, ic=6, ih=5, oc=6, kh=1, name="b")
    c = ConvProblem.make(mb=2, ic=6, ih=5, oc=6, kh=3, ph=1, name="c")
    ops = (Op("x1", "conv", ("input",), layer="a"), Op("r1", "relu", ("x1",)),
           Op("p1", "maxpool", ("r1",), k=3, s=2, p=1),
           Op("xb", "conv", ("p1",), layer="b"), Op("xc", "conv", ("p1",), layer="c"),
           Op("sum", "add", ("xb", "xc")), Op("r6", "relu6", ("sum",)),
           Op("gap", "avgpool", ("r6",), k=5))
    graph = Network("tiny", (2, 3, 9, 9), ops, (a, b, c))
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 9, 9)) * 4
    weights = random_weights(graph, seed=3)
    got = run_reference(graph, None, weights, x)

    t = _conv_numpy(x, weights["x1"], 1, 1)
    t = _maxpool_numpy(np.maximum(t, 0), 3, 2, 1)
    t = _conv_numpy(t, weights["xb"], 1, 0) + _conv_numpy(t, weights["xc"], 1, 1)
    assert np.abs(t).max() > 6, "relu6 must clip something for the check to mean anything"
    t = np.clip(t, 0, 6).mean(axis=(2, 3), keepdims=True)
    assert set(got) == {"input", *(op.name for op in ops)}
    assert got["gap"].shape == graph.shape("gap") == (2, 6, 1, 1)
    np.testing.assert_allclose(got["gap"], t, rtol=1e-12, atol=1e-12)


def test_reference_executor_takes_layers_from_the_suite(tmp_path):
    _, suite = _load(tmp_path, HEAD + NET)
    weights = random_weights(suite.graph)
    x = np.random.default_rng(0).standard_normal((1, 4, 8, 8))
    got = run_reference(suite.graph, suite, weights, x)
    assert got["gap"].shape == (1, 8, 1, 1)
    np.testing.assert_allclose(got["pool"], _maxpool_numpy(got["y"], 2, 2, 0))
    weights.pop("x2")
    with pytest.raises(KeyError, match="x2"):
        run_reference(suite.graph, suite, weights, x)
