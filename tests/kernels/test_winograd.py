"""Winograd F(2x2,3x3) and F(4x4,3x3): the transforms' defining identity, the kernel against
the reference with both GEMM backends (odd sizes that are not multiples of the tile, block
or micro-tile), a broken transform or weight panel being caught, applicability and
vectorisation."""

from __future__ import annotations

import dataclasses
import re

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convbench.harness.inputs import make_inputs
from convbench.harness.verify import verify
from convbench.kernels import registry, winograd
from convbench.kernels.asm import dispatcher_asm, fp_profile
from convbench.kernels.layouts import from_layout, to_layout
from convbench.kernels.reference import Reference
from convbench.kernels.register_tile import REGISTERS
from convbench.kernels.winograd_transforms import (
    TRANSFORMS,
    Transform,
    correlate_1d,
    correlate_2d,
)
from convbench.spec.problem import ConvProblem
from tests.conftest import numba_threads
from tests.strategies import dense_3x3_problems

M_VALUES = sorted(TRANSFORMS)


def _identity_holds(t: Transform, rng: np.random.Generator, trials: int = 20) -> bool:
    """Both the 1-D and the nested 2-D algorithm equal direct correlation on random data."""
    for _ in range(trials):
        d, g = rng.standard_normal(t.alpha), rng.standard_normal(t.r)
        if not np.allclose(t.filter_1d(d, g), correlate_1d(d, g), rtol=1e-12, atol=1e-12):
            return False
        d2, g2 = rng.standard_normal((t.alpha, t.alpha)), rng.standard_normal((t.r, t.r))
        if not np.allclose(t.filter_2d(d2, g2), correlate_2d(d2, g2), rtol=1e-12, atol=1e-12):
            return False
    return True


@pytest.mark.parametrize("m", M_VALUES)
def test_transforms_compute_correlation(m):
    t = TRANSFORMS[m]
    assert t.alpha == m + 2
    assert _identity_holds(t, np.random.default_rng(m))


def _permute_at_rows(t: Transform) -> Transform:
    """Seed 004's slip: the labels of the products permuted (two A^T rows swapped)."""
    return dataclasses.replace(t, at=t.at[[1, 0, *range(2, t.m)]])


def _perturb_bt(t: Transform) -> Transform:
    """A typo in one coefficient of B^T."""
    bt = t.bt.copy()
    bt[1, 1] += 1.0
    return dataclasses.replace(t, bt=bt)


def _perturb_g(t: Transform) -> Transform:
    g = t.g.copy()
    g[1, 2] *= -1.0
    return dataclasses.replace(t, g=g)


BROKEN = [_permute_at_rows, _perturb_bt, _perturb_g]


@pytest.mark.parametrize("m", M_VALUES)
@pytest.mark.parametrize("breakage", BROKEN)
def test_broken_transform_fails_identity_and_check(m, breakage):
    """The identity test and the reference check (with Winograd's growth) both reject it."""
    broken = breakage(TRANSFORMS[m])
    assert not _identity_holds(broken, np.random.default_rng(0), trials=3)
    p = ConvProblem.make(ic=5, ih=11, iw=9, oc=6, kh=3, kw=3, ph=1, pw=1)
    x, w = make_inputs(p, seed=3)
    kernel = winograd.WinogradNHWC(p, w, broken, tile_block=4)
    y = np.empty((p.mb, p.oh, p.ow, p.oc), np.float32)
    kernel.run(to_layout(x, "nhwc"), y)
    report = Reference(p, x, w).compare(from_layout(y, "nhwc", p.oc), winograd.ERROR_GROWTH[m])
    assert not report.passed


# (gemm, schedule): every pairing the kernel accepts
PIPELINES = [("blas", winograd.STAGED), ("own", winograd.STAGED), ("own", winograd.FUSED)]


