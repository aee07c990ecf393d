"""Every float32 buffer an own kernel keeps (packed weights, padded copies, scratch) starts
on a page boundary, as the harness's inputs and outputs do, and its packed weights lie on
mappings advised for huge pages (convbench/kernels/buffers.py)."""

from __future__ import annotations

import gc
import mmap
import weakref
from collections.abc import Iterator

import numpy as np
import pytest

from convbench.harness.inputs import make_inputs
from convbench.kernels import buffers, registry
from convbench.kernels.base import Prepared
from convbench.kernels.buffers import (
    HUGE_PAGE_BYTES,
    PAGE_BYTES,
    huge_page_empty,
    packed_weights,
    page_aligned,
    page_aligned_empty,
)
from convbench.spec.problem import ConvProblem

OWN = sorted(name for name, alg in registry.algorithms().items() if not alg.baseline)
PROBLEMS = (
    ConvProblem.make(mb=1, ic=32, oc=48, ih=14, iw=14, kh=3, kw=3, ph=1, pw=1, name="dense"),
    ConvProblem.make(mb=1, g=32, ic=32, oc=32, ih=14, iw=14, kh=3, kw=3, sh=2, sw=2, ph=1,
                     pw=1, name="depthwise"),
    ConvProblem.make(mb=1, g=2, ic=32, oc=32, ih=9, iw=9, kh=1, kw=1, name="grouped_1x1"),
    ConvProblem.make(mb=1, ic=64, oc=40, ih=9, iw=7, kh=1, kw=1, name="pointwise"),
)


def _arrays(obj: object, where: str, seen: set[int]) -> Iterator[tuple[str, np.ndarray]]:
    """The numpy arrays ``obj`` holds: attributes, list items, and the attributes of the
    project's own helper objects (a GEMM blocking, a Strassen tree), recursively."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        yield where, obj
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            yield from _arrays(item, f"{where}[{i}]", seen)
    elif type(obj).__module__.startswith("convbench.") and hasattr(obj, "__dict__"):
        for name, value in vars(obj).items():
            yield from _arrays(value, f"{where}.{name}", seen)


def _built(algorithm: str) -> Iterator[tuple[str, Prepared]]:
    """(variant id, kernel) for every registered variant of ``algorithm`` that applies to
    one of PROBLEMS, built on it."""
    for problem in PROBLEMS:
        _, w = make_inputs(problem, seed=1)
        for variant, skip in registry.variants(problem, (algorithm,)):
            if skip is None:
                yield variant.id, registry.get(algorithm).build(problem, w, variant.layout,
                                                                variant.param_dict)


@pytest.mark.parametrize("algorithm", OWN)
def test_own_kernels_keep_their_buffers_on_pages(algorithm: str) -> None:
    checked = 0
    for variant_id, prepared in _built(algorithm):
        for where, a in _arrays(prepared, variant_id, set()):
            if a.dtype == np.float32 and a.nbytes >= 64:
                assert a.ctypes.data % PAGE_BYTES == 0, (where, a.ctypes.data % PAGE_BYTES)
                checked += 1
    assert checked, f"{algorithm}: no variant with a buffer on these problems"


@pytest.mark.parametrize("shape", [(0,), (1,), (16,), (3, 5, 7), (1025, 513), (0, 4, 0, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
def test_page_aligned_arrays_start_on_a_page(shape: tuple[int, ...], dtype: type) -> None:
    a = page_aligned_empty(shape, dtype)
    assert (a.shape, a.dtype) == (shape, np.dtype(dtype)) and a.flags.c_contiguous
    src = np.arange(int(np.prod(shape))).astype(dtype).reshape(shape)
    b = page_aligned(src)
    np.testing.assert_array_equal(b, src)
    for arr in (a, b):
        assert arr.size == 0 or arr.ctypes.data % PAGE_BYTES == 0


def _advised_ranges() -> list[tuple[int, int]]:
    """This process's mappings advised MADV_HUGEPAGE (``hg`` in smaps' VmFlags)."""
    ranges, current = [], None
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(v, 16) for v in head.split("-"))
                current = (lo, hi)
            elif head == "VmFlags:" and "hg" in line.split()[1:]:
                ranges.append(current)
    return ranges


def _on_advised(a: np.ndarray, ranges: list[tuple[int, int]]) -> bool:
    start = a.ctypes.data
    return any(lo <= start and start + a.nbytes <= hi for lo, hi in ranges)


@pytest.mark.parametrize("algorithm", OWN)
def test_own_kernels_keep_their_packed_weights_on_huge_page_mappings(
        algorithm: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What an advised mapping holds covers the kernel's packed weights (a kernel that reads
    OIHW as is keeps its copy there too); whether the host backs it with huge pages is the
    host's setting, recorded per run.  These layers' weights are small: the size floor is
    lifted so that every kernel's go through packed_weights."""
    monkeypatch.setattr(buffers, "HUGE_PAGE_MIN_BYTES", 0)
    checked = 0
    for variant_id, prepared in _built(algorithm):
        ranges = _advised_ranges()
        advised = sum(a.nbytes for _, a in _arrays(prepared, variant_id, set())
                      if a.nbytes and isinstance(_mapping(a), mmap.mmap)
                      and _on_advised(a, ranges))
        assert advised and advised >= prepared.packed_weight_bytes, \
            (variant_id, advised, prepared.packed_weight_bytes)
        checked += 1
    assert checked, f"{algorithm}: no variant applies to these problems"


def _mapping(a: np.ndarray) -> object:
    """What holds ``a``'s memory at the end of its chain of views: the mmap a huge-page
    buffer lies in, or None for an array that owns heap memory."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a.base.obj if isinstance(a.base, memoryview) else a.base


@pytest.mark.skipif(not hasattr(mmap, "MADV_HUGEPAGE"),
                    reason="no MADV_HUGEPAGE on this platform")
def test_packed_weights_are_a_copy_on_an_advised_2_mib_aligned_mapping_freed_with_it():
    src = np.arange(3 * 700 * 1000, dtype=np.float32).reshape(3, 700, 1000)   # 8.0 MiB
    a = packed_weights(src)
    np.testing.assert_array_equal(a, src)
    assert a.flags.c_contiguous and a.flags.writeable and a.dtype == np.float32
    assert a.ctypes.data % HUGE_PAGE_BYTES == 0 and _on_advised(a, _advised_ranges())
    region = weakref.ref(_mapping(a))
    assert isinstance(region(), mmap.mmap)
    del a
    gc.collect()
    assert region() is None    # the mapping went with the array
    empty = huge_page_empty((0, 5))
    assert empty.shape == (0, 5) and empty.dtype == np.float32


def test_weights_under_the_floor_stay_on_the_heap_page_aligned():
    """(The heap itself may be advised: numpy advises its own large allocations.)"""
    small = np.ones(buffers.HUGE_PAGE_MIN_BYTES // 4 - 1, np.float32)
    kept = packed_weights(small)
    np.testing.assert_array_equal(kept, small)
    assert kept.ctypes.data % PAGE_BYTES == 0 and _mapping(kept) is None
    assert isinstance(_mapping(packed_weights(np.append(small, 1.0))), mmap.mmap)
