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
"""

from __future__ import annotations

import numpy as np

PAGE_BYTES = 4096


def page_aligned_empty(shape: int | tuple[int, ...], dtype: object = np.float32) -> np.ndarray:
    """An uninitialised C-contiguous array starting on a page boundary."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buf = np.empty(nbytes + PAGE_BYTES, np.uint8)
    start = -buf.ctypes.data % PAGE_BYTES
    return buf[start:start + nbytes].view(dtype).reshape(shape)


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
