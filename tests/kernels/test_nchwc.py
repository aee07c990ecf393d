"""Blocked NCHW[x]c (NeoCPU): every parameter choice against the reference on shapes whose
channels and widths are not multiples of the blocks, the layout round trip, the separately
measured layout transforms, a mis-blocked weight tensor being caught, and vectorisation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convbench import host
from convbench.harness.inputs import make_inputs
from convbench.harness.verify import verify
from convbench.kernels import layouts, nchwc, registry
from convbench.kernels.asm import dispatcher_asm, hot_block_spills, kernel_profiles
from convbench.kernels.reference import Reference
from convbench.spec.problem import ConvProblem
from tests.conftest import numba_threads
from tests.strategies import dense_3x3_problems, general_problems


def _run(p: ConvProblem, ic_bn=16, oc_bn=16, reg_n=8, unroll_ker=False, prepared=None):
    x, w = make_inputs(p, seed=1)
    prepared = prepared or nchwc.BlockedNCHWc(p, w, ic_bn, oc_bn, reg_n, unroll_ker)
    y = layouts.empty(p.output_shape, prepared.out_layout)
    y.fill(np.nan)
    prepared.run(layouts.to_layout(x, prepared.in_layout), y)
    out = layouts.from_layout(y, prepared.out_layout, p.oc)
    return Reference(p, x, w).compare(out), y


def _ungrouped(p: ConvProblem) -> ConvProblem:
    return p.replace(g=1, ic=p.icg, oc=p.ocg)


# Each example compiles a kernel of its own (its blocks, reg_n, stride and, unrolled, its
# kernel size are constants: ~1.3 s with an empty numba cache, Zen 3 host), with a warm
# cache too, since the draws differ from run to run: 15 and 10 examples a run (30 and 20
# took 50 s of a suite over its 10 minutes there); every run draws others, and the
# registered grid is checked whole below.
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=st.one_of(dense_3x3_problems(), general_problems().map(_ungrouped)),
       ic_bn=st.sampled_from([1, 4, 8, 16]), oc_bn=st.sampled_from([8, 16, 32]),
       reg_n=st.sampled_from([1, 3, 7, 8, 28]), unroll_ker=st.booleans())
def test_matches_reference(problem, ic_bn, oc_bn, reg_n, unroll_ker):
    """Any stride, padding, dilation and kernel size; channels padded to whole blocks."""
    report, y = _run(problem, ic_bn, oc_bn, reg_n, unroll_ker)
    assert report.passed, f"{(ic_bn, oc_bn, reg_n, unroll_ker)} on {problem}: {report.reason}"
    assert np.all(np.isfinite(y))   # the padding channels are written too (as zeros)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=st.one_of(dense_3x3_problems(), general_problems().map(_ungrouped)),
       ic_bn=st.sampled_from([1, 8, 16]),
       # the spans a tile may take on this host (4 registers: 64 lanes with zmm, 32 ymm)
       blocks=st.sampled_from([(oc_bn, oc_blocks) for oc_bn in (nchwc.LANES, 2 * nchwc.LANES)
                               for oc_blocks in (2, 3, 4)
                               if oc_bn * oc_blocks <= nchwc.SPAN_LANES]),
       reg_n=st.sampled_from([1, 3, 5]), cut=st.integers(0, 15))
def test_a_tile_spanning_output_blocks_matches_reference(problem, ic_bn, blocks, reg_n, cut):
    """oc_blocks: one register tile writes several NCHW[oc_bn]c blocks; the layer's output
    channels made to fill whole tiles, the last block partly padding."""
    oc_bn, oc_blocks = blocks
    span = oc_blocks * oc_bn
    p = problem.replace(oc=span * -(-problem.oc // span) - cut % oc_bn)
    prepared = nchwc.BlockedNCHWc(p, make_inputs(p, seed=1)[1], ic_bn, oc_bn, reg_n, False,
                                  oc_blocks)
    assert prepared.out_layout == f"nchw{oc_bn}c"
    report, y = _run(p, prepared=prepared)
    assert report.passed, f"{(ic_bn, oc_bn, oc_blocks, reg_n)} on {p}: {report.reason}"
    assert np.all(np.isfinite(y))


def test_a_tile_must_span_whole_blocks_that_divide_the_layers():
    p = ConvProblem.make(mb=1, ic=16, oc=48, ih=8, iw=8, kh=1, kw=1)
    alg = registry.get("nchwc")
    assert "does not divide the layer's 3 output blocks" in alg.applies(
        p, "nchwxc", {"ic_bn": 16, "oc_bn": 16, "reg_n": 4, "oc_blocks": 2})
    half_vector = nchwc.LANES * 3 // 2   # 24 with zmm, 12 with ymm
    assert "multiple of" in alg.applies(
        p, "nchwxc", {"ic_bn": 16, "oc_bn": half_vector, "reg_n": 1, "oc_blocks": 2})
    with pytest.raises(ValueError, match="does not divide"):
        nchwc.BlockedNCHWc(p, make_inputs(p, 1)[1], 16, 16, 4, False, 2)
    # one block per tile is the default, left out of the id: ids recorded before stay
    params = {"ic_bn": 16, "oc_bn": 16, "reg_n": 4, "unroll_ker": False}
    assert alg.variant("nchwxc", {**params, "oc_blocks": 1}).id == \
        "nchwc/nchwxc/ic_bn=16/oc_bn=16/reg_n=4/unroll_ker=False"
    assert alg.variant("nchwxc", {**params, "oc_blocks": 3}).id == \
        "nchwc/nchwxc/ic_bn=16/oc_blocks=3/oc_bn=16/reg_n=4/unroll_ker=False"


def test_registered_grid_is_small_and_passes():
    alg = registry.get("nchwc")
    grid = list(alg.param_grid())
    assert len(grid) <= 24
    p = ConvProblem.make(mb=2, ic=21, oc=37, ih=9, iw=13, kh=3, kw=3, ph=1, pw=1)
    runnable = [params for params in grid if alg.applies(p, "nchwxc", params) is None]
    assert 0 < len(runnable) < len(grid)    # the tiles that spill are skipped
    for params in runnable:
        prepared = alg.build(p, make_inputs(p, 1)[1], "nchwxc", params)
        assert prepared.in_layout == f"nchw{params['ic_bn']}c"
        assert prepared.out_layout == f"nchw{params['oc_bn']}c"
        report, _ = _run(p, prepared=prepared)
        assert report.passed, (params, report.reason)


@pytest.mark.parametrize("x", [1, 8, 16, 5])
def test_layout_round_trip(x):
    rng = np.random.default_rng(x)
    a = rng.standard_normal((2, 19, 5, 7)).astype(np.float32)
    blocked = layouts.to_layout(a, layouts.blocked_name(x))
    assert blocked.shape == (2, -(-19 // x), 5, 7, x)
    assert np.array_equal(layouts.from_layout(blocked, layouts.blocked_name(x), 19), a)
    w = rng.standard_normal((13, 19, 3, 3)).astype(np.float32)
    assert np.array_equal(layouts.kcrsxcyk_to_oihw(layouts.oihw_to_kcrsxcyk(w, x, 16), 13, 19),
                          w)


def test_layout_transforms_are_measured_apart():
    p = ConvProblem.make(ic=24, oc=40, ih=12, iw=12, kh=3, kw=3, ph=1, pw=1)
    prepared = nchwc.BlockedNCHWc(p, make_inputs(p)[1], 8, 16, 8, False)
    info = prepared.info()
    assert info["to_nchwxc_seconds"] > 0 and info["from_nchwxc_seconds"] > 0
    assert info["ic_blocks"] == 3


def test_misblocked_weights_are_caught():
    """A plausible bug: the x and y axes of KCRS[x]c[y]k swapped (equal block sizes)."""
    p = ConvProblem.make(ic=16, oc=16, ih=8, iw=8, kh=3, kw=3, ph=1, pw=1)
    prepared = nchwc.BlockedNCHWc(p, make_inputs(p, 1)[1], 16, 16, 8, False)
    prepared.w = np.ascontiguousarray(prepared.w.transpose(0, 1, 2, 3, 5, 4))
    report, _ = _run(p, prepared=prepared)
    assert not report.passed


def test_grouped_is_skipped_with_reason():
    p = ConvProblem.make(g=2, ic=4, oc=4, ih=6, iw=6, kh=3, kw=3, ph=1, pw=1)
    assert "groups" in registry.get("nchwc").applies(p, "nchwxc", {})


# This host's widest tile that keeps its accumulators in registers (host.py), by file, and
# a wider one that spilled on every host measured (13 x 8 fit on Zen 1, not on Zen 3; on
# the Zen 4 host 31 x 16 fit, its broadcasts folded into the FMAs, so the zmm one takes
# more accumulators plus an operand row than the file has registers)
WIDEST = {host.ZMM: (28, 16), host.YMM: (12, 8), host.NEON: (6, 16)}
SPILLS = {host.ZMM: (32, 16), host.YMM: (15, 8), host.NEON: (7, 16)}


def test_tiles_over_the_register_file_are_skipped():
    p = ConvProblem.make(ic=16, oc=32, ih=8, iw=8, kh=3, kw=3, ph=1, pw=1)

    def applies(reg_n, oc_bn):
        return registry.get("nchwc").applies(p, "nchwxc", {"reg_n": reg_n, "oc_bn": oc_bn})

    reg_n, oc_bn = WIDEST[nchwc.REGISTERS]
    assert applies(reg_n, oc_bn) is None
    assert applies(reg_n + 1, oc_bn).endswith("spills")
    # a row of three registers is held as three vectors (register_tile): it fits
    assert applies(2, 3 * nchwc.LANES) is None


@pytest.mark.skipif(host.detect_cpu().arch != "x86_64", reason="reads x86 assembly")
@pytest.mark.parametrize("tile", ["default", "widest", "over"])
def test_tiles_that_fit_do_not_spill_in_their_loop(tile):
    """Compiled for this host, the hot FMA loop of a tile that fits reads and writes no
    vector on the stack; a wider one that spilled on every host measured does (the
    check can fail)."""
    reg_n, oc_bn = {"default": (nchwc.DEFAULT_REG_N, nchwc.DEFAULT_OC_BN),
                    "widest": WIDEST[nchwc.REGISTERS],
                    "over": SPILLS[nchwc.REGISTERS]}[tile]
    p = ConvProblem.make(ic=8, oc=oc_bn, ih=6, iw=reg_n + 2, kh=3, kw=3)
    prepared = nchwc.BlockedNCHWc(p, make_inputs(p, 1)[1], 8, oc_bn, reg_n, False)
    report, _ = _run(p, prepared=prepared)
    assert report.passed
    fmas, stack = hot_block_spills(dispatcher_asm(prepared.kernel))
    assert fmas >= reg_n * nchwc.REGISTERS.vectors(oc_bn)
    assert (stack > 0) == (tile == "over"), (tile, fmas, stack)


@pytest.mark.parametrize(("oc_bn", "reg_n", "unroll_ker"), [(16, 8, False), (32, 7, True)])
def test_kernel_has_packed_fmas(oc_bn, reg_n, unroll_ker):
    """The hot kernel is the dispatcher, and its FMAs are all packed: one per accumulator
    vector per input channel, none scalar (a scalar FMA means the tile fell apart)."""
    p = ConvProblem.make(ic=16, oc=32, ih=10, iw=10, kh=3, kw=3, ph=1, pw=1)
    prepared = nchwc.BlockedNCHWc(p, make_inputs(p, 1)[1], 16, oc_bn, reg_n, unroll_ker)
    report, _ = _run(p, prepared=prepared)
    assert report.passed
    assert prepared.hot_kernels() == (prepared.kernel,)
    (profile,) = kernel_profiles(prepared)
    assert profile.profile.vectorised and profile.profile.scalar_fma == 0, profile


def test_the_stem_runs_its_input_channels_as_one_block_in_the_sweep_grid():
    """A layer with fewer input channels than IC_BN's smallest block gets ic_bn = IC in the
    grid (no zero-padded channels); wider layers keep IC_BN; a suite's domain wins."""
    stem = ConvProblem.make(mb=1, ic=3, oc=64, ih=32, iw=32, kh=7, kw=7, sh=2, sw=2, ph=3, pw=3)
    wide = ConvProblem.make(mb=1, ic=64, oc=64, ih=14, iw=14, kh=3, kw=3, ph=1, pw=1)

    def ic_bns(problem, params=None):
        return {v.param_dict["ic_bn"] for v, _ in registry.variants(problem, ("nchwc",),
                                                                    params=params)}

    assert ic_bns(stem) == {3}
    assert ic_bns(wide) == set(nchwc.IC_BN)
    assert ic_bns(stem, {"nchwc": {"ic_bn": (8,)}}) == {8}
    x, w = make_inputs(stem, seed=4)
    variant = next(v for v, skip in registry.variants(stem, ("nchwc",)) if skip is None)
    verdict, _ = verify(stem, variant, Reference(stem, x, w), x, w)
    assert verdict.status == "ok", verdict.reason


