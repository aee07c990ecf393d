"""The shipped suites: they load, describe the networks they name, and add up.

The network suites hold every distinct conv layer of the network at 224x224, batch 1, with
occurrence counts.  Their conv MAC totals plus the (not included) fully connected layers
must agree within 2% with the figure each suite cites, and the layer counts with the known
architectures.  ``_expected_layers`` rebuilds every network from its published
configuration table, independently of the YAML, and the suites must match it shape for
shape and count for count.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
import yaml

from convbench.spec.descriptor import format_descriptor, parse_descriptor
from convbench.spec.problem import ConvProblem
from convbench.spec.suite import load_suite, shipped_suites, shipped_suites_dir

NETWORKS = ("mobilenet_v1", "mobilenet_v2", "resnet18", "resnet50", "vgg16")
ALL_SUITES = (*NETWORKS, "smoke")

# MACs of the fully connected layers, which are not conv layers and so not in the suites,
# but are included in every published figure the suites cite (input features x outputs):
#   MobileNet V1: 1024 -> 1000 after global average pooling
#   MobileNet V2: 1280 -> 1000 after global average pooling
#   ResNet-18:     512 -> 1000,  ResNet-50: 2048 -> 1000 after global average pooling
#   VGG-16: fc6 (512*7*7 = 25088 -> 4096), fc7 (4096 -> 4096), fc8 (4096 -> 1000)
FC_MACS = {
    "mobilenet_v1": 1024 * 1000,
    "mobilenet_v2": 1280 * 1000,
    "resnet18": 512 * 1000,
    "resnet50": 2048 * 1000,
    "vgg16": 25088 * 4096 + 4096 * 4096 + 4096 * 1000,
}

# (distinct conv shapes = layers in the suite, conv layers in the network = sum of counts)
ARCHITECTURE = {
    "mobilenet_v1": (19, 27),   # stem + 13 x (depthwise 3x3 + pointwise 1x1)
    "mobilenet_v2": (30, 52),   # stem + 16 x 3 + 2 (first bottleneck: no expand) + Conv_1
    "resnet18": (11, 20),       # stem + 8 blocks x 2 + 3 projection shortcuts
    "resnet50": (23, 53),       # stem + 16 blocks x 3 + 4 projection shortcuts (v1 has 20)
    "vgg16": (9, 13),
}

TOLERANCE = 0.02


def _suite(name: str):
    return load_suite(shipped_suites_dir() / f"{name}.yaml")


def _instances(suite) -> Counter:
    """Shape -> occurrences in the network."""
    out: Counter = Counter()
    for layer in suite.layers:
        out[tuple(layer.problem.shape_fields.items())] += layer.count
    return out


# -- an independent reconstruction of each network from its paper's configuration table ----

def _conv(ic: int, oc: int, size: int, k: int, s: int = 1, g: int = 1) -> ConvProblem:
    return ConvProblem.make(mb=1, g=g, ic=ic, oc=oc, ih=size, kh=k, sh=s, ph=(k - 1) // 2)


def _mobilenet_v1() -> list[ConvProblem]:
    # Howard et al. 2017, Table 1: (pointwise output channels, depthwise stride)
    table = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), *[(512, 1)] * 5,
             (1024, 2), (1024, 1)]
    out, c, size = [_conv(3, 32, 224, 3, 2)], 32, 112
    for oc, s in table:
        out.append(_conv(c, c, size, 3, s, g=c))
        size //= s
        out.append(_conv(c, oc, size, 1))
        c = oc
    return out


def _mobilenet_v2() -> list[ConvProblem]:
    # Sandler et al. 2018, Table 2: (expansion t, channels c, repeats n, stride s)
    table = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
             (6, 160, 3, 2), (6, 320, 1, 1)]
    out, c, size = [_conv(3, 32, 224, 3, 2)], 32, 112
    for t, oc, n, s in table:
        for r in range(n):
            stride, hidden = (s if r == 0 else 1), c * t
            if t != 1:
                out.append(_conv(c, hidden, size, 1))
            out.append(_conv(hidden, hidden, size, 3, stride, g=hidden))
            size //= stride
            out.append(_conv(hidden, oc, size, 1))
            c = oc
    out.append(_conv(320, 1280, 7, 1))
    return out


def _resnet(depth: int) -> list[ConvProblem]:
    # He et al. 2016, Table 1; projection shortcuts; ResNet-50 in the v1.5 form (stride in 3x3)
    blocks = {18: [2, 2, 2, 2], 50: [3, 4, 6, 3]}[depth]
    out, c, size = [_conv(3, 64, 224, 7, 2)], 64, 56
    for stage, (n, width) in enumerate(zip(blocks, (64, 128, 256, 512), strict=True)):
        expansion = 1 if depth == 18 else 4
        for b in range(n):
            s = 2 if b == 0 and stage > 0 else 1
            if b == 0 and (s != 1 or c != width * expansion):
                out.append(_conv(c, width * expansion, size, 1, s))
            if depth == 18:
                out += [_conv(c, width, size, 3, s), _conv(width, width, size // s, 3)]
            else:
                out += [_conv(c, width, size, 1), _conv(width, width, size, 3, s),
                        _conv(width, width * 4, size // s, 1)]
            size //= s
            c = width * expansion
    return out


def _vgg16() -> list[ConvProblem]:
    # Simonyan & Zisserman 2015, Table 1, configuration D
    out, c, size = [], 3, 224
    for width, n in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
        for _ in range(n):
            out.append(_conv(c, width, size, 3))
            c = width
        size //= 2
    return out


_BUILDERS = {"mobilenet_v1": _mobilenet_v1, "mobilenet_v2": _mobilenet_v2,
             "resnet18": lambda: _resnet(18), "resnet50": lambda: _resnet(50),
             "vgg16": _vgg16}


def _expected_layers(network: str) -> Counter:
    return Counter(tuple(p.shape_fields.items()) for p in _BUILDERS[network]())


# -- every shipped suite ---------------------------------------------------------------

def test_all_expected_suites_are_shipped():
    names = {p.stem for p in shipped_suites()}
    assert set(ALL_SUITES) <= names


@pytest.mark.parametrize("path", shipped_suites(), ids=lambda p: p.stem)
def test_shipped_suite_loads(path):
    suite = load_suite(path)
    assert suite.name == path.stem
    assert suite.description
    assert suite.layers


@pytest.mark.parametrize("path", shipped_suites(), ids=lambda p: p.stem)
def test_layer_names_unique_and_counts_positive(path):
    suite = load_suite(path)
    names = [layer.name for layer in suite.layers]
    assert len(names) == len(set(names))
    assert all(isinstance(layer.count, int) and layer.count > 0 for layer in suite.layers)


@pytest.mark.parametrize("path", shipped_suites(), ids=lambda p: p.stem)
def test_shapes_are_batch_1_written_explicitly(path):
    """benchdnn's default mb is 2: every descriptor must say mb1, not rely on the default."""
    raw = yaml.safe_load(path.read_text())
    for item in raw["layers"]:
        assert "shape" in item, item
        assert re.search(r"(?<![a-z])mb1(?!\d)", item["shape"]), item
    assert all(layer.problem.mb == 1 for layer in load_suite(path).layers)