def _run(p: ConvProblem, m: int, tile_block: int, seed: int = 1, gemm: str = "blas",
         runs: int = 1, mr: int | None = None, schedule: str = winograd.STAGED):
    x, w = make_inputs(p, seed)
    kernel = winograd.WinogradNHWC(p, w, TRANSFORMS[m], tile_block, gemm, mr, schedule)
    y = np.full((p.mb, p.oh, p.ow, p.oc), np.nan, np.float32)
    for _ in range(runs):
        kernel.run(to_layout(x, "nhwc"), y)
    return Reference(p, x, w).compare(from_layout(y, "nhwc", p.oc), winograd.ERROR_GROWTH[m])


# 15 examples; the edge shapes below reach every tile position deliberately.  MR = 4
# throughout: the automatic choice follows the drawn block and shape, and each MR it drew
# compiled a fused pipeline of its own (~8 s each with an empty numba cache, Zen 3 host;
# 0 to 4 of them a run, by chance).  Every MR is tested in
# test_own_gemm_spans_several_nr_panels_and_odd_channels.
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=dense_3x3_problems(), m=st.sampled_from(M_VALUES),
       tile_block=st.sampled_from([1, 3, 7, 64]), pipeline=st.sampled_from(PIPELINES))
def test_matches_reference_with_any_tile_block(problem, m, tile_block, pipeline):
    """Blocks of 1, 3 or 7 tiles split images and tile rows at every possible place (and
    leave the own GEMM's last MR panel part-filled, with stale rows from the last block;
    the fused schedule's blocks land on both threads' buffers in turn)."""
    gemm, schedule = pipeline
    report = _run(problem, m, tile_block, gemm=gemm, runs=2, schedule=schedule,
                  mr=4 if gemm == "own" else None)
    assert report.passed, (f"F({m}x{m}) tile_block={tile_block} {pipeline} on {problem}: "
                           f"{report.reason}")


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("m", M_VALUES)
@pytest.mark.parametrize("shape", [
    dict(mb=2, ic=7, oc=9, ih=13, iw=5, kh=3, kw=3, ph=1, pw=1),   # odd, non-square
    dict(mb=1, ic=3, oc=4, ih=9, iw=10, kh=3, kw=3, ph=0, pw=2),   # unequal padding
    dict(mb=1, ic=2, oc=3, ih=1, iw=1, kh=3, kw=3, ph=1, pw=1),    # one pixel
])
def test_edge_shapes(m, shape, pipeline):
    """Every tile of these reaches into the zero border somewhere: the staged schedule's
    padded copy and the fused schedule's edge tiles."""
    gemm, schedule = pipeline
    report = _run(ConvProblem.make(**shape), m, tile_block=2, gemm=gemm, schedule=schedule)
    assert report.passed, report.reason


# Every MR with one transform at least, the automatic choice and MR = 4 with both: the
# part-filled panels depend on MR and the block, not on F(m), and each (MR, F(m)) pair
# compiles a fused pipeline of its own (6.6-8.9 s each with an empty numba cache, Zen 3
# host); all eight pairs took 42 s of a cold suite's compiling.
@pytest.mark.parametrize("mr, m", [(None, 2), (None, 4), (4, 2), (4, 4), (5, 2), (6, 4),
                                   (8, 4)])
def test_own_gemm_spans_several_nr_panels_and_odd_channels(mr, m):
    """OC = 130 needs three NR = 64 panels (the last one mostly padding), IC = 67 an odd
    K; 5x5 tiles (F(4x4); 10x9 with F(2x2)) in blocks of 7 leave part-filled MR panels
    for every MR."""
    p = ConvProblem.make(mb=1, ic=67, oc=130, ih=19, iw=18, kh=3, kw=3, ph=1, pw=1)
    for schedule in winograd.SCHEDULES:
        report = _run(p, m, tile_block=7, gemm="own", runs=2, mr=mr, schedule=schedule)
        assert report.passed, (m, schedule, report.reason)