@pytest.mark.parametrize(("mb", "oh", "ow", "reg_n", "ic_bn", "oc_bn"), [
    (2, 7, 7, 6, 8, 16),    # 8 full tiles; the 1-pixel tail is a job of its own
    (1, 5, 6, 4, 16, 8),    # 7 full tiles; the 2-pixel tail shares the last job
    (1, 7, 7, 7, 4, 32),    # the plane a multiple of reg_n: no tail
    (3, 2, 3, 8, 8, 8),     # a plane smaller than one tile: the tail alone
])
def test_pointwise_layers_tile_the_plane(mb, oh, ow, reg_n, ic_bn, oc_bn):
    """A 1x1 stride-1 unpadded layer runs tiles along the H x W plane and a tail tile for
    its remainder, in place; channels not multiples of the blocks are padded as elsewhere."""
    p = ConvProblem.make(mb=mb, ic=21, oc=37, ih=oh, iw=ow, kh=1, kw=1)
    prepared = nchwc.BlockedNCHWc(p, make_inputs(p, 1)[1], ic_bn, oc_bn, reg_n, False)
    report, y = _run(p, prepared=prepared)
    assert report.passed, report.reason
    assert np.all(np.isfinite(y))
    info = prepared.info()
    assert info["tiles_along"] == "plane" and info["input_copied"] is False
    assert prepared.workspace_bytes == 0


