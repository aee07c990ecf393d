"""Layout converters for activations (NCHW, NHWC, NCHW[x]c) and weights (OIHW, HWIO, KCRS[x]c[y]k).

Blocked layouts follow NeoCPU (seed 002): activations NCHW[x]c are (N, ceil(C/x), H, W, x),
weights KCRS[x]c[y]k are (ceil(K/y), ceil(C/x), R, S, x, y) with K output and C input
channels; channels that do not fill the last block are zero padded.
"""

from __future__ import annotations

import re

import numpy as np

_BLOCKED = re.compile(r"^nchw(\d+)c$")


def block_size(layout: str) -> int | None:
    """x for "nchw{x}c", None for plain layouts."""
    m = _BLOCKED.match(layout)
    return int(m.group(1)) if m else None


def blocked_name(x: int) -> str:
    return f"nchw{x}c"


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def to_layout(x_nchw: np.ndarray, layout: str) -> np.ndarray:
    """Contiguous copy of an NCHW tensor in ``layout``."""
    if layout == "nchw":
        return np.ascontiguousarray(x_nchw)
    if layout == "nhwc":
        return np.ascontiguousarray(x_nchw.transpose(0, 2, 3, 1))
    xb = block_size(layout)
    if xb is None:
        raise ValueError(f"unknown activation layout {layout!r}")
    n, c, h, w = x_nchw.shape
    cb = _ceil_div(c, xb)
    padded = np.zeros((n, cb * xb, h, w), dtype=x_nchw.dtype)
    padded[:, :c] = x_nchw
    return np.ascontiguousarray(padded.reshape(n, cb, xb, h, w).transpose(0, 1, 3, 4, 2))


def from_layout(x: np.ndarray, layout: str, channels: int) -> np.ndarray:
    """NCHW view/copy of a tensor held in ``layout`` (``channels`` drops block padding)."""
    if layout == "nchw":
        return x
    if layout == "nhwc":
        return x.transpose(0, 3, 1, 2)
    xb = block_size(layout)
    if xb is None:
        raise ValueError(f"unknown activation layout {layout!r}")
    n, cb, h, w, _ = x.shape
    return x.transpose(0, 1, 4, 2, 3).reshape(n, cb * xb, h, w)[:, :channels]


def empty(shape_nchw: tuple[int, int, int, int], layout: str,
          dtype: np.dtype | type = np.float32) -> np.ndarray:
    """Uninitialised tensor of logical NCHW shape stored in ``layout``."""
    n, c, h, w = shape_nchw
    if layout == "nchw":
        return np.empty((n, c, h, w), dtype)
    if layout == "nhwc":
        return np.empty((n, h, w, c), dtype)
    xb = block_size(layout)
    if xb is None:
        raise ValueError(f"unknown activation layout {layout!r}")
    return np.zeros((n, _ceil_div(c, xb), h, w, xb), dtype)


def oihw_to_hwio(w: np.ndarray) -> np.ndarray:
    """OIHW -> (KH, KW, I, O), the weight layout of NHWC kernels."""
    return np.ascontiguousarray(w.transpose(2, 3, 1, 0))


def hwio_to_oihw(w: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(w.transpose(3, 2, 0, 1))


def oihw_to_kcrsxcyk(w: np.ndarray, x: int, y: int) -> np.ndarray:
    """OIHW -> KCRS[x]c[y]k: (ceil(O/y), ceil(I/x), KH, KW, x, y), zero padded."""
    o, i, kh, kw = w.shape
    ob, ib = _ceil_div(o, y), _ceil_div(i, x)
    padded = np.zeros((ob * y, ib * x, kh, kw), dtype=w.dtype)
    padded[:o, :i] = w
    blocked = padded.reshape(ob, y, ib, x, kh, kw).transpose(0, 2, 4, 5, 3, 1)
    return np.ascontiguousarray(blocked)


def kcrsxcyk_to_oihw(wb: np.ndarray, out_channels: int, in_channels: int) -> np.ndarray:
    ob, ib, kh, kw, x, y = wb.shape
    full = wb.transpose(0, 5, 1, 4, 2, 3).reshape(ob * y, ib * x, kh, kw)
    return np.ascontiguousarray(full[:out_channels, :in_channels])