@pytest.mark.parametrize("tiles, tile_block, mr", [
    (4, 4, 4),        # ResNet-50 7x7 layers: one panel of 4, none wasted
    (16, 16, 4),      # 14x14 layers: 4 panels of 4 (5 would pad to 20 rows)
    (49, 49, 5),      # 28x28: 50 rows with 5; 4 would pad to 52 and run slower per row
    (196, 196, 6),    # 56x56 in one block: 198 rows with 6, 200 with 5
    (196, 64, 5),     # blocks of 64, 64, 64, 4: 65 * 3 + 5 = 200 rows
])
def test_micro_rows_pads_least(tiles, tile_block, mr):
    assert winograd.micro_rows(tiles, tile_block) == mr


def test_mr_param_reaches_the_kernel_and_only_tunes_own():
    p = ConvProblem.make(mb=1, ic=8, oc=8, ih=7, iw=7, kh=3, kw=3, ph=1, pw=1)
    alg = registry.get("winograd4x4")
    assert alg.applies(p, "nhwc", {"gemm": "blas", "MR": 6}) is not None
    assert alg.applies(p, "nhwc", {"gemm": "own", "MR": 6}) is None
    _, w = make_inputs(p)
    built = alg.build(p, w, "nhwc", {"tile_block": 64, "gemm": "own", "MR": 6})
    assert built.blocking.MR == 6
    auto = alg.build(p, w, "nhwc", {"tile_block": 64, "gemm": "own", "MR": "auto"})
    assert auto.blocking.MR == winograd.micro_rows(4, 4) == 4


def test_own_gemm_misses_a_wrong_weight_panel():
    """The check can fail: a prepacked U with one panel zeroed is caught."""
    p = ConvProblem.make(mb=1, ic=8, oc=70, ih=9, iw=9, kh=3, kw=3, ph=1, pw=1)
    x, w = make_inputs(p, 1)
    kernel = winograd.WinogradNHWC(p, w, TRANSFORMS[4], 64, "own")
    kernel.u[3, 1] = 0.0
    y = np.empty((p.mb, p.oh, p.ow, p.oc), np.float32)
    kernel.run(to_layout(x, "nhwc"), y)
    report = Reference(p, x, w).compare(from_layout(y, "nhwc", p.oc), winograd.ERROR_GROWTH[4])
    assert not report.passed


@pytest.mark.parametrize("m", M_VALUES)
def test_registered_variants_pass_verify(m):
    p = ConvProblem.make(mb=1, ic=16, oc=12, ih=15, iw=15, kh=3, kw=3, ph=1, pw=1)
    x, w = make_inputs(p)
    ref = Reference(p, x, w)
    name = f"winograd{m}x{m}"
    variants = [v for v, skip in registry.variants(p, (name,)) if skip is None]
    assert len(variants) == len(winograd.TILE_BLOCKS) * len(PIPELINES)
    for variant in variants:
        verdict, execution = verify(p, variant, ref, x, w)
        assert verdict.status == "ok", verdict.reason
        # U: alpha^2 x IC x OC floats; the own GEMM's panels pad OC = 12 up to NR columns
        oc_stored = 12 if variant.param_dict["gemm"] == "blas" else execution.prepared.blocking.NR
        assert execution.prepared.packed_weight_bytes == (m + 2) ** 2 * 16 * oc_stored * 4


@pytest.mark.parametrize("fields, reason", [
    (dict(kh=5, kw=5, ph=2, pw=2), "3x3"),
    (dict(kh=3, kw=3, sh=2, sw=2, ph=1, pw=1), "stride"),
    (dict(kh=3, kw=3, dh=1, dw=1, ph=2, pw=2), "undilated"),
    (dict(kh=3, kw=3, g=2, ph=1, pw=1), "groups"),
])
def test_applies_says_why_not(fields, reason):
    p = ConvProblem.make(mb=1, ic=4, oc=4, ih=8, iw=8, **fields)
    for m in M_VALUES:
        skip = registry.get(f"winograd{m}x{m}").applies(p, "nhwc", {})
        assert skip is not None and reason in skip
    ok = ConvProblem.make(mb=1, ic=4, oc=4, ih=8, iw=8, kh=3, kw=3, ph=1, pw=1)
    assert registry.get("winograd4x4").applies(ok, "nhwc", {}) is None