@pytest.mark.parametrize("chunk", [1, 2, 3, 5])
@pytest.mark.parametrize(("fields", "plane"), [
    ({"kh": 1, "kw": 1, "sh": 2, "sw": 2}, True), ({"kh": 3, "kw": 3, "ph": 1, "pw": 1}, False)])
def test_runs_of_output_blocks_sweep_the_input_in_any_length(chunk, fields, plane):
    """The kernels' job order (_job_place): runs of ``ocb_chunk`` output blocks (the last
    one shorter where the run does not divide them), each run's plane tiles and tail, or
    rows, over the whole input, two images; every length computes the same layer."""
    p = ConvProblem.make(mb=2, ic=24, oc=40, ih=9, iw=8, **fields)
    prepared = nchwc.BlockedNCHWc(p, make_inputs(p, 1)[1], 8, 8, 4, False)
    assert prepared.plane == plane and prepared.w.shape[0] == 5
    prepared.ocb_chunk = chunk
    report, y = _run(p, prepared=prepared)
    assert report.passed, report.reason
    assert np.all(np.isfinite(y))


def test_a_run_of_output_blocks_keeps_its_weights_within_the_budget():
    """ocb_chunk: as many output blocks as the weight budget holds, at least one, at most
    all of them."""
    w = np.zeros((10, 4, 1, 1, 8, 16), np.float32)     # 2 KiB a block
    assert nchwc.ocb_chunk(w, budget=8 << 10) == 4
    assert nchwc.ocb_chunk(w, budget=1 << 10) == 1
    assert nchwc.ocb_chunk(w, budget=1 << 30) == 10


