"""Every registered kernel variant against the float64 reference on random small shapes.

New algorithm modules are covered automatically: the registry lists them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

from convbench.harness.inputs import make_inputs
from convbench.harness.verify import verify
from convbench.kernels import registry
from convbench.kernels.base import Algorithm, ParamValue, Prepared, Variant
from convbench.kernels.direct import DirectNCHW
from convbench.kernels.reference import Reference
from convbench.spec.problem import ConvProblem
from tests.conftest import numba_threads
from tests.strategies import (
    any_problem,
    depthwise_problems,
    general_problems,
    pointwise_problems,
)

ALGORITHMS = sorted(registry.algorithms())


def _check_all(problem: ConvProblem, algorithm: str) -> int:
    x, w = make_inputs(problem, seed=1)
    reference = Reference(problem, x, w)
    checked = 0
    for variant, skip in registry.variants(problem, (algorithm,)):
        if skip is not None:
            continue
        verdict, _ = verify(problem, variant, reference, x, w)
        assert verdict.status == "ok", f"{variant.id} on {problem}: {verdict.reason}"
        checked += 1
    return checked


# Problems drawn per algorithm.  nchwc compiles one kernel per (reg_n, oc_bn, ic_bn, stride)
# and a small layer's ic_bn is its channel count: 12 problems brought 40-50 such keys, 50-70 s
# of compiling (the suite's longest test); its own test_matches_reference draws 30 problems
# with random blocks and tiles and test_registered_grid_is_small_and_passes runs the whole
# grid on one layer, so here one checks the registry's grid for a drawn layer (2 draws took
# 35-48 s, 4 took 48 s: the longest test of a 13-minute suite).
EXAMPLES = {"nchwc": 1, "depthwise3x3": 1, "gemm1x1": 1}
# depthwise3x3 applies to depthwise problems only, a quarter of any_problem's draws: of 4
# draws none was one about a third of the time (the test checked nothing) and each one that
# was compiled the whole grid, 33 variants (8 tiles in 3 layouts and 2 orders, and NCHW).
# So one depthwise problem a run, its grid built on one thread: the serial kernels
# (DepthwiseNHWC.launch), the same loops and tiles as the parallel ones without prange,
# compile in ~0.5 s each against 1.2-1.8 s (Zen 3 host: 45 s a problem at 2 threads);
# test_depthwise runs the parallel kernels (every NHWC tile, and every layout on random
# problems at 2 threads).
# gemm1x1 runs pointwise layers only and compiles a kernel per (MR, NR, tail): 12 draws of
# any problem took 42 s (each pointwise one its grid's 8 kernels); test_gemm1x1 draws odd
# shapes and tiles, so here one pointwise layer checks the registry's grid.
PROBLEMS = {"depthwise3x3": depthwise_problems(), "gemm1x1": pointwise_problems()}
THREADS = {"depthwise3x3": 1}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_variant_matches_reference(algorithm):
    own_problems = algorithm in PROBLEMS

    @settings(max_examples=EXAMPLES.get(algorithm, 12), deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(problem=PROBLEMS.get(algorithm, any_problem))
    def check(problem: ConvProblem) -> None:
        checked = _check_all(problem, algorithm)
        assert checked or not own_problems, f"no {algorithm} variant applies to {problem}"

    threads = THREADS.get(algorithm)
    with numba_threads(threads) if threads else contextlib.nullcontext():
        check()


def test_direct_and_im2col_cover_every_feature():
    """The baselines must apply to strided, padded, dilated, grouped, non-square problems."""
    p = ConvProblem.make(mb=2, g=2, ic=6, oc=4, ih=11, iw=7, kh=3, kw=2, sh=2, sw=1, ph=1,
                         pw=0, dh=1, dw=0, name="all_features")
    for name in ("direct", "im2col"):
        assert _check_all(p, name) >= 2


def _drop_last_tap(w: np.ndarray) -> np.ndarray:
    """A plausible bug: the kernel-width loop stops one tap early."""
    w = w.copy()
    w[..., -1] = 0.0
    return w


def _flip(w: np.ndarray) -> np.ndarray:
    """A plausible bug: true convolution (flipped kernel) instead of correlation."""
    return np.ascontiguousarray(w[:, :, ::-1, ::-1])


class _Buggy(Prepared):
    """The direct kernel run on weights that a bug has changed."""

    in_layout = out_layout = "nchw"

    def __init__(self, problem: ConvProblem, w: np.ndarray, bug):
        self.inner = DirectNCHW(problem, bug(w))

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        self.inner.run(x, y)


def _broken(bug) -> Algorithm:
    def build(p: ConvProblem, w: np.ndarray, layout: str, params: Mapping[str, ParamValue]):
        return _Buggy(p, w, bug)

    return Algorithm(name=f"broken{bug.__name__}", title="broken", source="test",
                     layouts=("nchw",), build=build)


@pytest.mark.parametrize("bug", [_drop_last_tap, _flip])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(problem=general_problems(max_channels=70, max_size=14))
def test_broken_kernels_are_caught(monkeypatch_module, bug, problem):
    """The same check rejects a kernel with a real bug, for reduction lengths up to ~1000."""
    x, w = make_inputs(problem, seed=2)
    reference = Reference(problem, x, w)
    # Where the bug changes nothing (a dropped tap that only meets padding, a symmetric
    # kernel) there is nothing to catch.
    assume(not np.allclose(Reference(problem, x, bug(w)).y, reference.y, rtol=0, atol=1e-9))
    alg = _broken(bug)
    monkeypatch_module.setitem(registry.algorithms(), alg.name, alg)
    verdict, _ = verify(problem, Variant.of(alg.name, "nchw"), reference, x, w)
    assert verdict.status == "fail", f"{bug.__name__} passed on {problem}"


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_a_layout_the_algorithm_does_not_declare_is_an_error_not_a_fallback():
    """depthwise3x3's builder makes its NCHW kernel for any layout it does not know; named
    with one (a hand-edited plan.json can), the variant is an error that says which layouts
    it has, not an NCHW result filed under another layout's name."""
    problem = ConvProblem.make(g=16, ic=16, oc=16, ih=6, iw=6, kh=3, kw=3, ph=1, pw=1)
    x, w = make_inputs(problem, seed=1)
    alg = registry.get("depthwise3x3")
    assert alg.layout_refusal("nchw") is None
    refusal = "depthwise3x3 runs in nhwc, nchw, nchw16c, nchw32c, not nchw8c"
    assert alg.layout_refusal("nchw8c") == refusal
    verdict, execution = verify(problem, Variant.of(alg.name, "nchw8c"),
                                Reference(problem, x, w), x, w)
    assert (verdict.status, execution) == ("error", None)
    assert refusal in verdict.reason
