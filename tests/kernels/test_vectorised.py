"""The hot loops of the baseline kernels compile to packed FMAs (numba's vectorisation is
fragile: a scalar fallback is silent and 5-10x slower)."""

from pathlib import Path

import numpy as np
import pytest

from convbench.harness.inputs import make_inputs
from convbench.kernels import direct, im2col
from convbench.kernels.asm import (
    SCALABLE,
    KernelProfile,
    dispatcher_asm,
    fp_profile,
    profile_summary,
)
from convbench.kernels.layouts import to_layout
from convbench.spec.problem import ConvProblem

ASM = Path(__file__).parents[1] / "data" / "asm"


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


def test_fp_profile_reads_aarch64_widths_from_the_arrangement():
    asm = "\n".join([
        "\tfmla\tv30.4s, v11.4s, v12.s[0]",     # by element: still 4 lanes
        "\tfmla\tv1.2d, v2.2d, v3.2d",
        "\tfmla\tv0.2s, v1.2s, v2.2s",          # the 64-bit half-register form
        "\tfmla\ts0, s1, v2.s[1]",              # by element into a scalar: one lane
        "\tfnmadd\td0, d1, d2, d3",
        "\tfaddp\tv0.4s, v1.4s, v2.4s",
        "\tfmla\tz0.s, p0/m, z1.s, z2.s",       # SVE: the machine's width
        "\tfmad\tz0.s, p0/m, z1.s, z2.s",
        "\tldr\tq0, [x0]",                      # no FP arithmetic
        "\tfmov\ts0, #1.0",
    ])
    prof = fp_profile(asm)
    assert prof.packed_fma == {128: 2, 64: 1, SCALABLE: 2}
    assert prof.packed_other == {128: 1}
    assert (prof.scalar_fma, prof.scalar_other) == (2, 0)


def test_fp_profile_reads_numba_code_for_aarch64():
    # numba's own aarch64 output (tests/data/asm/README.md says how it was made): the
    # 4-lane NCHW[x]c tile is packed NEON, a loop-carried recurrence is scalar fmadd
    tile = fp_profile((ASM / "aarch64_nchwc_6x16.s").read_text())
    assert tile.packed_fma == {128: 24} and tile.packed_other == {}
    assert (tile.scalar_fma, tile.scalar_other) == (0, 0) and tile.widest == 128
    recurrence = fp_profile((ASM / "aarch64_scalar_recurrence.s").read_text())
    assert not recurrence.vectorised and recurrence.packed_other == {}
    assert (recurrence.scalar_fma, recurrence.scalar_other) == (3, 0)


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
    """Code compiled in this process is inspected as it is (code loaded from numba's
    cache, which numba will not show, is read from the cache: the test below)."""
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


PROBE = """
import json, sys
import numba
from convbench import host
from convbench.harness.inputs import make_inputs
from convbench.harness.verify import prepare
from convbench.kernels import asm
from convbench.kernels.base import Variant
from convbench.spec.problem import ConvProblem

p = ConvProblem.make(g=32, ic=32, oc=32, ih=10, iw=20, kh=3, kw=3, ph=1, pw=1)
x, w = make_inputs(p)
# a tile that spills on this register file: 2 x 4 pixels on 16 ymm, 2 x 8 on 32 zmm
tile = "2x4" if host.register_file().registers <= 16 else "2x8"
ex = prepare(p, Variant.of("depthwise3x3", "nhwc", {"order": "tiles", "tile": tile}), x, w)
ex.prepared.run(ex.x, ex.y)
kernel = next(k for k in ex.prepared.hot_kernels() if k.signatures)
loaded = kernel.overloads[kernel.signatures[0]].library._disable_inspection

def profile():
    text = asm.dispatcher_asm(kernel)
    asm._ASM.clear()
    return [asm.fp_profile(text).packed_fma, asm.hot_block_spills(text)]

def no_compile(*args, **kwargs):
    sys.exit("dispatcher_asm compiled the kernel again")

columns = unreadable = {}
if loaded:
    njit, numba.njit = numba.njit, no_compile
    read = profile()            # from the cache's object code
    columns = asm.static_profile(ex.prepared, {})   # what a timing worker records
    asm._ASM.clear()
    numba.njit = njit
    asm.shutil.which = lambda name: None
    unreadable = asm.static_profile(ex.prepared, {})   # a worker never compiles for it
    recompiled = profile()      # no objdump: compiled again, uncached
else:
    read = recompiled = profile()   # compiled here: LLVM's own text
print(json.dumps({"loaded": loaded, "read": read, "recompiled": recompiled,
                  "columns": columns, "unreadable": unreadable}))
"""


def test_asm_of_cached_code_is_the_cached_object_disassembled(tmp_path):
    """A kernel numba loads from its cache is read from the cache's object code (objdump),
    not compiled again, and profiles as the code compiled in the first process did and as
    a recompile does: the same packed FMAs by width, the same register-tile block (its
    FMAs and its vector stack accesses: this tile has both).  Without objdump the
    recompile is the fallback, except in a timing worker's static profile, which records
    the reason instead."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    if shutil.which("objdump") is None:
        pytest.skip("objdump is not installed")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    answers = []
    for _ in range(2):   # the first compiles into the empty cache, the second loads
        done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                              env=env, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        answers.append(json.loads(done.stdout.strip().splitlines()[-1]))
    compiled, loaded = answers
    assert not compiled["loaded"] and loaded["loaded"]
    assert loaded["read"] == loaded["recompiled"] == compiled["read"], answers
    fmas, stack = loaded["read"][1]
    assert fmas > 0 and stack > 0, answers
    # a run's row: the same FMAs; without objdump a reason, and nothing compiled
    columns = loaded["columns"]
    assert columns["asm_vectorisation"] == "vectorised", columns
    assert {int(w): n for w, n in loaded["read"][0].items()} == {
        w: columns[f"asm_packed_fma_{w}"] for w in (128, 256, 512)
        if columns[f"asm_packed_fma_{w}"]}, answers
    assert loaded["unreadable"] == {
        "asm_reason": "AsmUnreadable: dw3x3_nhwc: no objdump on the PATH"}, answers


def test_code_without_multiply_adds_is_judged_by_its_packed_instructions():
    """F(2x2) Winograd's transforms add and subtract only: packed adds are vectorised code.
    A scalar FMA without a packed one is a scalar fallback whatever else is packed."""
    add_only = fp_profile("\tvaddps %ymm0, %ymm1, %ymm2\n\tvsubss %xmm0, %xmm1, %xmm2")
    assert add_only.vectorised
    assert not fp_profile("\tvaddss %xmm0, %xmm1, %xmm2").vectorised
    fallback = fp_profile("\tvaddps %ymm0, %ymm1, %ymm2\n\tvfmadd231ss %xmm0, %xmm1, %xmm2")
    assert not fallback.vectorised
    assert fp_profile("\tvfmadd231ps %ymm0, %ymm1, %ymm2\n\tvfmadd231ss %xmm0, %xmm1, "
                      "%xmm2").vectorised
    # what `check --asm` prints for it: the packed instructions it has, FMAs or not
    assert profile_summary([KernelProfile("t", add_only)]) == \
        "vectorised: 1 x 256-bit packed FP, 1 scalar FP"
