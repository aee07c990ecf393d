"""Activations fused into the kernels' stores (kernels/epilogue.py): a kernel switched to
relu or relu6 writes exactly the activation of what it wrote before, on every path that
stores (nchwc's row and plane tiles, a strided plane, depthwise's NHWC and NCHW16c tiles
and its scalar tail block, Winograd's output transform in both schedules, the indirect
GEMM's last K chunk in vector and edge stores, the in-place 1x1 GEMM's tiles and tail tile),
and NaN stays NaN; nchwc and the 1x1 GEMM switched to the residual add add their sums to
what the output holds, before the activation."""

from __future__ import annotations

import numpy as np
import pytest

from convbench.harness import verify
from convbench.kernels.base import Variant
from convbench.spec.descriptor import parse_descriptor

NCHWC = dict(ic_bn=16, oc_bn=16, reg_n=7, unroll_ker=False)
CASES = [
    # nchwc: rows (padded 3x3), plane (1x1), strided plane (1x1 stride 2, gathered), tail
    ('mb1ic32ih14oc48oh14kh3ph1n"rows"', "nchwc", "nchwxc", NCHWC),
    ('mb1ic32ih10oc32oh10kh1n"plane"', "nchwc", "nchwxc", {**NCHWC, "reg_n": 6}),
    ('mb1ic32ih14oc32oh7kh1sh2n"strided"', "nchwc", "nchwxc", {**NCHWC, "reg_n": 4}),
    # depthwise: whole vectors, a C with a tail block (NHWC), NCHW16c's view
    ('g64mb1ic64ih12oc64oh12kh3ph1n"dw"', "depthwise3x3", "nhwc", {"tile": "2x4"}),
    ('g40mb1ic40ih14oc40oh7kh3sh2ph1n"dwtail"', "depthwise3x3", "nhwc", {"tile": "1x1"}),
    ('g40mb1ic40ih9oc40oh9kh3ph1n"dwblk"', "depthwise3x3", "nchw16c", {"tile": "2x4"}),
    # Winograd: the output transform's stores, both schedules, a partial edge tile, a
    # channel count whose last run of 16 overlaps the one before
    ('mb1ic24ih10oc40oh10kh3ph1n"wino"', "winograd4x4", "nhwc",
     {"tile_block": 16, "gemm": "own", "schedule": "staged", "MR": "auto"}),
    # (MR = 4: the store is MR's business no more than the automatic choice, 6 here, and
    # the plain MR = 4 pipeline is the one the other tests compile)
    ('mb1ic24ih9oc24oh9kh3ph1n"winofused"', "winograd2x2", "nhwc",
     {"tile_block": 16, "gemm": "own", "schedule": "fused", "MR": 4}),
    # indirect GEMM: 9 taps in 5 K chunks of 2 (the activation on the last only), 40
    # columns in NR = 16 panels (the last through the scalar edge store), M = 100 rows
    # in MR = 4 panels
    ('mb1ic3ih10oc40oh10kh3ph1n"indirect"', "indirect", "nhwc",
     {"MR": 4, "NR": 16, "MC": 8, "KC": 6}),
    # nchwc tiles spanning two output blocks (oc_blocks): rows and plane
    ('mb1ic32ih14oc64oh14kh3ph1n"rowsblk"', "nchwc", "nchwxc", {**NCHWC, "oc_blocks": 2}),
    ('mb1ic32ih10oc48oh10kh1n"planeblk"', "nchwc", "nchwxc",
     {**NCHWC, "reg_n": 6, "oc_blocks": 3}),
    # the in-place 1x1 GEMM: 81 pixels in tiles of 32 and a tail of 17, 22 channels in
    # panels of 8 (the last holds 6)
    ('mb1ic24ih9oc22oh9kh1n"gemm1x1"', "gemm1x1", "nchw", {"MR": 8, "NR": 32}),
]


def _built(desc, algorithm, layout, params, scale=3.0):
    p = parse_descriptor(desc)
    rng = np.random.default_rng(7)
    x = (scale * rng.standard_normal(p.input_shape)).astype(np.float32)
    w = rng.standard_normal(p.weight_shape).astype(np.float32)
    params = {"order": "tiles", **params} if algorithm == "depthwise3x3" else params
    return verify.prepare(p, Variant.of(algorithm, layout, params), x, w)


# Each (case, kind) compiles a kernel of its own (~2.5 s with an empty numba cache): every
# kernel family meets both activations, its vector and its scalar stores (the tail block)
KINDS = {"rows": ["relu6"], "plane": ["relu"], "strided": ["relu6"], "dw": ["relu"],
         "dwtail": ["relu", "relu6"], "dwblk": ["relu6"], "wino": ["relu"],
         "winofused": ["relu6"], "indirect": ["relu6"], "rowsblk": ["relu"],
         "planeblk": ["relu6"], "gemm1x1": ["relu", "relu6"]}


def _name(case) -> str:
    return case[0].rsplit('"', 2)[1]


ACTIVATION_CASES = [(case, kind) for case in CASES for kind in KINDS[_name(case)]]