# a floating-point multiply, x86 (vmulps, mulss, ...) or AArch64 (fmul); not index arithmetic
FP_MULTIPLY = re.compile(r"\b(v?mul[ps][sd]|fmul)\b", re.IGNORECASE)


@pytest.mark.parametrize("m", M_VALUES)
def test_transforms_run_on_whole_registers_with_constant_entries(m):
    """The tile transforms are vector code of the register's width, their matrices folded
    in: F(4x4)'s entries 2, 4, 5, 8 are FMAs; F(2x2)'s are all 0 and +-1, so its transforms
    are adds and subtractions only (a multiply would mean the entries were not constants)."""
    p = ConvProblem.make(ic=16, oc=16, ih=10, iw=10, kh=3, kw=3, ph=1, pw=1)
    x, w = make_inputs(p, 1)
    kernel = winograd.WinogradNHWC(p, w, TRANSFORMS[m], 64)
    kernel.run(to_layout(x, "nhwc"), np.empty((p.mb, p.oh, p.ow, p.oc), np.float32))
    register_bits = REGISTERS.lanes * 32
    for fn in (kernel.tiles.input_transform, kernel.tiles.output_transform):
        profile = fp_profile(dispatcher_asm(fn))
        assert profile.packed_other.get(register_bits, 0) > 0, (fn, profile)
        if m == 4:
            assert profile.packed_fma.get(register_bits, 0) > 0, (fn, profile)
        else:
            assert profile.total_packed_fma == profile.scalar_fma == 0, (fn, profile)
            assert not FP_MULTIPLY.search(dispatcher_asm(fn)), fn


def test_own_gemm_driver_has_packed_fmas():
    """BRIEF.md: numba can fall back to scalar code silently; the batched driver of the
    element-wise stage must keep the micro-kernel's packed FMAs (MR * NR / 16 on zmm)."""
    p = ConvProblem.make(ic=16, oc=16, ih=10, iw=10, kh=3, kw=3, ph=1, pw=1)
    x, w = make_inputs(p, 1)
    kernel = winograd.WinogradNHWC(p, w, TRANSFORMS[4], 64, "own")
    kernel.run(to_layout(x, "nhwc"), np.empty((p.mb, p.oh, p.ow, p.oc), np.float32))
    (gemm,) = [k for k in kernel.hot_kernels() if k not in (kernel.tiles.input_transform,
                                                             kernel.tiles.output_transform)]
    profile = fp_profile(dispatcher_asm(gemm))
    assert profile.vectorised and profile.scalar_fma == 0, profile
    assert profile.total_packed_fma >= kernel.blocking.MR, profile


def test_growth_is_declared_and_ordered():
    """F(4x4) is declared less exact than F(2x2), as its larger transform entries imply."""
    g2 = registry.get("winograd2x2").error_growth
    g4 = registry.get("winograd4x4").error_growth
    assert 1.0 <= g2 < g4


def test_fused_schedule_runs_blas_never():
    p = ConvProblem.make(mb=1, ic=8, oc=8, ih=7, iw=7, kh=3, kw=3, ph=1, pw=1)
    alg = registry.get("winograd4x4")
    skip = alg.applies(p, "nhwc", {"gemm": "blas", "schedule": winograd.FUSED})
    assert skip is not None and "gemm=own" in skip
    with pytest.raises(ValueError, match="schedule"):
        winograd.WinogradNHWC(p, make_inputs(p)[1], TRANSFORMS[4], 4, "blas", None,
                              winograd.FUSED)


