"""Indirect convolution: odd shapes vs the reference, the buffer's contents, broken offsets."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from convbench.harness.inputs import make_inputs
from convbench.kernels import layouts
from convbench.kernels.asm import dispatcher_asm, fp_profile
from convbench.kernels.gemm import DEFAULT_MR, Blocking
from convbench.kernels.indirect import _PAD, IndirectNHWC, input_row_offsets
from convbench.spec.problem import ConvProblem
from tests.kernels.gemm_family_support import check_variant, compare_output, conv_problems


@settings(max_examples=20, deadline=None)
@given(problem=conv_problems())
def test_matches_reference_on_odd_shapes(problem):
    assert check_variant(problem, "indirect", "nhwc") == "ok"


def test_grouped_small_blocks_and_other_tile():
    grouped = ConvProblem.make(g=3, mb=2, ic=9, oc=12, ih=7, kh=3, ph=1, sh=2, dh=1)
    assert check_variant(grouped, "indirect", "nhwc") == "ok"
    wide = ConvProblem.make(ic=21, oc=70, ih=9, iw=6, kh=3, kw=2, ph=1, pw=1)
    assert check_variant(wide, "indirect", "nhwc",
                         {"MR": 4, "NR": 64, "MC": 8, "KC": 20}) == "ok"


def test_buffer_points_padding_taps_at_the_zero_vector():
    p = ConvProblem.make(ic=2, oc=1, ih=3, kh=3, ph=1)
    offs = input_row_offsets(p, rows=16)
    assert offs.shape == (16, 9)
    # pixel (0, 0): taps in row -1 and column -1 are padding, the centre tap is row (0, 0)
    assert list(offs[0]) == [_PAD, _PAD, _PAD, _PAD, 0, 2, _PAD, 6, 8]
    assert (offs[9:] == _PAD).all()           # rows past N*OH*OW fill the last MR panel


def _run(prepared, p, x_nhwc):
    y = layouts.empty(p.output_shape, "nhwc")
    prepared.run(x_nhwc, y)
    return layouts.from_layout(y, "nhwc", p.oc)


def test_prepare_reports_buffer_and_rebinds_only_when_input_moves():
    p = ConvProblem.make(ic=5, oc=7, ih=6, kh=3, ph=1)
    x, w = make_inputs(p)
    prepared = IndirectNHWC(p, w, Blocking())
    xl = layouts.to_layout(x, "nhwc")
    for _ in range(2):
        assert compare_output(p, _run(prepared, p, xl)).passed
    info = prepared.info()
    assert info["rebinds"] == 1
    rows = -(-36 // DEFAULT_MR) * DEFAULT_MR              # 36 pixels -> whole MR panels
    assert info["indirection_entries"] == rows * 9
    assert info["zero_vector_taps"] == 9 * 36 - 16 * 16   # valid taps: (5+6+5) per axis
    assert prepared.workspace_bytes >= info["indirection_bytes"]
    moved = xl.copy()
    assert compare_output(p, _run(prepared, p, moved)).passed
    assert prepared.info()["rebinds"] == 2


def test_a_shifted_indirection_buffer_fails_the_check():
    p = ConvProblem.make(ic=6, oc=9, ih=7, kh=3, ph=1)
    x, w = make_inputs(p)
    prepared = IndirectNHWC(p, w, Blocking())
    prepared.offsets[:, -1] = prepared.offsets[:, 0]   # last tap reads the first tap's row
    assert not compare_output(p, _run(prepared, p, layouts.to_layout(x, "nhwc"))).passed


def test_indirect_micro_kernel_has_packed_fmas():
    p = ConvProblem.make(ic=4, oc=9, ih=5, kh=3, ph=1)
    assert check_variant(p, "indirect", "nhwc") == "ok"
    profile = fp_profile(dispatcher_asm(Blocking().kernels.indirect))
    assert profile.total_packed_fma >= Blocking().MR and profile.scalar_fma == 0, profile
    assert np.isfinite(profile.widest)


def test_a_14x14_layer_runs_in_even_mc_blocks():
    """196 output rows are 33 panels of MR = 6: blocks of 11, 11, 11 at MC = 100 (were 16,
    16, 1, a thread's worth of tasks with one panel each), and the result still checks."""
    p = ConvProblem.make(ic=8, oc=40, ih=14, kh=1)
    params = {"MR": 6, "NR": 16, "MC": 100, "KC": 256}
    assert check_variant(p, "indirect", "nhwc", params) == "ok"
    _, w = make_inputs(p)
    assert IndirectNHWC(p, w, Blocking(6, 16, 100, 256)).info()["panels_per_block"] == 11
