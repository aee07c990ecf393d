"""Activation layout transforms between NCHW, NHWC and NCHW[x]c: the data movement a network
pays where one conv's output layout is not the next conv's input layout (NeoCPU, seed 002,
section 3.3.2).

One kernel does every direction, because all three layouts are the same layout with a
different block: a tensor of C channels in NCHW[x]c is (N, ceil(C/x), H, W, x), so

- NCHW is NCHW[1]c (one channel per block: (N, C, H, W, 1)),
- NHWC is NCHW[C]c (all channels in one block: (N, 1, H, W, C)),

and a transform is a copy from block ``xs`` to block ``xd``.  The copy walks the
destination in order (contiguous writes, one row per parallel iteration) and gathers from
the source through a per-channel offset table built once per call, so the inner loop does
no integer division.  Channels that do not fill the last destination block are written as
zeros, as :func:`convbench.kernels.layouts.to_layout` pads them, so a destination buffer
may be reused without clearing.

Not an algorithm (no ``ALGORITHMS``): the registry imports it and registers nothing.
"""

from __future__ import annotations

import numba
import numpy as np

from convbench.kernels import layouts

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


def stored_shape(shape_nchw: tuple[int, int, int, int], layout: str) -> tuple[int, ...]:
    """The array shape of a tensor of logical NCHW shape held in ``layout``."""
    n, c, h, w = shape_nchw
    if layout == "nchw":
        return (n, c, h, w)
    if layout == "nhwc":
        return (n, h, w, c)
    x = block_of(layout, c)
    return (n, -(-c // x), h, w, x)


def _channel_offsets(channels: int, block: int, h: int, w: int) -> np.ndarray:
    """Offset of channel c's element (n=0, h=0, w=0) in a layout of block ``block``."""
    c = np.arange(channels, dtype=np.int64)
    return (c // block) * (h * w * block) + c % block


@numba.njit(parallel=True, cache=True)
def _reblock(src, dst, offsets, channels, n, h, w, xs, xd):  # pragma: no cover - jitted
    """dst (block xd) <- src (block xs), both flat; ``offsets[c]`` from _channel_offsets."""
    cbs, cbd = (channels + xs - 1) // xs, (channels + xd - 1) // xd
    src_image, src_row, src_col = cbs * h * w * xs, w * xs, xs
    rows = n * cbd * h
    for row in numba.prange(rows):
        i = row // (cbd * h)
        cb = (row // h) % cbd
        y = row % h
        out = row * w * xd
        first = cb * xd
        inner = min(xd, channels - first)
        base = i * src_image + y * src_row
        for x in range(w):
            at = base + x * src_col
            for k in range(inner):
                dst[out + k] = src[at + offsets[first + k]]
            for k in range(inner, xd):
                dst[out + k] = 0.0
            out += xd


class Transform:
    """NCHW-shape ``shape`` from layout ``src`` to layout ``dst``, ready to be called on
    preallocated buffers (so a timed call moves data and nothing else)."""

    def __init__(self, shape: tuple[int, int, int, int], src: str, dst: str):
        self.shape, self.src, self.dst = tuple(int(d) for d in shape), src, dst
        _n, c, h, w = self.shape
        self.xs, self.xd = block_of(src, c), block_of(dst, c)
        self.offsets = _channel_offsets(c, self.xs, h, w)

    def __call__(self, x: np.ndarray, y: np.ndarray) -> None:
        """``y`` (in ``dst``) <- ``x`` (in ``src``); both C-contiguous float32."""
        n, c, h, w = self.shape
        _reblock(x.reshape(-1), y.reshape(-1), self.offsets, c, n, h, w, self.xs, self.xd)

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