def _outputs_under(kernel, p: ConvProblem, x: np.ndarray, thread_counts) -> list[np.ndarray]:
    """The kernel's NHWC outputs of x, one run under each thread count."""
    outs = []
    for threads in thread_counts:
        with numba_threads(threads):
            y = np.full((p.mb, p.oh, p.ow, p.oc), np.nan, np.float32)
            kernel.run(to_layout(x, "nhwc"), y)
            outs.append(y)
    return outs


def test_fused_result_does_not_depend_on_the_thread_count():
    """Each tile's transforms and products are the same arithmetic whichever thread's
    buffers hold its block, so 1 and 2 threads give identical bits (and pass the check)."""
    p = ConvProblem.make(mb=2, ic=19, oc=21, ih=17, iw=15, kh=3, kw=3, ph=1, pw=1)
    x, w = make_inputs(p, 3)
    kernel = winograd.WinogradNHWC(p, w, TRANSFORMS[4], 3, "own", None, winograd.FUSED)
    assert kernel.v.shape[0] == min(numba.config.NUMBA_NUM_THREADS, -(-kernel.n_tiles // 3))
    outs = _outputs_under(kernel, p, x, (1, numba.config.NUMBA_NUM_THREADS))
    np.testing.assert_array_equal(outs[0], outs[1])
    report = Reference(p, x, w).compare(from_layout(outs[1], "nhwc", p.oc),
                                        winograd.ERROR_GROWTH[4])
    assert report.passed, report.reason


@pytest.mark.parametrize("tiles, tile_block, threads, block", [
    (16, 16, 2, 8),     # a 14x14 layer: one block would leave the second thread idle
    (16, 16, 4, 4),     # a block of FUSED_MIN_TILES per thread
    (16, 16, 16, 4),    # not cut below FUSED_MIN_TILES: 4 threads of 16 get a block
    (16, 3, 16, 3),     # a tile_block below it is kept as asked
    (49, 16, 2, 13),    # 13, 13, 13, 10 rather than 16, 16, 16, 1 (32 tiles vs 17)
    (49, 16, 1, 13),    # the same even cut on one thread
    (196, 64, 2, 49),   # 4 blocks, 2 per thread
    (196, 16, 2, 14),   # 14 blocks of 14, 7 per thread
    (4, 1024, 2, 4),    # one block holds them all
])
def test_fused_blocks_are_even_and_one_per_thread_at_least(tiles, tile_block, threads, block):
    assert winograd.fused_block(tiles, tile_block, threads) == block
    assert block <= tile_block


def test_a_fused_layer_with_one_block_of_tiles_is_split_over_the_threads():
    """16 tiles at tile_block=16 built under 2 threads: two blocks of 8, one per thread
    (with one block, one thread did all the work), and the result passes the check."""
    p = ConvProblem.make(mb=1, ic=16, oc=16, ih=14, iw=14, kh=3, kw=3, ph=1, pw=1)
    x, w = make_inputs(p, 5)
    with numba_threads(2):
        kernel = winograd.WinogradNHWC(p, w, TRANSFORMS[4], 16, "own", None, winograd.FUSED)
        y = np.full((p.mb, p.oh, p.ow, p.oc), np.nan, np.float32)
        kernel.run(to_layout(x, "nhwc"), y)
    assert kernel.n_tiles == 16
    assert kernel.info()["tile_block"] == 8 and kernel.v.shape[0] == 2
    report = Reference(p, x, w).compare(from_layout(y, "nhwc", p.oc), winograd.ERROR_GROWTH[4])
    assert report.passed, report.reason


MB = 1 << 20


@pytest.mark.parametrize("tiles, tile_block, threads, panels, u_mb, block, parts", [
    (4, 1024, 2, 8, 37.7, 4, 2),    # res5b_branch2b F(4x4): the cut left a thread idle
    (16, 16, 2, 8, 37.7, 16, 2),    # VGG-16 conv5_1: U from memory at every call
    (16, 16, 2, 4, 9.4, 8, 1),      # res4b_branch2b: U stays in the 32 MiB cache, cut
    (16, 16, 2, 8, 16.8, 8, 1),     # res5b_branch2b F(2x2): likewise
    (49, 64, 2, 2, 2.4, 25, 1),     # res3b_branch2b at tile_block 64
    (16, 16, 16, 8, 37.7, 16, 8),   # no more parts than panels (the cut: 4 blocks of 4)
    (4, 1024, 2, 1, 37.7, 4, 1),    # one panel: nothing to share
    (16, 16, 1, 8, 37.7, 16, 1),    # one thread
])
def test_fused_shares_output_channels_where_reading_u_bounds_it(tiles, tile_block, threads,
                                                                panels, u_mb, block, parts):
    assert winograd.fused_split(tiles, tile_block, threads, panels, int(u_mb * 1e6),
                                32 * MB) == (block, parts)


def test_fused_parts_compute_the_reference_on_any_thread_count():
    """4 tiles and 70 output channels on 2 threads: 2 parts of the NR panels, the second
    part's 6 channels shorter than a run of the output transform; the result passes the
    check and is the same bits on 1 thread (the parts then run one after the other)."""
    p = ConvProblem.make(mb=1, ic=19, oc=70, ih=7, iw=7, kh=3, kw=3, ph=1, pw=1)
    x, w = make_inputs(p, 4)
    with numba_threads(2):
        kernel = winograd.WinogradNHWC(p, w, TRANSFORMS[4], 16, "own", 4, winograd.FUSED)
    assert (kernel.n_tiles, kernel.tile_block, kernel.info()["oc_parts"]) == (4, 4, 2)
    assert kernel.blocking.NR == 64 and kernel.v.shape[0] == 2
    outs = _outputs_under(kernel, p, x, (2, 1))
    np.testing.assert_array_equal(outs[0], outs[1])
    report = Reference(p, x, w).compare(from_layout(outs[0], "nhwc", p.oc),
                                        winograd.ERROR_GROWTH[4])
    assert report.passed, report.reason


def test_fused_pipeline_has_packed_fmas():
    """One jitted function does all three stages: it must keep the staged pipeline's packed
    FMAs (the GEMM driver's and both transforms').  Its scalar FMAs are the transforms'
    one-channel paths (for fewer channels than a run), which LLVM may copy as it inlines
    them (294 against the staged steps' 72 + 54, Zen 3 host): a scalar fallback of the
    vector paths shows as missing packed FMAs, so only those are counted."""
    p = ConvProblem.make(ic=16, oc=16, ih=10, iw=10, kh=3, kw=3, ph=1, pw=1)
    x, w = make_inputs(p, 1)
    profiles = {}
    for schedule in winograd.SCHEDULES:
        # MR = 4, the pipeline the other tests compile (the automatic choice was 5 for the
        # fused schedule here: one more ~10 s compile with an empty numba cache, Zen 3)
        kernel = winograd.WinogradNHWC(p, w, TRANSFORMS[4], 8, "own", 4, schedule)
        kernel.run(to_layout(x, "nhwc"), np.empty((p.mb, p.oh, p.ow, p.oc), np.float32))
        profiles[schedule] = [fp_profile(dispatcher_asm(k)) for k in kernel.hot_kernels()]
    (fused,) = profiles[winograd.FUSED]
    into, gemm, out = profiles[winograd.STAGED]
    assert gemm.scalar_fma == 0 and gemm.total_packed_fma >= kernel.blocking.MR, gemm
    assert fused.vectorised, fused
    assert fused.total_packed_fma >= (gemm.total_packed_fma + into.total_packed_fma
                                      + out.total_packed_fma), (fused, gemm, into, out)
