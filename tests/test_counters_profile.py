"""Static code profile of a variant's jitted kernels (packed FMAs, "not vectorised")."""

import re

import numba
import numpy as np

from convbench.harness.check import check_problems
from convbench.harness.inputs import make_inputs
from convbench.harness.verify import prepare
from convbench.kernels import asm
from convbench.kernels.base import Prepared, Variant
from convbench.spec.descriptor import parse_descriptor


@numba.njit(fastmath=True)
def _axpy(a, x, y):  # pragma: no cover - jitted
    for i in range(x.shape[0]):
        y[i] += a * x[i]


@numba.njit
def _serial_sum(x):  # pragma: no cover - jitted; strict FP order: no packed FMA
    s = 0.0
    for i in range(x.shape[0]):
        s = s * 0.5 + x[i]
    return s


class _Axpy(Prepared):
    def run(self, x, y):
        _axpy(np.float32(2.0), x, y)

    def hot_kernels(self):
        return (_axpy,)


def test_hot_kernels_are_profiled_and_flagged():
    x = np.ones(64, np.float32)
    _Axpy().run(x, x.copy())
    _serial_sum(x)
    (kp,) = asm.kernel_profiles(_Axpy())
    assert kp.name == "_axpy" and kp.status == "vectorised"
    (serial,) = asm.kernel_profiles([_serial_sum])
    assert serial.status == "not vectorised"
    cols = asm.profile_columns([kp, serial])
    assert cols["asm_vectorisation"] == "not vectorised"
    assert sum(cols[f"asm_packed_fma_{w}"] for w in (128, 256, 512)) > 0


class _Undeclared(Prepared):
    def run(self, x, y):
        _axpy(np.float32(2.0), x, y)


def test_a_variant_naming_no_kernels_falls_back_to_its_modules_dispatchers():
    x = np.ones(64, np.float32)
    _Undeclared().run(x, x.copy())
    _serial_sum(x)
    # every compiled dispatcher of the module, the one it never called too
    assert {"_axpy", "_serial_sum"} <= {kp.name for kp in asm.kernel_profiles(_Undeclared())}


def test_a_registered_variant_profiles_the_kernels_it_calls_only():
    """Whatever other variants compiled in the process: direct/nchw and direct/nhwc share a
    module, im2col's BLAS variant calls its unfold kernel on a 3x3 layer and nothing of
    ours on a 1x1 (no unfold: the arithmetic is BLAS's)."""
    def profiled(descriptor: str, variant: Variant) -> list[str]:
        problem = parse_descriptor(descriptor)
        x, w = make_inputs(problem)
        run = prepare(problem, variant, x, w)
        run.prepared.run(run.x, run.y)
        return [kp.name for kp in asm.kernel_profiles(run.prepared)]

    three = "mb1ic4ih6oc4kh3ph1"
    assert profiled(three, Variant.of("direct", "nchw")) == ["_direct_nchw"]
    assert profiled(three, Variant.of("direct", "nhwc")) == ["_direct_nhwc"]
    blas = Variant.of("im2col", "nhwc", {"gemm": "blas"})
    assert profiled(three, blas) == ["_unfold_nhwc"]
    assert profiled("mb1ic4ih6oc4kh1ph0", blas) == []
    assert asm.profile_columns([])["asm_vectorisation"] == "no jitted kernel"


def test_a_kernel_is_read_at_the_signatures_its_run_called():
    """A dispatcher with two compiled signatures (a contiguous and a strided operand): the
    profile of a run that called one is that signature's code alone; unrecorded, both."""
    x = np.ones(128, np.float32)
    _axpy(np.float32(2.0), x[::2], x[1::2].copy())          # strided: another signature
    with asm.calls_recorded() as calls:
        _Axpy().run(x, x.copy())
        _serial_sum(x.astype(np.float64))                    # not a hot kernel: ignored
    contiguous = tuple(typ for typ in _axpy.signatures if typ in calls[_axpy])
    assert len(_axpy.signatures) >= 2 and len(contiguous) == 1
    (recorded,) = asm.kernel_profiles(_Axpy(), calls)
    assert recorded.profile == asm.fp_profile(asm.dispatcher_asm(_axpy, contiguous))
    (whole,) = asm.kernel_profiles(_Axpy())
    assert whole.profile == asm.fp_profile(asm.dispatcher_asm(_axpy))
    assert sum(whole.profile.packed_fma.values()) > sum(recorded.profile.packed_fma.values())
    assert "__call__" not in numba.core.dispatcher.Dispatcher.__dict__   # left as it was


def test_check_asm_of_a_shared_kernel_does_not_depend_on_what_ran_before():
    """The own GEMM's macro-kernel is shared: im2col calls it with a C-ordered output,
    Strassen (recursing once on this layer) with strided quadrants too.  im2col's profile
    is the same before and after a Strassen variant ran in the process (it read both
    signatures, 36 then 72 packed 256-bit FMAs, Zen 3, before `check` recorded calls)."""
    problem = parse_descriptor("mb1ic64ih8oc64oh8kh1ph0")
    im2col = Variant.of("im2col", "nhwc", {"gemm": "own"})
    strassen = Variant.of("strassen", "nchw", {"depth": "auto", "gemm": "own"})
    (first,) = check_problems([problem], variant=im2col, profile=True)
    (after_strassen,) = check_problems([problem], variant=strassen, profile=True)
    (again,) = check_problems([problem], variant=im2col, profile=True)
    assert first.asm.startswith("vectorised") and after_strassen.asm.startswith("vectorised")
    assert again.asm == first.asm, (first.asm, after_strassen.asm, again.asm)


def test_check_asm_prints_each_variants_profile(cli):
    """`convbench check --asm`: a verdict per variant, the library-only one included."""
    code, out, err = cli("check", "mb1ic8ih6oc8kh1ph0", "--asm", "-a", "direct", "-a", "im2col")
    assert code == 0, err
    lines = {line.split()[1]: line for line in out.splitlines()[1:] if line.strip()
             and not line.startswith(("1 problem", " "))}
    assert re.search(r"\svectorised: \d+ x \d+-bit FMA", lines["direct/nhwc"]), lines
    assert lines["im2col/nhwc/gemm=blas"].rstrip().endswith("no jitted kernel")
