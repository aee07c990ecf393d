"""Static code profile of a variant's jitted kernels (packed FMAs, "not vectorised")."""

import numba
import numpy as np

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


def test_registered_variant_falls_back_to_its_module_dispatchers():
    problem = parse_descriptor("mb1ic4ih6oc4kh3ph1")
    x, w = make_inputs(problem)
    run = prepare(problem, Variant.of("direct", "nchw"), x, w)
    run.prepared.run(run.x, run.y)
    profiles = asm.kernel_profiles(run.prepared)
    assert profiles and all(p.status in ("vectorised", "not vectorised", "no FP")
                            for p in profiles)
