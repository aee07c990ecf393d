"""Depthwise 3x3 (QNNPACK style): its three layouts against the reference, its weight packing,
a mis-packed kernel being caught, applicability and vectorisation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convbench import host
from convbench.harness.inputs import make_inputs
from convbench.kernels import depthwise, registry
from convbench.kernels.asm import dispatcher_asm, fp_profile, hot_block, hot_block_spills
from convbench.kernels.layouts import empty, from_layout, to_layout
from convbench.kernels.reference import Reference
from convbench.spec.problem import ConvProblem
from tests.conftest import numba_threads
from tests.strategies import depthwise_problems

KERNELS = {"nhwc": depthwise.DepthwiseNHWC, "nchw": depthwise.DepthwiseNCHW,
           depthwise.BLOCKED: depthwise.DepthwiseNCHW16c, "nchw32c": depthwise.DepthwiseNCHW32c}
BLOCKED_KINDS = [depthwise.DepthwiseNCHW16c, depthwise.DepthwiseNCHW32c]

# every tile in the default order, the default tile in the other: the order changes only
# the loops around the tile (each pair compiles two kernels; the full grid, 12 pairs, would
# compile 10 more per test for no code these leave out)
TILE_ORDERS = ([(t, depthwise.DEFAULT_ORDER) for t in depthwise.TILES]
               + [(depthwise.DEFAULT_TILE, o) for o in depthwise.ORDERS
                  if o != depthwise.DEFAULT_ORDER])


def _run(p: ConvProblem, layout: str, prepared=None, seed: int = 1):
    x, w = make_inputs(p, seed)
    prepared = prepared or KERNELS[layout](p, w)
    y = empty(p.output_shape, layout)
    y.fill(np.nan)
    prepared.run(to_layout(x, layout), y)
    return Reference(p, x, w).compare(from_layout(y, layout, p.oc))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=depthwise_problems(), layout=st.sampled_from(sorted(KERNELS)))
def test_matches_reference(problem, layout):
    report = _run(problem, layout)
    assert report.passed, f"{layout} on {problem}: {report.reason}"


@pytest.mark.parametrize("stride", [1, 2])
def test_nhwc_with_the_channel_count_compiled_in(stride):
    """C a multiple of the vector width is compiled into the NHWC kernel (its pixel stride);
    the kernel matches the reference in every tile (and the other order) on a plane that
    leaves part-filled bands and tiles, and refuses another C.  C = 32, as in the packed-FMA
    test below: the same kernels, compiled once for both (a C of its own compiled 18 more
    parallel kernels, ~27 s of a cold suite on the Zen 3 host)."""
    p = ConvProblem.make(g=32, ic=32, oc=32, ih=9, iw=13, kh=3, kw=3, sh=stride, sw=stride,
                         ph=1, pw=1)
    _, w = make_inputs(p, 1)
    for tile, order in TILE_ORDERS:
        kernel = depthwise.DepthwiseNHWC(p, w, tile, order)
        assert kernel.channels == 32
        report = _run(p, "nhwc", kernel)
        assert report.passed, f"{tile} {order}: {report.reason}"
    # 36 channels: not whole vectors of 8 or 16 lanes
    odd = ConvProblem.make(g=36, ic=36, oc=36, ih=5, iw=5, kh=3, kw=3, ph=1, pw=1)
    assert depthwise.DepthwiseNHWC(odd, make_inputs(odd, 1)[1]).channels == 0
    x = np.zeros((1, 5, 5, 48), np.float32)
    with pytest.raises(ValueError, match="built for 32"):
        kernel.run(x, np.zeros((1, 5, 5, 48), np.float32))


@pytest.mark.parametrize("layout", sorted(KERNELS))
@pytest.mark.parametrize("shape", [
    dict(g=35, ic=35, oc=35, ih=9, iw=4, kh=3, kw=3, sh=2, sw=2, ph=1, pw=1),  # 2 blocks + 3
    dict(g=16, ic=16, oc=16, ih=3, iw=3, kh=3, kw=3, ph=0, pw=0),   # no padding, 1 pixel
    dict(g=7, ic=7, oc=7, ih=2, iw=1, kh=3, kw=3, ph=2, pw=2),      # padding > image
    dict(mb=2, g=33, ic=33, oc=33, ih=6, iw=11, kh=3, kw=3, ph=1, pw=0),
])
def test_edge_shapes(layout, shape):
    report = _run(ConvProblem.make(**shape), layout)
    assert report.passed, report.reason


def test_packing_is_blocks_kw_kh_lanes():
    c, lanes = 21, depthwise.V
    w = np.arange(c * 9, dtype=np.float32).reshape(c, 1, 3, 3)
    wp = depthwise.pack_weights(w)
    assert wp.shape == (2, 3, 3, lanes)
    for ch in (0, 5, 16, 20):
        for kh in range(3):
            for kw in range(3):
                assert wp[ch // lanes, kw, kh, ch % lanes] == w[ch, 0, kh, kw]
    assert not wp[1, :, :, c - lanes:].any()     # the padding lanes are zero
    # NCHW32c's images are two blocks each: 40 channels pack as 4 blocks, 24 of them zeros
    w40 = np.ones((40, 1, 3, 3), np.float32)
    wp = depthwise.pack_weights(w40, whole=2 * lanes)
    assert wp.shape == (4, 3, 3, lanes) and wp.sum() == 40 * 9


def test_mispacked_weights_are_caught():
    """A plausible bug: KH and KW swapped while packing (a transposed kernel)."""
    p = ConvProblem.make(g=20, ic=20, oc=20, ih=7, iw=7, kh=3, kw=3, ph=1, pw=1)
    _, w = make_inputs(p, 1)
    prepared = depthwise.DepthwiseNHWC(p, w)
    prepared.wp = np.ascontiguousarray(prepared.wp.transpose(0, 2, 1, 3))
    assert not _run(p, "nhwc", prepared).passed


@pytest.mark.parametrize("kind", BLOCKED_KINDS, ids=lambda k: k.in_layout)
def test_blocked_planes_use_their_own_weights(kind):
    """NCHW[x]c runs the NHWC kernel on C/x images of x channels: image i must use the
    weight blocks from (i mod C/x) * x/16 on.  A plausible bug, every image using the first
    (w_groups = 1), is caught on layers of two to four images, the last one part-filled
    (its padding channels' weights packed as zeros), and on a batch of two."""

    class OneWeightGroup(kind):
        def run(self, x: np.ndarray, y: np.ndarray) -> None:
            self.launch(x, self.wp, self.zero, y, self.p.ph, self.p.pw, 1)

    for shape in (dict(g=64, ic=64, oc=64, ih=6, iw=6), dict(g=48, ic=48, oc=48, ih=5, iw=5),
                  dict(mb=2, g=40, ic=40, oc=40, ih=5, iw=7)):
        p = ConvProblem.make(kh=3, kw=3, ph=1, pw=1, **shape)
        _, w = make_inputs(p, 1)
        assert _run(p, kind.in_layout).passed
        assert not _run(p, kind.in_layout, OneWeightGroup(p, w)).passed


def test_the_kernel_launched_is_chosen_under_the_threads_it_is_built_with():
    """The parallel loop's launch costs ~1 us on one thread, and asking numba for its
    thread count ~0.5 us a call: the kernel is chosen once, when built (in the worker,
    under its threads)."""
    p = ConvProblem.make(g=32, ic=32, oc=32, ih=6, iw=6, kh=3, kw=3, ph=1, pw=1)
    _, w = make_inputs(p, 1)
    for threads in (1, 2):
        with numba_threads(threads):
            for kind in (depthwise.DepthwiseNHWC, *BLOCKED_KINDS):
                built = kind(p, w)
                assert built.launch is (built.serial if threads == 1 else built.kernel)
                assert _run(p, kind.in_layout, built).passed


@pytest.mark.parametrize("layout", depthwise.BLOCKS)
def test_blocked_layout_has_no_block_order(layout):
    p = ConvProblem.make(g=32, ic=32, oc=32, ih=6, iw=6, kh=3, kw=3, ph=1, pw=1)
    alg = registry.get("depthwise3x3")
    assert alg.applies(p, layout, {"tile": "1x8"}) is None
    assert "order" in alg.applies(p, layout, {"order": "blocks"})


@pytest.mark.parametrize("ow", [7, 14, 56])
def test_every_layer_sweeps_every_tile(ow):
    """The registry's variants of one layer: NHWC and NCHW16c in every tile (a narrow layer's
    winner need not divide its width: 1 x 2 on 7 x 7 at 2 threads), NCHW once."""
    p = ConvProblem.make(g=32, ic=32, oc=32, ih=2 * ow, iw=2 * ow, kh=3, kw=3, sh=2, sw=2,
                         ph=1, pw=1)
    assert p.ow == ow
    ran: dict[str, set[str]] = {}
    for variant, skip in registry.variants(p, ("depthwise3x3",)):
        if skip is None:
            ran.setdefault(variant.layout, set()).add(str(variant.param_dict["tile"]))
    assert ran["nhwc"] == ran[depthwise.BLOCKED] == set(depthwise.TILES)
    assert ran["nchw"] == {depthwise.DEFAULT_TILE}


@pytest.mark.parametrize("fields, reason", [
    (dict(g=1, ic=4, oc=4, kh=3, kw=3), "groups"),
    (dict(g=4, ic=4, oc=8, kh=3, kw=3), "groups"),
    (dict(g=4, ic=4, oc=4, kh=5, kw=5), "3x3"),
    (dict(g=4, ic=4, oc=4, kh=3, kw=3, sh=3, sw=3), "stride"),
    (dict(g=4, ic=4, oc=4, kh=3, kw=3, sh=1, sw=2), "stride"),
    (dict(g=4, ic=4, oc=4, kh=3, kw=3, dh=1, dw=1), "undilated"),
])
def test_applies_says_why_not(fields, reason):
    p = ConvProblem.make(mb=1, ih=12, iw=12, ph=1, pw=1, **fields)
    skip = registry.get("depthwise3x3").applies(p, "nhwc", {})
    assert skip is not None and reason in skip


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("tile, order", TILE_ORDERS)
def test_nhwc_tiles_have_packed_fmas(tile, order, stride):
    """Each of the tile's R x P pixels needs 9 FMAs (the first may be a multiply) per
    vector of lanes: fewer packed FMAs means part of the tile went scalar, as 2 x 8 did."""
    p = ConvProblem.make(g=32, ic=32, oc=32, ih=10, iw=20, kh=3, kw=3, sh=stride, sw=stride,
                         ph=1, pw=1)
    x, w = make_inputs(p, 1)
    prepared = depthwise.DepthwiseNHWC(p, w, tile, order)
    assert _run(p, "nhwc", prepared).passed
    x = to_layout(x, "nhwc")
    y = empty(p.output_shape, "nhwc")
    rows, pixels = depthwise.tile_shape(tile)
    lengths = []
    for kernel in prepared.hot_kernels():    # the parallel and the serial one
        kernel(x, prepared.wp, prepared.zero, y, p.ph, p.pw, 1)
        asm = dispatcher_asm(kernel)
        block = hot_block(asm)
        lengths.append(sum(1 for line in block if not line.lstrip().startswith("vmov")))
        profile = fp_profile(asm)
        assert profile.total_packed_fma >= rows * pixels * 8, (tile, profile)
        # the interior tile in one block, with no call in it (numba's reference counting
        # was one pair per tile) and, where the sums, the 9 weight vectors, the zero and a
        # row's input taps fit the register file, no vector on the stack (the old lane
        # loop kept a stack tile).  Each tap is loaded once and lives until its last use:
        # 2 x 2 at stride 1 kept 4 vectors on the stack with 16 ymm (Zen 3 host).
        fmas, stack = hot_block_spills(asm)
        assert fmas >= rows * pixels * 8, (tile, stride, fmas)
        assert not [line for line in block if "call" in line], (tile, stride)
        regs = host.register_file()
        row_taps = (pixels - 1) * stride + 3
        if (rows * pixels + 9 + 1 + row_taps) * regs.vectors(prepared.lanes) <= regs.registers:
            assert stack == 0, (tile, stride, regs.name)
    # the parallel kernel's tile is the serial one's: with the pixel stride set before the
    # prange, numba passed it to the outlined loop as a run-time value and the 2 x 4 tile
    # took 120 instructions instead of 102 (NCHW16c 1.16-1.68x slower at 2 threads), the
    # extra ones address arithmetic.  Vector moves are left out of the count: where the tile
    # spills (AVX2's 16 ymm, Zen 3 host) the two bodies' register allocations move and
    # reload a few vectors differently (1 x 7, stride 2: 249 vs 242 lines, 126 vs 126
    # without the vmov's)
    parallel, serial = lengths
    assert parallel <= serial + 4, (tile, stride, lengths)


@pytest.mark.parametrize("kind", BLOCKED_KINDS, ids=lambda k: k.in_layout)
def test_blocked_tiles_have_packed_fmas(kind):
    """The blocked views run the NHWC tile with the pixel stride x compiled in: the 2 x 4
    tile's 72 FMAs a vector of lanes, in one block with no call, in both kernels."""
    p = ConvProblem.make(g=64, ic=64, oc=64, ih=10, iw=20, kh=3, kw=3, ph=1, pw=1)
    x, w = make_inputs(p, 1)
    prepared = kind(p, w, "2x4")
    assert _run(p, kind.in_layout, prepared).passed
    x, y = to_layout(x, kind.in_layout), empty(p.output_shape, kind.in_layout)
    for kernel in prepared.hot_kernels():    # the parallel and the serial one
        kernel(x, prepared.wp, prepared.zero, y, p.ph, p.pw, prepared.w_groups)
        asm = dispatcher_asm(kernel)
        fmas, _ = hot_block_spills(asm)
        assert fmas >= 2 * 4 * 8, (kind.in_layout, fmas)
        assert not [line for line in hot_block(asm) if "call" in line]


def test_nchw_kernel_has_packed_fmas():
    _run(ConvProblem.make(g=32, ic=32, oc=32, ih=10, iw=20, kh=3, kw=3, ph=1, pw=1), "nchw")
    assert fp_profile(dispatcher_asm(depthwise._dw3x3_nchw)).vectorised


def test_nhwc_lanes_are_one_register_of_the_host():
    """NHWC's weight blocks and tile vectors are one register wide (two NEON q registers);
    NCHW16c keeps its layout's block."""
    assert depthwise.nhwc_lanes(host.ZMM) == 16
    assert depthwise.nhwc_lanes(host.YMM) == 8
    assert depthwise.nhwc_lanes(host.NEON) == 8
    p = ConvProblem.make(g=24, ic=24, oc=24, ih=9, iw=9, kh=3, kw=3, ph=1, pw=1)
    _, w = make_inputs(p, 1)
    nhwc = depthwise.DepthwiseNHWC(p, w)
    lanes = depthwise.nhwc_lanes()
    assert nhwc.lanes == lanes and nhwc.wp.shape == (-(-24 // lanes), 3, 3, lanes)
    assert nhwc.info()["lanes"] == lanes
    assert depthwise.DepthwiseNCHW16c(p, w).lanes == depthwise.V
