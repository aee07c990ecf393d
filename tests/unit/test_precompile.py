"""harness/precompile.py: how one group's cases are shared among compile-only workers,
and the stamps that let a warm run skip them."""

from __future__ import annotations

from convbench.harness import precompile
from convbench.harness.options import RunOptions, make_plan
from convbench.spec.suite import load_suite

SUITE = """
name: ahead
description: one layer, several algorithms
layers:
  - {name: conv3x3, shape: mb1ic8ih10oc8oh10kh3ph1, count: 1}
sweep:
  algorithms: [direct, im2col, indirect, nchwc]
  threads: [1]
"""


def _cases(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE)
    plan = make_plan(load_suite(path), RunOptions())
    return [c for c in plan.cases if c.skip_reason is None]


def test_chunks_keep_an_algorithm_together_and_balance(tmp_path):
    cases = _cases(tmp_path)
    parts = precompile.chunks(cases, 2)
    assert len(parts) == 2
    assert sorted(c.case_id for p in parts for c in p) == sorted(c.case_id for c in cases)
    for algorithm in {c.variant.algorithm for c in cases}:   # never split: shared kernels
        assert sum(any(c.variant.algorithm == algorithm for c in p) for p in parts) == 1
    sizes = sorted(len(p) for p in parts)
    biggest = max(sum(c.variant.algorithm == a for c in cases)
                  for a in {c.variant.algorithm for c in cases})
    assert sizes[1] - sizes[0] <= biggest
    assert precompile.chunks(cases[:1], 4) == [cases[:1]]
    assert precompile.chunks([], 2) == []


def test_stamps_are_per_case_and_width(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cases = _cases(tmp_path)
    assert all(precompile.needs_compile(c, "256") for c in cases)
    precompile.mark_compiled(cases[:2], "256")
    assert [precompile.needs_compile(c, "256") for c in cases[:3]] == [False, False, True]
    assert precompile.needs_compile(cases[0], "512")     # other machine code
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert precompile.needs_compile(cases[0], "256")     # another numba cache


def test_one_thread_and_more_are_stamped_apart(tmp_path, monkeypatch):
    """On one thread a kernel may run its serial build (_numba_support.launched_build):
    a case compiled at two threads leaves the same variant at one thread uncompiled."""
    import dataclasses

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    one = _cases(tmp_path)[0]
    two, four = (dataclasses.replace(one, threads=t) for t in (2, 4))
    precompile.mark_compiled([two], "256")
    assert not precompile.needs_compile(four, "256")   # both launch the parallel build
    assert precompile.needs_compile(one, "256")
