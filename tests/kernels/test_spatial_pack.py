"""Spatial pack: odd shapes and tiles vs the reference, halo arithmetic, a broken halo."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from convbench.harness.inputs import make_inputs
from convbench.kernels import layouts
from convbench.kernels.asm import dispatcher_asm, fp_profile
from convbench.kernels.gemm import Blocking
from convbench.kernels.registry import get
from convbench.kernels.spatial_pack import SpatialPackNHWC, _tile_kernel, window
from convbench.spec.problem import ConvProblem
from tests.kernels.gemm_family_support import check_variant, compare_output, conv_problems


@settings(max_examples=20, deadline=None)
@given(problem=conv_problems(), tile_h=st.integers(1, 5), tile_w=st.integers(1, 11))
def test_matches_reference_on_odd_shapes_and_tiles(problem, tile_h, tile_w):
    params = {"tile_h": tile_h, "tile_w": tile_w}
    assert check_variant(problem, "spatial_pack", "nhwc", params) == "ok"


def test_window_is_tile_plus_halo_on_both_axes():
    assert window(4, 3, 1, 0) == 6            # 3x3 stride 1: halo of 2
    assert window(4, 3, 2, 0) == 9            # stride 2: (4-1)*2 + 3
    assert window(4, 3, 1, 1) == 8            # dilation 2: kernel extent 5
    assert window(1, 1, 1, 0) == 1


def test_info_reports_halo_overhead():
    p = ConvProblem.make(ic=4, oc=5, ih=8, kh=3, ph=1)
    _x, w = make_inputs(p)
    prepared = SpatialPackNHWC(p, w, 4, 4, Blocking())
    info = prepared.info()
    assert info["tiles"] == 4 and info["window_h"] == 6 and info["window_w"] == 6
    assert info["halo_overhead"] == 4 * 36 / 64 - 1
    assert prepared.workspace_bytes > 0


def test_groups_are_skipped_with_a_reason():
    p = ConvProblem.make(g=2, ic=4, oc=4, ih=5, kh=3)
    assert "groups" in get("spatial_pack").applies(p, "nhwc", {})


def test_offsets_with_a_row_pitch_missing_the_halo_fail_the_check():
    p = ConvProblem.make(ic=3, oc=6, ih=9, kh=3, ph=1)
    x, w = make_inputs(p)
    prepared = SpatialPackNHWC(p, w, 3, 3, Blocking())
    pixel = prepared.offsets // p.ic      # r * win_w + c
    r, c = pixel // prepared.win_w, pixel % prepared.win_w
    prepared.offsets = (r * (prepared.win_w - 1) + c) * p.ic   # pitch one column short
    y = layouts.empty(p.output_shape, "nhwc")
    prepared.run(layouts.to_layout(x, "nhwc"), y)
    assert not compare_output(p, layouts.from_layout(y, "nhwc", p.oc)).passed


def test_tile_kernel_has_packed_fmas():
    p = ConvProblem.make(ic=3, oc=5, ih=6, kh=3)
    assert check_variant(p, "spatial_pack", "nhwc") == "ok"
    profile = fp_profile(dispatcher_asm(_tile_kernel(Blocking().MR, Blocking().NR)))
    assert profile.total_packed_fma >= Blocking().MR and profile.scalar_fma == 0, profile