@pytest.mark.parametrize(("mb", "ih", "iw", "sh", "sw", "reg_n"), [
    (1, 28, 28, 2, 2, 6),    # ResNet's projection: 14 x 14 = 196 = 32 tiles and a tail of 4
    (2, 9, 8, 2, 3, 4),      # odd input (5 rows), unequal strides (3 columns): a tail of 3
    (1, 7, 7, 3, 1, 7),      # a stride along H only: 3 x 7, no tail
])
def test_strided_1x1_layers_gather_their_pixels_and_tile_the_plane(mb, ih, iw, sh, sw, reg_n):
    """A strided 1x1 unpadded layer (ResNet's projection shortcuts) gathers the pixels it
    reads into a plane of its own, then runs the pointwise layers' plane tiles on it; the
    gathered plane is its workspace."""
    p = ConvProblem.make(mb=mb, ic=20, oc=24, ih=ih, iw=iw, kh=1, kw=1, sh=sh, sw=sw)
    prepared = nchwc.BlockedNCHWc(p, make_inputs(p, 1)[1], 8, 8, reg_n, False)
    report, y = _run(p, prepared=prepared)
    assert report.passed, report.reason
    assert np.all(np.isfinite(y))
    info = prepared.info()
    assert info["tiles_along"] == "plane" and info["input_copied"] is True
    assert prepared.workspace_bytes == mb * 3 * p.oh * p.ow * 8 * 4   # 20 channels: 3 blocks


