"""Activation layout transforms between NCHW, NHWC and NCHW[x]c: the data movement a network
pays where one conv's output layout is not the next conv's input layout (NeoCPU, seed 002,
section 3.3.2).

One kernel does every direction, because all three layouts are the same layout with a
different block: a tensor of C channels in NCHW[x]c is (N, ceil(C/x), H, W, x), so

- NCHW is NCHW[1]c (one channel per block: (N, C, H, W, 1)),
- NHWC is NCHW[C]c (all channels in one block: (N, 1, H, W, C)),

and a transform is a copy from block ``xs`` to block ``xd``.  The copy walks the
destination one row (image, destination block, y) per parallel iteration, and within it
the *runs*: channels that share a source block lie next to each other in both layouts, so
each run is copied as one short contiguous vector per pixel (16 floats from NCHW16c to
NHWC); a run of one channel (NCHW on either side) walks the pixels instead, contiguous on
the NCHW side.  Equal blocks are one flat copy.  (The first version gathered every element
through a per-channel offset table: ~10 cycles an element, 620 us for the 588 KiB
ResNet-50 input on the Zen 3 host, where this copies it in a few tens of us.)  Channels
that do not fill the last destination block are written as zeros, as
:func:`convbench.kernels.layouts.to_layout` pads them, so a destination buffer may be
reused without clearing.

Not an algorithm (no ``ALGORITHMS``): the registry imports it and registers nothing.
"""

from __future__ import annotations

import numba
import numpy as np

from convbench.kernels import layouts
from convbench.kernels._numba_support import U

PLAIN = ("nchw", "nhwc")


def block_of(layout: str, channels: int) -> int:
    """The block x of ``layout`` seen as NCHW[x]c for a tensor of ``channels`` channels."""
    if layout == "nchw":
        return 1
    if layout == "nhwc":
        return channels
    x = layouts.block_size(layout)
    if x is None:
        raise ValueError(f"unknown activation layout {layout!r}")
    return x


def same_memory(channels: int, a: str, b: str) -> bool:
    """Whether a tensor of ``channels`` channels lies byte for byte alike in layouts ``a``
    and ``b`` (the same block x: NCHW[C]c is NHWC, NCHW[1]c is NCHW), so that moving it
    from one to the other is a view, not a copy.  NeoCPU's blocked conv with oc_bn = OC
    writes NHWC that way: VGG-16's conv1_1 (IC = 3, OC = 64) as NCHW[x]c with ic_bn = 3
    and oc_bn = 64 reads and writes NHWC."""
    return block_of(a, channels) == block_of(b, channels)


def stored_shape(shape_nchw: tuple[int, int, int, int], layout: str) -> tuple[int, ...]:
    """The array shape of a tensor of logical NCHW shape held in ``layout``."""
    n, c, h, w = shape_nchw
    if layout == "nchw":
        return (n, c, h, w)
    if layout == "nhwc":
        return (n, h, w, c)
    x = block_of(layout, c)
    return (n, -(-c // x), h, w, x)


@numba.njit(parallel=True, cache=True)
def _reblock(src, dst, channels, n, h, w, xs, xd):  # pragma: no cover - jitted
    """dst (block xd) <- src (block xs), both flat."""
    if xs == xd and channels % xs == 0:     # the same memory order, no padding to clear
        for i in numba.prange(src.size):
            dst[i] = src[i]
        return
    cbs, cbd = (channels + xs - 1) // xs, (channels + xd - 1) // xd
    src_plane, src_image = h * w * xs, cbs * h * w * xs
    for row in numba.prange(n * cbd * h):
        i = row // (cbd * h)
        cb = (row // h) % cbd
        y = row % h
        out = row * w * xd
        first = cb * xd
        last = min(first + xd, channels)
        for x in range(w):                     # the last block's padding channels
            for k in range(last - first, xd):
                dst[U(out + x * xd + k)] = 0.0
        c = first
        while c < last:
            run = min(xs - c % xs, last - c)   # channels of one source block
            s0 = i * src_image + (c // xs) * src_plane + y * w * xs + c % xs
            d0 = out + c - first
            if run == 1 and xs == 1:           # from NCHW: the source row is contiguous
                for x in range(U(w)):
                    dst[U(d0) + x * U(xd)] = src[U(s0) + x]
            elif run == 1 and xd == 1:         # to NCHW: the destination row is
                for x in range(U(w)):
                    dst[U(d0) + x] = src[U(s0) + x * U(xs)]
            else:
                for x in range(w):
                    a, b = U(s0 + x * xs), U(d0 + x * xd)
                    for k in range(U(run)):
                        dst[b + k] = src[a + k]
            c += run


class Transform:
    """NCHW-shape ``shape`` from layout ``src`` to layout ``dst``, ready to be called on
    preallocated buffers (so a timed call moves data and nothing else)."""

    def __init__(self, shape: tuple[int, int, int, int], src: str, dst: str):
        self.shape, self.src, self.dst = tuple(int(d) for d in shape), src, dst
        c = self.shape[1]
        self.xs, self.xd = block_of(src, c), block_of(dst, c)

    def __call__(self, x: np.ndarray, y: np.ndarray) -> None:
        """``y`` (in ``dst``) <- ``x`` (in ``src``); both C-contiguous float32."""
        n, c, h, w = self.shape
        _reblock(x.reshape(-1), y.reshape(-1), c, n, h, w, self.xs, self.xd)

    def empty_output(self) -> np.ndarray:
        return np.empty(stored_shape(self.shape, self.dst), np.float32)


def convert(x: np.ndarray, shape: tuple[int, int, int, int], src: str, dst: str
            ) -> np.ndarray:
    """A new array: ``x`` (logical NCHW ``shape``, held in ``src``) held in ``dst``."""
    transform = Transform(shape, src, dst)
    y = transform.empty_output()
    transform(np.ascontiguousarray(x, dtype=np.float32), y)
    return y


def reference(x: np.ndarray, shape: tuple[int, int, int, int], src: str, dst: str
              ) -> np.ndarray:
    """What :func:`convert` must return, by numpy transposes and reshapes (the check)."""
    nchw = np.ascontiguousarray(layouts.from_layout(x, src, shape[1]))
    return layouts.to_layout(nchw, dst)


def layouts_of(variant_layouts: set[tuple[str, str]]) -> tuple[str, ...]:
    """Every activation layout in a set of (in, out) layout pairs, plain ones always
    included (the network's input and output are NCHW; NHWC is the other baseline)."""
    found = {layout for pair in variant_layouts for layout in pair} | set(PLAIN)

    def order(layout: str) -> tuple[int, str]:
        x = layouts.block_size(layout)
        return (PLAIN.index(layout), "") if x is None else (len(PLAIN) + x, layout)

    return tuple(sorted(found, key=order))
