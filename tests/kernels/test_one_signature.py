"""Each jitted GEMM-family kernel sees one memory layout per argument, whatever the layer.

numba compiles (and caches) every layout of an array argument as a signature of its own,
and a worker that compiled anything is restarted before it measures
(convbench/harness/compiled.py): a 1x1 layer's F-order weights or a grouped layer's
strided output columns cost a smoke run a worker restart or seconds of compile.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from convbench.harness.inputs import make_inputs
from convbench.kernels import layouts
from convbench.kernels.gemm import Blocking
from convbench.kernels.indirect import IndirectNHWC
from convbench.kernels.spatial_pack import SpatialPackNHWC
from convbench.spec.problem import ConvProblem
from tests.kernels.gemm_family_support import compare_output

POINTWISE = ConvProblem.make(ic=32, oc=32, ih=14, kh=1)   # its HWIO weights: an F-order view
DEPTHWISE = ConvProblem.make(g=8, ic=8, oc=8, ih=6, kh=3, ph=1)


@pytest.mark.parametrize("build", [
    lambda p, w: IndirectNHWC(p, w, Blocking()),
    lambda p, w: SpatialPackNHWC(p, w, 4, 8, Blocking()),
], ids=["indirect", "spatial_pack"])
def test_weights_are_packed_from_c_order(build, monkeypatch):
    seen = []
    original = Blocking.pack_b

    def recording(self, b, out=None):
        seen.append(b.flags.c_contiguous)
        return original(self, b, out)

    monkeypatch.setattr(Blocking, "pack_b", recording)
    _, w = make_inputs(POINTWISE)
    build(POINTWISE, w)
    assert seen and all(seen)


def test_grouped_indirect_hands_the_kernel_contiguous_output():
    p = DEPTHWISE
    x, w = make_inputs(p)
    prepared = IndirectNHWC(p, w, Blocking())
    outputs = []
    kernel = prepared.kernels.indirect

    def recording(x, ind, taps, icg, bp, c, kt, mc):
        outputs.append(c.flags.c_contiguous)
        kernel(x, ind, taps, icg, bp, c, kt, mc)

    prepared.kernels = dataclasses.replace(prepared.kernels, indirect=recording)
    y = layouts.empty(p.output_shape, "nhwc")
    prepared.run(layouts.to_layout(x, "nhwc"), y)
    assert outputs == [True] * p.g
    assert compare_output(p, layouts.from_layout(y, "nhwc", p.oc)).passed
    assert np.isfinite(y).all()