@pytest.mark.parametrize(("fields", "reg_n"), [
    ({"kh": 3, "kw": 3, "sh": 2, "sw": 2, "ph": 1, "pw": 1}, 4),   # 5-wide rows, tiles of 4
    # unequal kernel, strides and padding, dilated: 5 x 3 outputs, tiles of 4 and a tail of 3
    ({"kh": 3, "kw": 2, "sh": 2, "sw": 3, "ph": 1, "pw": 0, "dh": 1}, 4),
])
def test_strided_layers_whose_rows_leave_idle_tiles_gather_their_taps(fields, reg_n):
    """A strided layer whose rows reg_n does not divide gathers a plane per kernel tap
    (its zero border included) and sums over taps as over channel blocks."""
    p = ConvProblem.make(mb=2, ic=20, oc=24, ih=11, iw=9, **fields)
    assert p.ow % reg_n != 0
    prepared = nchwc.BlockedNCHWc(p, make_inputs(p, 1)[1], 8, 8, reg_n, False)
    for _ in range(2):   # the gathered planes' border stays zero
        report = _run(p, prepared=prepared)[0]
        assert report.passed, report.reason
    assert prepared.info()["tiles_along"] == "plane"
    assert prepared.workspace_bytes == 2 * 3 * p.kh * p.kw * p.oh * p.ow * 8 * 4


