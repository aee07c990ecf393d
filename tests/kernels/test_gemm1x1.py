"""The in-place 1x1 GEMM (kernels/gemm1x1.py): odd shapes against the reference, the
plane's tail tile and a part-filled last panel, runs of panels, threads, packed FMAs with
no spill, and the layers it refuses."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convbench import host
from convbench.harness.inputs import make_inputs
from convbench.kernels import gemm1x1
from convbench.kernels.asm import dispatcher_asm, hot_block_spills, kernel_profiles
from convbench.kernels.reference import Reference
from convbench.spec.problem import ConvProblem
from tests.conftest import numba_threads
from tests.kernels.gemm_family_support import check_variant, conv_problems

LANES = gemm1x1.LANES


def _output(p: ConvProblem, prepared: gemm1x1.Gemm1x1NCHW) -> np.ndarray:
    x, _ = make_inputs(p, seed=1)
    y = np.full(p.output_shape, np.nan, np.float32)   # every output must be written
    prepared.run(x, y)
    return y


def _prepared(p: ConvProblem, mr: int, nr: int) -> gemm1x1.Gemm1x1NCHW:
    return gemm1x1.Gemm1x1NCHW(p, make_inputs(p, seed=1)[1], mr, nr)


# Each drawn (MR, NR, tail) compiles a kernel of its own (~1.5 s): few draws, odd ones
@settings(max_examples=6, deadline=None)
@given(problem=conv_problems(pointwise=True, max_channels=40),
       mr=st.integers(1, 8), nr=st.sampled_from([LANES, LANES + 3, 2 * LANES]))
def test_matches_reference_on_odd_shapes(problem, mr, nr):
    """Channels that MR does not divide (a part-filled last panel), planes that NR does
    not divide (the tail tile), an NR that is not whole registers, two images."""
    params = {"MR": mr, "NR": nr}
    refused = gemm1x1._applies(problem, "nchw", params)
    assert refused is None or "needs" in refused
    if refused is None:
        assert check_variant(problem, "gemm1x1", "nchw", params) == "ok"


def test_tail_tile_and_short_last_panel_write_exactly_their_outputs():
    """70 channels in MR = 8 panels (the last holds 6), 7 x 9 = 63 pixels in NR = 2 x
    lanes tiles and a tail; the output starts as NaN, so a skipped or doubled store shows."""
    p = ConvProblem.make(mb=2, ic=19, oc=70, ih=7, iw=9, kh=1, kw=1)
    prepared = _prepared(p, 8, 2 * LANES)
    assert prepared.tail == 63 % (2 * LANES) and prepared.tail
    x, w = make_inputs(p, seed=1)
    assert Reference(p, x, w).compare(_output(p, prepared)).passed


def test_runs_of_panels_cover_every_panel():
    """Panels in runs of 2 (the weight budget's cut) with 5 panels: the last run is short,
    and its share past the panels is skipped, not written past the output."""
    p = ConvProblem.make(ic=24, oc=37, ih=6, iw=6, kh=1, kw=1)
    prepared = _prepared(p, 8, LANES)
    assert prepared.wp.shape[0] == 5
    whole = _output(p, prepared)
    prepared.run_len = 2
    np.testing.assert_array_equal(_output(p, prepared), whole)
    assert gemm1x1.ocb_chunk(prepared.wp, budget=2 * prepared.wp[0].nbytes) == 2
    assert gemm1x1.ocb_chunk(prepared.wp, budget=1) == 1
    assert gemm1x1.ocb_chunk(prepared.wp, budget=1 << 30) == 5


def test_two_threads_write_what_one_does():
    """Every tile sums its channels in the same order whoever runs it: bit-identical."""
    p = ConvProblem.make(ic=40, oc=24, ih=20, iw=20, kh=1, kw=1)
    prepared = _prepared(p, 6, 3 * LANES)
    with numba_threads(1):
        one = _output(p, prepared)
    with numba_threads(2):
        two = _output(p, prepared)
    np.testing.assert_array_equal(one, two)


def test_built_on_one_thread_it_launches_the_serial_build():
    """One thread pays no parallel launch (_numba_support.launched_build): the kernel built
    there is the serial build, fused epilogues too, and writes what the parallel one does."""
    p = ConvProblem.make(ic=40, oc=24, ih=20, iw=20, kh=1, kw=1)
    out = {}
    for threads in (1, 2):
        with numba_threads(threads):
            prepared = _prepared(p, 6, 3 * LANES)
            assert prepared.kernel.targetoptions.get("parallel", False) == (threads > 1)
            out[threads] = _output(p, prepared)
            prepared.fuse_activation("relu")
            assert prepared.kernel.targetoptions.get("parallel", False) == (threads > 1)
            assert prepared.hot_kernels() == (prepared.kernel,)
    np.testing.assert_array_equal(out[1], out[2])


def test_weights_packed_as_panels_of_mr_channels():
    w = np.arange(5 * 3, dtype=np.float32).reshape(5, 3, 1, 1)
    wp = gemm1x1.pack_weights(w, 2)
    assert wp.shape == (3, 3, 2)
    assert list(wp[0, 1]) == [w[0, 1, 0, 0], w[1, 1, 0, 0]]
    assert list(wp[2, 2]) == [w[4, 2, 0, 0], 0.0]   # the last panel zero padded


@pytest.mark.parametrize("mr, nr", [(6, 3 * LANES), (8, 2 * LANES)])
def test_kernel_has_packed_fmas_and_no_spill(mr, nr):
    """One packed FMA per accumulator vector per input channel, none scalar, and the
    tile in registers (no stack access in the hot block)."""
    if host.register_file().tile_unfit(mr, nr):
        pytest.skip(host.register_file().tile_unfit(mr, nr))
    p = ConvProblem.make(ic=32, oc=24, ih=14, iw=14, kh=1, kw=1)
    prepared = _prepared(p, mr, nr)
    x, w = make_inputs(p, seed=1)
    assert Reference(p, x, w).compare(_output(p, prepared)).passed
    (profile,) = kernel_profiles(prepared)
    assert profile.profile.vectorised and profile.profile.scalar_fma == 0, profile
    if host.detect_cpu().arch == "x86_64":
        fmas, stack = hot_block_spills(dispatcher_asm(prepared.kernel))
        assert fmas >= mr * gemm1x1.REGISTERS.vectors(nr) and stack == 0, (fmas, stack)


@pytest.mark.parametrize("shape", [
    "mb1ic16ih8oc16oh8kh3ph1",           # 3x3
    "mb1ic16ih8oc16oh4kh1sh2",           # strided
    "mb1ic16ih8oc16oh10kh1ph1",          # padded
    "g2mb1ic16ih8oc16oh8kh1",            # grouped
])
def test_refuses_what_is_not_one_gemm_on_the_input(shape):
    from convbench.spec.descriptor import parse_descriptor

    p = parse_descriptor(shape)
    assert "1x1, stride 1, unpadded, groups 1" in gemm1x1._applies(p, "nchw", {})
    assert gemm1x1.tuning_space(p) == [{"MR": gemm1x1.DEFAULT_MR, "NR": gemm1x1.DEFAULT_NR}]


def test_a_tile_over_the_register_file_is_skipped_with_the_reason():
    p = ConvProblem.make(ic=16, oc=16, ih=8, iw=8, kh=1, kw=1)
    assert "accumulators" in gemm1x1._applies(p, "nchw", {"MR": 32, "NR": 8 * LANES})


def test_tuning_space_fits_and_puts_unpadded_panels_first():
    """MobileNet V2's block_1_project (24 channels): every candidate fits and has enough
    accumulators to hide the FMA latency; those whose MR divides 24 come first."""
    p = ConvProblem.make(ic=96, oc=24, ih=56, iw=56, kh=1, kw=1)
    space = gemm1x1.tuning_space(p)
    regs = gemm1x1.REGISTERS
    assert space and all(regs.tile_unfit(c["MR"], c["NR"]) is None for c in space)
    assert all(regs.tile_accumulators(c["MR"], c["NR"]) >= gemm1x1.MIN_CHAINS for c in space)
    ratios = [gemm1x1.work_ratio(p, c) for c in space]
    assert ratios == sorted(ratios) and ratios[0] == 1.0 and ratios[-1] > 1.0
    assert {"MR": 8, "NR": 3 * LANES} in space or regs.tile_unfit(8, 3 * LANES)
