"""The hot loops of the baseline kernels compile to packed FMAs (numba's vectorisation is
fragile: a scalar fallback is silent and 5-10x slower)."""

import numpy as np
import pytest

from convbench.harness.inputs import make_inputs
from convbench.kernels import direct, im2col
from convbench.kernels.asm import dispatcher_asm, fp_profile
from convbench.kernels.layouts import to_layout
from convbench.spec.problem import ConvProblem


@pytest.mark.parametrize("cls, layout, fn", [
    (direct.DirectNCHW, "nchw", direct._direct_nchw),
    (direct.DirectNHWC, "nhwc", direct._direct_nhwc),
])
def test_direct_kernels_have_packed_fmas(cls, layout, fn):
    p = ConvProblem.make(ic=8, ih=10, oc=16, kh=3, ph=1)
    x, w = make_inputs(p)
    prepared = cls(p, w)
    prepared.run(to_layout(x, layout), np.empty(to_layout(np.empty(p.output_shape), layout)
                                                .shape, np.float32))
    profile = fp_profile(dispatcher_asm(fn))
    assert profile.vectorised, profile


def test_fp_profile_reads_x86_and_arm_syntax():
    asm = "\n".join([
        "  vfmadd231ps %zmm1, %zmm2, %zmm3",
        "  vfmadd231ps %ymm1, %ymm2, %ymm3",
        "  vfmadd213ss %xmm1, %xmm2, %xmm3",
        "  vaddps %zmm0, %zmm1, %zmm1",
        "  vmulss %xmm0, %xmm1, %xmm1",
        "  fmla v0.4s, v1.4s, v2.4s",
        "  fmadd s0, s1, s2, s3",
    ])
    prof = fp_profile(asm)
    assert prof.packed_fma == {512: 1, 256: 1, 128: 1}
    assert prof.packed_other == {512: 1}
    assert (prof.scalar_fma, prof.scalar_other) == (2, 1)
    assert prof.widest == 512 and prof.vectorised


def test_unfold_is_compiled():
    # im2col's unfold is a copy (no FMAs); it must still compile for both layouts
    p = ConvProblem.make(ic=3, ih=6, oc=4, kh=3, ph=1)
    x, w = make_inputs(p)
    for cls, layout in ((im2col.Im2colNCHW, "nchw"), (im2col.Im2colNHWC, "nhwc")):
        prepared = cls(p, w)
        xl = to_layout(x, layout)
        y = np.empty(to_layout(np.empty(p.output_shape, np.float32), layout).shape, np.float32)
        prepared.run(xl, y)
    assert im2col._unfold_nchw.signatures and im2col._unfold_nhwc.signatures


def test_asm_of_code_compiled_here_is_read_without_compiling_again(monkeypatch):
    """Code compiled in this process is inspected as it is; only code loaded from numba's
    cache (which numba will not show) is compiled again, uncached."""
    import numba

    @numba.njit(fastmath=True)
    def dot(a):
        s = np.float32(0.0)
        for i in range(a.size):
            s += a[i] * a[i]
        return s

    dot(np.ones(64, np.float32))
    expected = fp_profile(dot.inspect_asm(dot.signatures[0]))

    def no_second_compile(*args, **kwargs):
        raise AssertionError("dispatcher_asm compiled the function again")

    monkeypatch.setattr(numba, "njit", no_second_compile)
    assert fp_profile(dispatcher_asm(dot)) == expected