@settings(max_examples=60, deadline=None)
@given(problem=general_problems().map(_ungrouped), cb=st.sampled_from([1, 3, 8]))
def test_gathered_tap_planes_hold_the_pixels_each_tap_reads(problem, cb):
    """_gather_taps against numpy: tap (r, s)'s plane holds the input pixel under each
    output pixel, zero where that pixel is in the padding, for any stride, padding and
    dilation; the unwritten border keeps the zeros it was allocated with."""
    p = problem
    blocks = -(-p.ic // cb)
    x = np.random.default_rng(0).standard_normal((p.mb, blocks, p.ih, p.iw, cb),
                                                 dtype=np.float32)
    xs = np.zeros((p.mb, blocks, p.kh * p.kw * p.oh, p.ow, cb), np.float32)
    nchwc._gather_taps(x, xs, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw)
    padded = np.pad(x, ((0, 0), (0, 0), (p.ph, p.ph + p.sh), (p.pw, p.pw + p.sw), (0, 0)))
    for r in range(p.kh):
        for s in range(p.kw):
            h0, w0 = r * (p.dh + 1), s * (p.dw + 1)
            want = padded[:, :, h0:h0 + p.sh * p.oh:p.sh, w0:w0 + p.sw * p.ow:p.sw]
            tap = (r * p.kw + s) * p.oh
            np.testing.assert_array_equal(xs[:, :, tap:tap + p.oh], want)


@pytest.mark.parametrize(("fields", "reg_n"), [
    ({"ph": 1, "pw": 1}, 4), ({"kh": 3, "kw": 3}, 4),
    ({"kh": 3, "kw": 3, "sh": 2, "sw": 2, "ph": 1, "pw": 1}, 5),   # 5-wide rows, tiles of 5
])
def test_other_layers_tile_rows(fields, reg_n):
    """Padded 1x1 layers, stride-1 ones, and strided ones whose rows reg_n divides keep
    the row tiles."""
    p = ConvProblem.make(mb=1, ic=16, oc=16, ih=9, iw=9, **{"kh": 1, "kw": 1, **fields})
    prepared = nchwc.BlockedNCHWc(p, make_inputs(p, 1)[1], 16, 16, reg_n, False)
    report, _ = _run(p, prepared=prepared)
    assert report.passed, report.reason
    assert prepared.info()["tiles_along"] == "rows"


@pytest.mark.parametrize(("fields", "oc_blocks"), [
    ({"kh": 1, "kw": 1}, 1), ({"kh": 3, "kw": 3, "sh": 2, "sw": 2, "ph": 1, "pw": 1}, 1),
    ({"kh": 1, "kw": 1}, 2)])
def test_plane_kernel_has_packed_fmas_and_no_spill(fields, oc_blocks):
    """The plane kernel's hot loop is the same register tile, over one tap or a gathered
    plane per tap, one output block wide or two (oc_blocks): packed FMAs, one per
    accumulator vector per input channel, and no vector on the stack."""
    reg_n, oc_bn = nchwc.DEFAULT_REG_N, nchwc.DEFAULT_OC_BN // oc_blocks
    # rows of reg_n + 1 at stride 2: the host's default reg_n divides none of them, so the
    # strided layer takes the plane tiles on every register file (6 on AVX2, 7 on AVX-512)
    side = 2 * reg_n + 1
    p = ConvProblem.make(ic=32, oc=oc_bn * oc_blocks, ih=side, iw=side, **fields)
    assert nchwc.plane_tiled(p, reg_n)
    prepared = nchwc.BlockedNCHWc(p, make_inputs(p, 1)[1], 16, oc_bn, reg_n, False,
                                  oc_blocks)
    report, _ = _run(p, prepared=prepared)
    assert report.passed
    (profile,) = kernel_profiles(prepared)
    assert profile.profile.vectorised and profile.profile.scalar_fma == 0, profile
    if host.detect_cpu().arch == "x86_64":
        fmas, stack = hot_block_spills(dispatcher_asm(prepared.kernel))
        want = reg_n * nchwc.REGISTERS.vectors(oc_bn * oc_blocks)
        assert fmas >= want and stack == 0, (fmas, stack)


def test_pointwise_tuning_space_takes_tiles_that_do_not_divide_the_row():
    """A 7 x 7 pointwise layer's reg_n runs past the row (its tiles run along the plane,
    with a tail tile) and is not held to the factors of 7 with every block size; a 7 x 7
    3x3 layer's reg_n stays within the row."""
    pointwise = ConvProblem.make(ic=64, oc=64, ih=7, iw=7, kh=1, kw=1)
    three = ConvProblem.make(ic=64, oc=64, ih=7, iw=7, kh=3, kw=3, ph=1, pw=1)
    strided = three.replace(ih=14, iw=14, sh=2, sw=2)   # 7 x 7 outputs: a non-factor tiles
    space = nchwc.tuning_space(pointwise)                # the plane (plane_tiled)
    assert max(c["reg_n"] for c in space) > 7
    assert max(c["reg_n"] for c in nchwc.tuning_space(three)) <= 7
    assert max(c["reg_n"] for c in nchwc.tuning_space(strided)) > 7
    # beyond the sweep grid's tiles: a non-factor reg_n with a block size the grid lacks
    assert any(c["reg_n"] not in (1, 7) and c["ic_bn"] not in nchwc.IC_BN for c in space)


def _fewest_slots(pixels: int, oc_bn: int, widths: tuple[int, ...] | None = None) -> int:
    """The fewest issue slots a fitting reg_n of ``widths`` (None: any width up to
    REG_N_BOUND) takes on a plane of ``pixels`` with OC_BN block ``oc_bn``."""
    vectors = nchwc.REGISTERS.vectors(oc_bn)
    return min(nchwc.issue_slots(pixels, r, vectors)
               for r in range(1, min(pixels, nchwc.REG_N_BOUND) + 1)
               if (widths is None or r in widths)
               and nchwc.REGISTERS.tile_unfit(r, oc_bn) is None)


def _grid_tail_is_costly(pixels: int) -> bool:
    """Whether REG_N's best width takes PLANE_GAIN times the fewest issue slots of any
    fitting width on a plane of ``pixels``, for some OC_BN block (the rule, restated)."""
    return any(_fewest_slots(pixels, o, nchwc.REG_N) >= nchwc.PLANE_GAIN * _fewest_slots(pixels, o)
               for o in nchwc.OC_BN)


# A 1 x W row the host's REG_N tiles badly (9 on zmm; which W depends on the register file)
_COSTLY_ROW = next(w for w in range(9, 200) if _grid_tail_is_costly(w))


@pytest.mark.parametrize(("ih", "iw"), [(7, 7), (1, _COSTLY_ROW)])
def test_a_plane_the_grid_tiles_with_a_costly_tail_sweeps_a_width_that_fits_it(ih, iw):
    """On a plane REG_N's widths leave a costly tail (49 pixels on AVX2: 6 x 16 leaves a
    1-pixel tail), the sweep grid and the tuner add a reg_n within PLANE_GAIN of the
    fewest issue slots for each OC_BN block, and it computes correctly; where REG_N
    already tiles the plane (49 pixels on zmm: 7, 14, 28) nothing is added; a layer tiled
    along rows (3x3, stride 1) keeps REG_N."""
    p = ConvProblem.make(mb=1, ic=32, oc=32, ih=ih, iw=iw, kh=1, kw=1)
    pixels = p.oh * p.ow
    if not _grid_tail_is_costly(pixels):
        assert not nchwc.plane_reg_ns(p) and "reg_n" not in nchwc.layer_domains(p)
        return
    domain = nchwc.layer_domains(p)["reg_n"]
    assert set(nchwc.REG_N) < set(domain)
    for oc_bn in nchwc.OC_BN:
        fewest, swept = _fewest_slots(pixels, oc_bn), _fewest_slots(pixels, oc_bn, domain)
        assert swept < nchwc.PLANE_GAIN * fewest, (oc_bn, swept, fewest)
    assert {c["reg_n"] for c in nchwc.tuning_space(p)} >= set(nchwc.plane_reg_ns(p))
    added = nchwc.plane_reg_ns(p)[0]
    report, _ = _run(p, ic_bn=8, oc_bn=nchwc.OC_BN[0], reg_n=added)
    assert report.passed, report.reason
    rows = ConvProblem.make(mb=1, ic=32, oc=32, ih=7, iw=7, kh=3, kw=3, ph=1, pw=1)
    assert "reg_n" not in nchwc.layer_domains(rows) and not nchwc.plane_reg_ns(rows)


def test_an_output_of_three_registers_is_one_block_in_the_sweep_grid():
    """OC = 3 registers (24 on AVX2, 48 on zmm, 12 on NEON), no multiple of OC_BN's widest
    block: the grid also sweeps oc_bn = OC, whose fitting tiles compute correctly; a layer
    whose channels OC_BN divides keeps OC_BN."""
    oc = 3 * nchwc.LANES
    p = ConvProblem.make(mb=1, ic=16, oc=oc, ih=6, iw=6, kh=1, kw=1)
    wide = p.replace(oc=max(nchwc.OC_BN) * 2)

    def variants(problem):
        return list(registry.variants(problem, ("nchwc",)))

    assert {v.param_dict["oc_bn"] for v, _ in variants(p)} == {*nchwc.OC_BN, oc}
    assert {v.param_dict["oc_bn"] for v, _ in variants(wide)} == set(nchwc.OC_BN)
    runnable = [v for v, skip in variants(p) if skip is None and v.param_dict["oc_bn"] == oc]
    assert runnable
    x, w = make_inputs(p, seed=2)
    verdict, _ = verify(p, runnable[0], Reference(p, x, w), x, w)
    assert verdict.status == "ok", verdict.reason


def test_a_padded_layer_copies_its_input_inside_the_border_on_any_thread_count():
    """The row kernel's zero-bordered copy where no tile lies inside the input (a 7-wide
    row in 4-wide tiles, pw 2): each call writes all of the input's rows inside the border
    (shared among the threads) and nothing else; an input of another shape is refused (the
    copy reads it through flat offsets)."""
    p = ConvProblem.make(mb=2, ic=20, oc=8, ih=9, iw=7, kh=3, kw=3, ph=1, pw=2)
    kernel = nchwc.BlockedNCHWc(p, make_inputs(p, 2)[1], 8, 8, 4, False)
    assert kernel.xp is not None and kernel.xp.shape[3] > p.iw + 2 * p.pw  # reg_n's reach
    assert kernel.border.t_lo == kernel.border.t_hi and kernel.border.full_rows.all()
    y = layouts.empty(p.output_shape, kernel.out_layout)
    for threads, seed in ((1, 3), (2, 4)):
        xb = np.ascontiguousarray(layouts.to_layout(make_inputs(p, seed)[0], kernel.in_layout))
        expected = np.zeros_like(kernel.xp)
        expected[:, :, p.ph:p.ph + p.ih, p.pw:p.pw + p.iw] = xb
        with numba_threads(threads):
            kernel.run(xb, y)
        np.testing.assert_array_equal(kernel.xp, expected)
    with pytest.raises(ValueError, match="shape"):
        kernel.run(xb[:, :, 1:], y)


@pytest.mark.parametrize("shape, ic_bn", [
    (dict(mb=2, ic=16, ih=12, iw=30, kh=3, kw=3, ph=1, pw=1), 8),
    (dict(ic=3, ih=21, iw=40, kh=3, kw=3, sh=2, sw=2, ph=1, pw=1), 3),     # a stem's shape
    (dict(ic=8, ih=14, iw=33, kh=5, kw=3, ph=2, pw=1, dh=1, dw=1), 8)],
    ids=["3x3", "stride2", "dilated"])
def test_inner_tiles_read_the_input_in_place_and_the_copy_holds_only_the_border_strips(
        shape, ic_bn):
    """A padded layer's tiles whose taps lie inside the input read it in place; the copy
    holds only what the border tiles read (BorderPlan).  The buffer starts NaN inside its
    zero border, so a tile reading an uncopied spot shows in the output; after the call the
    rows the top and bottom rows read are copied whole, the others only at their ends."""
    p = ConvProblem.make(oc=16, **shape)
    b = nchwc.BorderPlan.of(p, 4)
    assert 0 < b.oh_lo < b.oh_hi < p.oh and 0 < b.t_lo < b.t_hi and b.col_l < b.col_r
    inside = (slice(None), slice(None), slice(p.ph, p.ph + p.ih), slice(p.pw, p.pw + p.iw))
    for threads, seed in ((1, 3), (2, 4)):
        x, w = make_inputs(p, seed)
        with numba_threads(threads):
            kernel = nchwc.BlockedNCHWc(p, w, ic_bn, 16, 4, False)
            kernel.xp[inside] = np.nan
            xb = np.ascontiguousarray(layouts.to_layout(x, kernel.in_layout))
            y = layouts.empty(p.output_shape, kernel.out_layout)
            kernel.run(xb, y)
        out = np.ascontiguousarray(layouts.from_layout(y, kernel.out_layout, p.oc))
        assert Reference(p, x, w).compare(out).passed
        copied = kernel.xp[inside]
        full = b.full_rows.astype(bool)
        np.testing.assert_array_equal(copied[:, :, full], xb[:, :, full])
        ends = np.r_[0:b.col_l, b.col_r:p.iw]
        rest, given = copied[:, :, ~full], xb[:, :, ~full]
        np.testing.assert_array_equal(rest[:, :, :, ends], given[:, :, :, ends])
        assert np.isnan(rest[:, :, :, b.col_l:b.col_r]).all()   # never copied


@pytest.mark.parametrize("shape", [dict(kh=1, kw=1), dict(kh=3, kw=3, ph=1, pw=1)],
                         ids=["plane", "rows"])
def test_built_on_one_thread_it_launches_the_serial_build(shape):
    """One thread pays no parallel launch (_numba_support.launched_build): built there,
    the plane and the row kernel are their serial builds and write what the parallel
    builds do."""
    p = ConvProblem.make(mb=2, ic=16, oc=32, ih=9, iw=7, **shape)
    x, w = make_inputs(p, 1)
    out = {}
    for threads in (1, 2):
        with numba_threads(threads):
            kernel = nchwc.BlockedNCHWc(p, w, 8, 16, 4, False)
            assert kernel.kernel.targetoptions.get("parallel", False) == (threads > 1)
            y = layouts.empty(p.output_shape, kernel.out_layout)
            kernel.run(np.ascontiguousarray(layouts.to_layout(x, kernel.in_layout)), y)
            out[threads] = y
    np.testing.assert_array_equal(out[1], out[2])
