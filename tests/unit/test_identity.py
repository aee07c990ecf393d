"""Case identity: ids, pyperf names and reproducer lines format and parse back."""

from __future__ import annotations

import shlex

from hypothesis import given
from hypothesis import strategies as st

from convbench.identity import CaseKey, parse_case_id, parse_pyperf_name
from convbench.kernels.base import Variant
from convbench.status import BROKEN, Status

names = st.text(st.characters(categories=("L", "N"), include_characters="_-."), min_size=1,
                max_size=12)


@given(layer=names, algorithm=names, layout=names, threads=st.integers(1, 64),
       width=st.sampled_from(["auto", "256", "512"]),
       params=st.dictionaries(names, st.one_of(st.integers(0, 99), names), max_size=3),
       cache=st.sampled_from(["warm", "cold-weights", "cold"]))
def test_ids_and_pyperf_names_parse_back(layer, algorithm, layout, threads, width, params,
                                         cache):
    variant = Variant.of(algorithm, layout, params).id
    key = CaseKey(layer, variant, threads, width, cache=cache)
    assert parse_case_id(key.case_id) == key
    assert parse_pyperf_name(key.pyperf_name) == key


def test_warm_ids_read_as_before_cache_modes_existed():
    key = CaseKey("conv1", "direct/nchw", 1, "auto")
    assert key.case_id == "conv1|direct/nchw|t1|vauto"
    assert key.pyperf_name == "conv1/direct/nchw/t1/vauto"
    cold = CaseKey("conv1", "direct/nchw", 1, "auto", cache="cold")
    assert cold.case_id == "conv1|direct/nchw|t1|vauto|cold" and cold.key != key.key


def test_not_an_id_is_none():
    assert parse_case_id("conv1/direct/nchw/t1/vauto") is None
    assert parse_pyperf_name("conv1|direct/nchw|t1|vauto") is None
    assert parse_case_id("a|b|x1|vauto") is None


def test_variant_ids_parse_back_with_their_types():
    v = Variant.of("nchwc", "nchw16c", {"ic_bn": 16, "unroll_ker": False, "MR": "auto",
                                        "alpha": 0.5})
    assert Variant.parse(v.id) == v
    for bad in ("direct", "direct/", "im2col/nhwc/gemm"):
        try:
            Variant.parse(bad)
        except ValueError as exc:
            assert repr(bad) in str(exc)
        else:
            raise AssertionError(f"{bad!r} parsed")


def test_reproducer_quotes_the_descriptor_and_carries_extra_kernels():
    key = CaseKey("small", "t_wrong/nchw", 2, "512", 'mb1ic4ih6oc4oh6kh3ph1n"small"')
    line = key.reproducer({"CONVBENCH_EXTRA_KERNELS": "tests.fault_kernels"})
    words = shlex.split(line)
    assert words == ["CONVBENCH_EXTRA_KERNELS=tests.fault_kernels", "convbench", "check",
                     'mb1ic4ih6oc4oh6kh3ph1n"small"', "--variant", "t_wrong/nchw",
                     "--threads", "2", "--vector-width", "512"]
    assert not key.reproducer({}).startswith("CONVBENCH")


def test_status_words_and_broken_set():
    assert [s.value for s in Status] == ["ok", "fail", "error", "crash", "timeout", "skip"]
    assert Status.of("ok") == "ok" and f"{Status.FAIL}" == "fail"
    assert {s for s in Status if s.broken} == BROKEN
    assert Status.SKIP.acceptable and not Status.CRASH.acceptable
    try:
        Status.of("pass")
    except ValueError as exc:
        assert "pass" in str(exc)
    else:
        raise AssertionError("'pass' accepted")