@pytest.mark.parametrize("path", shipped_suites(), ids=lambda p: p.stem)
def test_shapes_are_distinct_and_round_trip(path):
    suite = load_suite(path)
    shapes = [tuple(layer.problem.shape_fields.items()) for layer in suite.layers]
    assert len(shapes) == len(set(shapes)), "one shape listed twice: merge it into count"
    for layer in suite.layers:
        again = parse_descriptor(format_descriptor(layer.problem))
        assert again == layer.problem


# -- network suites ----------------------------------------------------------------------

@pytest.mark.parametrize("network", NETWORKS)
def test_network_total_matches_cited_reference(network):
    suite = _suite(network)
    assert suite.reference is not None, "network suites cite a published MAC figure"
    ref = suite.reference
    conv = suite.total_macs
    fc = FC_MACS[network]
    total = conv + fc
    deviation = total / ref.macs - 1
    print(f"\n{network}: conv MACs {conv:,} + FC {fc:,} = {total:,}; cited {ref.macs:,.0f} "
          f"({deviation:+.2%}) -- {ref.source}")
    assert abs(deviation) <= TOLERANCE
    # the note states the FC MACs that the comparison adds, and the suite's conv total
    assert f"{fc:,}" in ref.note
    assert f"{conv:,}" in ref.note
    assert ref.source.strip()


@pytest.mark.parametrize("network", NETWORKS)
def test_layer_counts_match_architecture(network):
    suite = _suite(network)
    distinct, total = ARCHITECTURE[network]
    assert len(suite.layers) == distinct
    assert sum(layer.count for layer in suite.layers) == total


@pytest.mark.parametrize("network", NETWORKS)
def test_layers_match_reconstruction_from_paper_table(network):
    expected = _expected_layers(network)
    assert sum(expected.values()) == ARCHITECTURE[network][1]
    assert _instances(_suite(network)) == expected


