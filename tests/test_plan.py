"""Plan expansion: the sweep's cartesian product, skips kept, filters and the thread limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from convbench import host
from convbench.errors import ConvbenchError
from convbench.harness.plan import Filter, build_plan, format_duration
from convbench.spec.suite import load_suite, parse_suite

DATA = Path(__file__).parent / "data"

SUITE = """
name: p
description: plan test
layers:
  - {name: res2a_branch2b, shape: mb1ic8ih10oc8oh10kh3ph1, count: 3}
  - {name: res2a_branch2a, shape: mb1ic8ih10oc8oh10kh1}
  - {name: dw, shape: mb1g8ic8ih10oc8oh10kh3ph1}
sweep:
  algorithms: [direct, im2col]
  threads: [1, 2]
  vector_widths: [auto, "256"]
  params: {im2col: {gemm: [blas]}}
"""


def _suite():
    return parse_suite(SUITE, Path("p.yaml"))


def test_expands_layer_variant_threads_width():
    plan = build_plan(_suite(), cpu_count=2)
    # 3 layers x (direct: 2 layouts + im2col: 2 layouts x 1 gemm) x 2 threads x 2 widths
    assert len(plan.cases) == 3 * 4 * 2 * 2
    ids = [c.case_id for c in plan.cases]
    assert len(set(ids)) == len(ids)
    assert "res2a_branch2b|im2col/nhwc/gemm=blas|t2|v256" in ids
    assert len(plan.groups()) == 3 * 2 * 2
    assert all(len({c.group for c in g}) == 1 for g in plan.groups())


def test_sweep_params_override_domain():
    text = SUITE.replace("gemm: [blas]", "gemm: [own]")
    plan = build_plan(parse_suite(text, Path("p.yaml")), cpu_count=2)
    assert {c.variant.param_dict.get("gemm") for c in plan.cases
            if c.variant.algorithm == "im2col"} == {"own"}


def test_skips_are_kept_with_reason(monkeypatch):
    import convbench.kernels.registry as registry

    monkeypatch.setenv(registry.EXTRA_KERNELS_ENV, "tests.fault_kernels")
    registry.algorithms.cache_clear()
    try:
        alg = registry.get("t_good")
        picky = alg.__class__(**{**alg.__dict__, "name": "t_picky",
                                 "applies": lambda p, lay, prm: "never applies"})
        registry.algorithms()["t_picky"] = picky
        text = SUITE.replace("[direct, im2col]", "[t_picky, direct]")
        plan = build_plan(parse_suite(text, Path("p.yaml")), cpu_count=2)
    finally:
        registry.algorithms.cache_clear()
    skipped = [c for c in plan.cases if c.variant.algorithm == "t_picky"]
    assert skipped and all(c.skip_reason == "never applies" for c in skipped)
    assert len(plan.runnable) == len(plan.cases) - len(skipped)


def test_a_width_this_host_cannot_run_is_skipped_with_the_reason():
    # one suite serves x86 and ARM: 128 is NEON's width, 512 AVX-512's; the other host's
    # cases stay in the plan as skips that say why
    other = "128" if host.detect_cpu().arch == "x86_64" else "512"
    text = SUITE.replace('vector_widths: [auto, "256"]', f'vector_widths: [auto, "{other}"]')
    plan = build_plan(parse_suite(text, Path("p.yaml")), cpu_count=2)
    foreign = [c for c in plan.cases if c.vector_width == other]
    assert len(foreign) == len(plan.cases) // 2
    assert {c.skip_reason for c in foreign} == {host.width_unsupported(other)}
    assert all(c.skip_reason is None for c in plan.cases if c.vector_width == "auto")


@pytest.mark.parametrize(("only", "exclude", "expected"), [
    (["layer=res2a*"], [], 2 * 4 * 4),
    (["layer=res2a*,algorithm=im2col"], [], 2 * 2 * 4),
    (["algorithm=direct", "layout=nhwc"], [], 3 * 3 * 4),   # alternatives
    (["threads=1,width=256"], [], 3 * 4),
    ([], ["layer=dw"], 2 * 4 * 4),
    (["layer=res2a*"], ["layout=nchw"], 2 * 2 * 4),
])
def test_filters(only, exclude, expected):
    assert len(build_plan(_suite(), only, exclude, cpu_count=2).cases) == expected


@pytest.mark.parametrize("text", ["layer", "colour=red", "layer="])
def test_bad_filter_is_a_user_error(text):
    with pytest.raises(ConvbenchError):
        Filter.parse(text)


def test_filters_that_leave_nothing_are_an_error():
    with pytest.raises(ConvbenchError, match="no case"):
        build_plan(_suite(), ["layer=nope"], cpu_count=2)


def test_more_threads_than_cores_is_an_error():
    with pytest.raises(ConvbenchError, match="exceed"):
        build_plan(_suite(), cpu_count=1)


def test_unknown_algorithm_is_an_error():
    text = SUITE.replace("[direct, im2col]", "[direct, winograd9]")
    with pytest.raises(ConvbenchError, match="winograd9"):
        build_plan(parse_suite(text, Path("p.yaml")), cpu_count=2)


def test_estimate_grows_with_values():
    suite = load_suite(DATA / "tiny_suite.yaml")
    plan = build_plan(suite)
    few = plan.estimate_seconds()
    more = build_plan(suite, timing=plan.timing.__class__(min_time=0.1, values=20))
    assert 0 < few < more.estimate_seconds()
    import dataclasses

    assert plan.timing.processes == 1   # the tiny suite's; three processes take longer
    three = build_plan(suite, timing=dataclasses.replace(plan.timing, processes=3))
    assert three.estimate_seconds() > 1.5 * few   # worker starts and values, not compiles
    assert format_duration(3725) == "1h02m05s"
    assert format_duration(65) == "1m05s"


def test_cold_modes_are_cases_of_their_own_and_their_evictions_are_estimated():
    import dataclasses

    suite = _suite()
    warm = build_plan(suite)
    both = build_plan(dataclasses.replace(
        suite, sweep=dataclasses.replace(suite.sweep, cache=("warm", "cold"))))
    assert len(both.cases) == 2 * len(warm.cases)
    cold = [c for c in both.cases if c.cache == "cold"]
    assert all(c.case_id.endswith("|cold") for c in cold)
    assert {c.group for c in cold}.isdisjoint({c.group for c in warm.cases})
    pile = 1 << 30   # 1 GiB streamed per value at 10 GB/s: 0.107 s per eviction
    extra = both.estimate_seconds(cold_bytes=pile) - warm.estimate_seconds()
    evictions = len([c for c in cold if c.skip_reason is None]) * (
        suite.sweep.timing.warmups + suite.sweep.timing.values)
    assert extra > evictions * pile / 10e9
