"""Page-aligned numpy buffers: every array a timed kernel streams through vector loads or
stores (the harness's inputs and outputs, packed weights, padded copies, scratch).

numpy aligns an array to 16 bytes only: large ones land 16 bytes past a page, small ones
wherever the heap has room, which differs from process to process.  A 64-byte vector load
from such an array straddles two cache lines three times in four, and the worker processes
of one run each draw their own placement, so their own "speed".  A kernel whose output
started 16 bytes off a cache line ran 13% slower (direct NHWC 3x3, 141 vs 160 us), and two
runs of the same code differed by 12-18% with tight confidence intervals; depthwise tiles
reading packed weights 48 bytes past a line ran up to 21% slower than from a page boundary
(Zen 4 host; the best variant of each layer 0-8%).  Every buffer here starts on a page
boundary, as benchdnn allocates: no line splits, and the same 4K aliasing between any two
buffers in every process.

Packed weights (:func:`packed_weights`) go further: onto memory advised ``MADV_HUGEPAGE``
and aligned to 2 MiB, so where the kernel's transparent huge pages are ``madvise`` or
``always`` (``/sys/kernel/mm/transparent_hugepage/enabled``, recorded in each run's
environment.json) a layer's weights sit on one or a few 2 MiB pages.  In ``cold-weights``
the call finds its weights out of cache and out of the TLB too, and on 4 KiB pages it walks
the page table (itself out of cache, and two-dimensional under a hypervisor) once per 4 KiB
of weights.  Measured on the Zen 5 host (a VM), in one process, nchwc on MobileNet V2's 1x1
layers and V1's conv_pw_13 (0.05-4 MiB of weights), after the cold-weights pile and twin,
time with the weights on 4 KiB pages over the same on a 2 MiB page, medians of 60-80
alternating rounds: in the first runs 1.03-1.18 at 1 thread and 1.04-1.13 at 2; half an
hour later, the host slower by ~7%, 0.88-1.04 at 1 thread and 0.96-1.06 at 2 (median of all
runs ~1.03); warm calls 0.99-1.02 throughout.  Through ``convbench run`` (20 dense layers of
MobileNet V2, each layer's best variant, two alternating runs a side) the change ran the
layers 1.06x (geomean; per layer 0.79-1.29) at 1 thread and 1.10x (0.87-1.42) at 2; the five
with 256 KiB of weights or more 1.17x and 1.14x, the other fifteen 1.02x and 1.09x (on huge
pages in those runs; under the floor below they are not).  So the
gain is small and varies with the host's state (a likely reason, not measured: a guest's 2
MiB page is one TLB entry only where the hypervisor backs it with one).  A mapping is
rounded to 2 MiB (and reserves 2 MiB more to align it): a worker holding hundreds of kernels
maps a few hundred MiB.  Weights under :data:`HUGE_PAGE_MIN_BYTES` stay page-aligned heap
memory: a mapping costs ~310 us to make (mmap, the 2 MiB page zeroed, munmap; 8 us for a
heap copy of 4 KiB) and holds 2 MiB, and the gain is measured on 0.35 MiB and up only
(above: at 0.05 and 0.14 MiB it was 0.96-1.10).
The libraries allocate their prepacked weights as they do (4 KiB pages under ``madvise``):
this is a choice an inference runtime can make, and ours makes it.  Where the kernel gives
no huge page the buffer is an ordinary 2 MiB-aligned mapping of 4 KiB pages.
"""

from __future__ import annotations

import mmap

import numpy as np

PAGE_BYTES = 4096
HUGE_PAGE_BYTES = 2 << 20
HUGE_PAGE_MIN_BYTES = 256 << 10   # smaller packed weights stay on the heap (module docstring)


def page_aligned_empty(shape: int | tuple[int, ...], dtype: object = np.float32) -> np.ndarray:
    """An uninitialised C-contiguous array starting on a page boundary."""
    shape, dtype, nbytes = _extent(shape, dtype)
    return _aligned_in(np.empty(nbytes + PAGE_BYTES, np.uint8), PAGE_BYTES, shape, dtype,
                       nbytes)


def _extent(shape: int | tuple[int, ...], dtype: object) -> tuple[tuple[int, ...], np.dtype,
                                                                  int]:
    """(shape as a tuple, dtype, bytes) of an array to place."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return shape, dtype, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize


def _aligned_in(raw: np.ndarray, boundary: int, shape: tuple[int, ...], dtype: np.dtype,
                nbytes: int) -> np.ndarray:
    """The array of ``shape`` and ``dtype`` (``nbytes`` long) at the first ``boundary`` in
    the bytes ``raw``."""
    start = -raw.ctypes.data % boundary
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def page_aligned_zeros(shape: int | tuple[int, ...], dtype: object = np.float32) -> np.ndarray:
    """:func:`page_aligned_empty`, zeroed (every page touched now, not in a timed call)."""
    out = page_aligned_empty(shape, dtype)
    out.fill(0)
    return out


def page_aligned(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``a`` starting on a page boundary."""
    out = page_aligned_empty(a.shape, a.dtype)
    out[...] = a
    return out


def huge_page_empty(shape: int | tuple[int, ...], dtype: object = np.float32) -> np.ndarray:
    """An uninitialised C-contiguous array on its own private mapping, 2 MiB-aligned and
    advised ``MADV_HUGEPAGE`` (page-aligned heap memory where the platform has no such
    advice).  The array keeps the mapping alive; it is unmapped with the array."""
    shape, dtype, nbytes = _extent(shape, dtype)
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if nbytes == 0 or advice is None or not hasattr(mmap, "MAP_PRIVATE"):
        return page_aligned_empty(shape, dtype)
    size = -(-nbytes // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES
    # private: a shared anonymous mapping is shmem, whose huge pages follow shmem_enabled
    # (never, here), not the anonymous memory's setting
    region = mmap.mmap(-1, size + HUGE_PAGE_BYTES,
                       flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    raw = np.frombuffer(region, np.uint8)
    out = _aligned_in(raw, HUGE_PAGE_BYTES, shape, dtype, nbytes)
    region.madvise(advice, out.ctypes.data - raw.ctypes.data, size)
    return out


def packed_weights(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of a kernel's packed weights, on huge pages where the kernel
    gives them and they are :data:`HUGE_PAGE_MIN_BYTES` or more (module docstring), written
    now (no page fault in a timed call)."""
    if a.nbytes < HUGE_PAGE_MIN_BYTES:
        return page_aligned(a)
    out = huge_page_empty(a.shape, a.dtype)
    out[...] = a
    return out