@pytest.mark.parametrize("network", NETWORKS)
def test_network_suite_basics(network):
    suite = _suite(network)
    first = suite.layers[0].problem
    assert (first.ic, first.ih, first.iw, first.g) == (3, 224, 224, 1)
    assert suite.network
    # fully connected layers are not written as 1x1 convs
    assert not any(layer.problem.oc == 1000 for layer in suite.layers)
    assert not any(layer.problem.ih == 1 and layer.problem.iw == 1 for layer in suite.layers)
    sweep = suite.sweep
    assert sweep.algorithms is None
    assert sweep.threads == (1,)
    t = sweep.timing
    assert (t.min_time, t.values, t.warmups, t.timeout) == (0.01, 5, 1, 300.0)


def test_resnet50_is_v15_with_projection_shortcuts():
    suite = _suite("resnet50")
    assert "v1.5" in suite.network and "v1.5" in suite.description
    layers = {layer.name: layer for layer in suite.layers}
    shortcuts = [n for n in layers if n.endswith("_branch1")]
    assert sorted(shortcuts) == [f"res{s}a_branch1" for s in (2, 3, 4, 5)]
    assert all(layers[n].problem.kh == 1 for n in shortcuts)
    # v1.5: the stride 2 sits in the 3x3 (branch2b); every branch2a 1x1 has stride 1
    for stage in (3, 4, 5):
        assert layers[f"res{stage}a_branch2b"].problem.sh == 2
        assert layers[f"res{stage}a_branch2a"].problem.sh == 1
    strided = {n for n, layer in layers.items() if layer.problem.sh == 2}
    assert strided == {"conv1", "res3a_branch1", "res4a_branch1", "res5a_branch1",
                       "res3a_branch2b", "res4a_branch2b", "res5a_branch2b"}


def test_resnet18_projection_shortcuts():
    layers = {layer.name: layer.problem for layer in _suite("resnet18").layers}
    shortcuts = sorted(n for n in layers if n.endswith("_branch1"))
    assert shortcuts == ["res3a_branch1", "res4a_branch1", "res5a_branch1"]
    assert all(layers[n].kh == 1 and layers[n].sh == 2 for n in shortcuts)


def test_vgg16_is_all_3x3_stride_1():
    suite = _suite("vgg16")
    assert all((layer.problem.kh, layer.problem.sh, layer.problem.ph, layer.problem.g)
               == (3, 1, 1, 1) for layer in suite.layers)


@pytest.mark.parametrize(("network", "depthwise", "pointwise"),
                         [("mobilenet_v1", 13, 13), ("mobilenet_v2", 17, 34)])
def test_mobilenet_depthwise_and_pointwise(network, depthwise, pointwise):
    suite = _suite(network)
    dw = [layer for layer in suite.layers if layer.problem.g > 1]
    assert all(layer.problem.is_depthwise and layer.problem.kh == 3 for layer in dw)
    assert sum(layer.count for layer in dw) == depthwise
    pw = [layer for layer in suite.layers if layer.problem.kh == 1]
    assert sum(layer.count for layer in pw) == pointwise


def test_mobilenet_v2_has_final_1x1_to_1280():
    last = _suite("mobilenet_v2").layers[-1]
    p = last.problem
    assert last.name == "Conv_1"
    assert (p.ic, p.oc, p.kh, p.ih, last.count) == (320, 1280, 1, 7, 1)


# -- smoke suite -------------------------------------------------------------------------

def test_smoke_suite_covers_the_main_cases():
    problems = [layer.problem for layer in _suite("smoke").layers]
    assert any(p.kh == 3 and p.sh == 1 and p.ph == 1 and p.g == 1 for p in problems)
    assert any(p.kh == 1 and p.kw == 1 and p.ph == 0 for p in problems)   # Strassen's case
    assert any(p.is_depthwise and p.kh == 3 for p in problems)


def test_smoke_suite_is_small_and_quick():
    """Small enough to run cold, numba compile included, in about a minute on 2 cores: one
    variant per tunable algorithm, one thread, one worker process (the run's time is the
    lead's benchmark, never a timed test)."""
    suite = _suite("smoke")
    assert len(suite.layers) <= 4
    assert all(p.ic <= 64 and p.oc <= 64 and p.ih <= 32 for p in
               (layer.problem for layer in suite.layers))
    assert suite.total_macs < 20_000_000
    sweep = suite.sweep
    assert sweep.algorithms is None       # every registered family (tests/test_smoke_suite.py)
    assert sweep.threads == (1,)
    assert all(len(values) <= 2 for knobs in sweep.params.values() for values in knobs.values())
    t = sweep.timing
    assert (t.min_time, t.values, t.warmups, t.timeout, t.processes) == (0.005, 3, 1, 60.0, 1)