@pytest.mark.parametrize("case,kind", ACTIVATION_CASES,
                         ids=[f"{_name(c)}-{k}" for c, k in ACTIVATION_CASES])
def test_a_fused_activation_is_the_activation_of_the_plain_output(case, kind):
    ex = _built(*case)
    ex.prepared.run(ex.x, ex.y)
    plain = ex.y.copy()
    # the sums cross both bounds, so both clamps are exercised
    assert (plain < 0).mean() > 0.2 and (kind == "relu" or (plain > 6).mean() > 0.05)
    assert ex.prepared.fuse_activation(kind)
    ex.y[...] = np.nan   # every output written again, none left from before
    ex.prepared.run(ex.x, ex.y)
    want = np.maximum(plain, 0) if kind == "relu" else np.clip(plain, 0, 6)
    np.testing.assert_array_equal(ex.y, want)


@pytest.mark.parametrize("case", CASES, ids=[_name(c) for c in CASES])
def test_nan_survives_a_fused_relu(case):
    """A NaN input poisons the outputs that read it; the fused relu keeps them NaN (a
    kernel gone wrong still fails the network pass's check, as with the glue relu).  Every
    fusing kernel: with LLVM's nnan the depthwise NCHW16c kernel dropped it on the AVX2 host
    only (kernels/epilogue.py)."""
    ex = _built(*case)
    assert ex.prepared.fuse_activation("relu6")   # else the plain kernel's NaN is tested
    ex.x.reshape(-1)[0] = np.nan
    ex.prepared.run(ex.x, ex.y)
    assert np.isnan(ex.y).any()


@pytest.mark.parametrize("case,kind", [(CASES[0], "relu"), (CASES[1], None), (CASES[2], "relu6"),
                                       (CASES[-2], "relu"), (CASES[-1], "relu6")],
                         ids=["rows-relu", "plane", "strided-relu6", "planeblk-relu",
                              "gemm1x1-relu6"])
def test_a_fused_residual_adds_the_sums_to_the_shortcut_in_the_output(case, kind):
    ex = _built(*case)
    ex.prepared.run(ex.x, ex.y)
    plain = ex.y.copy()
    shortcut = (3 * np.random.default_rng(3).standard_normal(ex.y.shape)).astype(np.float32)
    assert ex.prepared.fuse_residual()
    assert kind is None or ex.prepared.fuse_activation(kind)
    ex.y[...] = shortcut
    ex.prepared.run(ex.x, ex.y)
    want = plain + shortcut
    if kind:
        want = np.maximum(want, 0) if kind == "relu" else np.clip(want, 0, 6)
        assert (want == 0).mean() > 0.2   # the add comes first: the clamp sees the sum
    np.testing.assert_array_equal(ex.y, want)


def test_a_kernel_that_cannot_fuse_says_so_and_changes_nothing():
    ex = _built('mb1ic8ih6oc8oh6kh3ph1n"d"', "direct", "nchw", {})
    ex.prepared.run(ex.x, ex.y)
    plain = ex.y.copy()
    assert ex.prepared.fuse_activation("relu") is False
    assert ex.prepared.fuse_residual() is False
    ex.prepared.run(ex.x, ex.y)
    np.testing.assert_array_equal(ex.y, plain)


# the kernels that fuse nothing, and the layouts / groups where a fusing one does not
PLAIN_CASES = [
    ("mb1ic16ih8oc16oh8kh3ph1", "direct", "nchw", {}),
    ("mb1ic16ih8oc16oh8kh3ph1", "im2col", "nhwc", {"gemm": "blas"}),
    ("mb1ic16ih8oc16oh8kh3ph1", "spatial_pack", "nhwc", {}),
    ("mb1ic16ih8oc16oh8kh1", "strassen", "nchw", {}),
    ("g16mb1ic16ih8oc16oh8kh3ph1", "depthwise3x3", "nchw", {}),
    ("g2mb1ic16ih8oc16oh8kh3ph1", "indirect", "nhwc", {}),
]


@pytest.mark.parametrize("case", CASES + PLAIN_CASES,
                         ids=[f"{c[1]}-{c[2]}-{i}" for i, c in enumerate(CASES + PLAIN_CASES)])
def test_the_declared_epilogues_are_what_the_built_kernel_fuses(case):
    """``Algorithm.fused_ops`` (what the layout plan charges nothing for) says exactly what
    the built kernel's ``fuse_activation`` / ``fuse_residual`` accept."""
    from convbench.kernels import registry

    desc, algorithm, layout, params = case
    p = parse_descriptor(desc.split("n\"")[0])
    rng = np.random.default_rng(3)
    w = rng.standard_normal(p.weight_shape).astype(np.float32)
    alg = registry.get(algorithm)
    params = {**alg.defaults, **params}
    accepted = set()
    for kind in ("relu", "relu6", "add"):
        prepared = alg.build(p, w, layout, params)   # fresh: a fuse_* call switches it
        if prepared.fuse_residual() if kind == "add" else prepared.fuse_activation(kind):
            accepted.add(kind)
    assert alg.fused_ops(p, layout) == accepted
