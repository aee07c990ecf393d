"""The glue between a network's convs (relu, relu6, max/avg pooling, residual add), in every
activation layout a tensor can be held in.

Like :mod:`convbench.kernels.transforms`, every layout is seen as NCHW[x]c, a 5-d array
(N, ceil(C/x), H, W, x): NCHW is x = 1, NHWC is x = C, so one pooling kernel serves all
three (:func:`blocked_view`).  Elementwise ops do not care about the layout at all and run
on the flat buffer.  Channels that pad the last block of a blocked tensor hold zeros, and
every op here maps zeros to zeros (relu(0) = 0, 0 + 0 = 0, the max or mean of a window of
zeros is 0), so padding stays zero through the glue: the next blocked conv may read it.

Kernels write into preallocated outputs (the network pass allocates nothing per call) and
run in parallel over rows.  NaN propagates (relu of NaN is NaN; a NaN in a max window wins),
so a kernel that wrote NaN upstream fails the pass's check instead of being masked.

relu, relu6 and add write their result over an input that no other op reads
(:func:`in_place_input`), as inference engines do: a relu right after a conv then reads and
writes the conv's output while it is still in cache, instead of streaming a fresh buffer
(in the ResNet-50 pass, AMD host, 1 thread, the relus took 5.5 ms writing fresh buffers,
1.9x their looped time).  The tensor overwritten is not checked against the reference
(:func:`overwritten`); the op's output, computed from it, is.

What a glue op costs depends only on its :class:`GlueKey` (kind, input shape, inputs,
window, in place or not) and the layout it runs in: ``convbench transforms`` times each key
of a network in each layout with the same calls the network pass makes (:func:`op_calls`),
and the plan adds those times (a plan that counted glue as free predicted ResNet-50's pass
6% short).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from convbench.kernels import transforms
from convbench.spec.network import INPUT

Call = tuple[Callable[..., None], tuple]


@dataclass(frozen=True)
class GlueKey:
    """What a glue op's time depends on, besides its layout: the kind, the (first) input's
    NCHW shape, how many inputs (an add may sum more than two) and a pool's window."""

    kind: str
    shape: tuple[int, int, int, int]
    inputs: int = 1
    k: int = 0
    s: int = 1
    p: int = 0
    in_place: bool = False

    @classmethod
    def of(cls, network: Any, op: Any) -> GlueKey:
        """The key of glue op ``op`` of ``network`` (convbench.spec.network)."""
        shape = tuple(int(d) for d in network.shape(op.inputs[0]))
        pooled = op.kind in ("maxpool", "avgpool")
        return cls(op.kind, shape, len(op.inputs), op.k if pooled else 0,  # type: ignore[arg-type]
                   op.s if pooled else 1, op.p if pooled else 0,
                   in_place_input(network, op) is not None)


def in_place_input(network: Any, op: Any) -> int | None:
    """The input an elementwise glue op (relu, relu6, add) writes its result over: the first
    one no other op reads that is neither the network's input nor its output; None for a
    pool (its output has another shape) or when every input is read elsewhere."""
    if op.kind not in ("relu", "relu6", "add"):
        return None
    for i, name in enumerate(op.inputs):
        if (name not in (INPUT, network.output) and op.inputs.count(name) == 1
                and len(network.consumers(name)) == 1):
            return i
    return None


def overwritten(network: Any) -> set[str]:
    """The tensors an in-place glue op overwrites (their values after a pass are the op's)."""
    return {op.inputs[i] for op in network.ops
            if (i := in_place_input(network, op)) is not None}


def in_place_first(ins: Sequence[Any], i: int | None) -> list[Any]:
    """``ins`` with the overwritten input first (add is commutative: same sum)."""
    ins = list(ins)
    return ins if i is None else [ins[i], *ins[:i], *ins[i + 1:]]


def network_keys(network: Any) -> list[GlueKey]:
    """The distinct glue keys of a network's ops, in first-use order."""
    return list(dict.fromkeys(GlueKey.of(network, op) for op in network.ops
                              if op.kind != "conv"))


def op_calls(kind: str, ins: Sequence[np.ndarray], out: np.ndarray, layout: str,
             channels: int, k: int = 0, s: int = 1, p: int = 0) -> list[Call]:
    """The calls that run one glue op on buffers held in ``layout`` (what the network pass
    runs, and what ``convbench transforms`` times); ``out`` may be ``ins[0]`` (in place)."""
    if kind in ("relu", "relu6"):
        cap = NO_CAP if kind == "relu" else RELU6_CAP
        return [(clip_below_zero, (flat(ins[0]), flat(out), cap))]
    if kind == "add":
        y = flat(out)
        return [(add_into, (flat(ins[0]), flat(ins[1]), y)),
                *((add_into, (y, flat(more), y)) for more in ins[2:])]
    if kind in ("maxpool", "avgpool"):
        return [(run_pool, (blocked_view(ins[0], layout, channels),
                            blocked_view(out, layout, channels), kind, k, s, p))]
    raise ValueError(f"no glue kernel for op kind {kind!r}")

NO_CAP = np.float32(np.inf)   # relu: clip below only
RELU6_CAP = np.float32(6.0)


def blocked_view(a: np.ndarray, layout: str, channels: int) -> np.ndarray:
    """``a`` (C-contiguous, logical NCHW with ``channels`` channels, held in ``layout``) as
    the 5-d (N, ceil(C/x), H, W, x) view; no copy."""
    if layout == "nchw":
        n, c, h, w = a.shape
        return a.reshape(n, c, h, w, 1)
    if layout == "nhwc":
        n, h, w, c = a.shape
        return a.reshape(n, 1, h, w, c)
    transforms.block_of(layout, channels)   # ValueError for an unknown layout
    return a


def flat(a: np.ndarray) -> np.ndarray:
    """The buffer as 1-d (a view: the buffers here are C-contiguous)."""
    if not a.flags.c_contiguous:
        raise ValueError("glue ops run on C-contiguous buffers")
    return a.reshape(-1)


@numba.njit(parallel=True, cache=True)
def clip_below_zero(x, y, cap):  # pragma: no cover - jitted
    """y = min(max(x, 0), cap) elementwise on flat buffers; NaN stays NaN."""
    for i in numba.prange(x.size):
        v = x[i]
        if v < 0:
            v = 0
        elif v > cap:
            v = cap
        y[i] = v


@numba.njit(parallel=True, cache=True)
def add_into(a, b, y):  # pragma: no cover - jitted
    """y = a + b elementwise on flat buffers (y may be a)."""
    for i in numba.prange(y.size):
        y[i] = a[i] + b[i]


@numba.njit(parallel=True, cache=True)
def pool(x, y, k, s, p, is_max):  # pragma: no cover - jitted
    """k x k max or average pool, stride s, padding p, of 5-d x (N, CB, H, W, X) into y
    (N, CB, OH, OW, X).  Max pool ignores padding (-inf); average pool counts it as zeros
    and divides by k * k (PyTorch's ``count_include_pad=True``, as the reference does).
    Parallel over output rows (image, channel block, output row)."""
    n, cb, h, w, xb = x.shape
    oh, ow = y.shape[2], y.shape[3]
    scale = np.float32(1.0 / (k * k))
    for row in numba.prange(n * cb * oh):
        i = row // (cb * oh)
        c = (row // oh) % cb
        r = row % oh
        h0 = r * s - p
        for q in range(ow):
            w0 = q * s - p
            out = y[i, c, r, q]
            for v in range(xb):
                out[v] = -np.inf if is_max else 0.0
            for dy in range(k):
                yy = h0 + dy
                if yy < 0 or yy >= h:
                    continue
                for dx in range(k):
                    xx = w0 + dx
                    if xx < 0 or xx >= w:
                        continue
                    src = x[i, c, yy, xx]
                    if is_max:
                        for v in range(xb):
                            # a NaN input wins and, once in, stays (NaN > v is false)
                            if src[v] > out[v] or src[v] != src[v]:
                                out[v] = src[v]
                    else:
                        for v in range(xb):
                            out[v] += src[v]
            if not is_max:
                for v in range(xb):
                    out[v] *= scale


def run_pool(x5: np.ndarray, y5: np.ndarray, kind: str, k: int, s: int, p: int) -> None:
    """Pool between two 5-d views (:func:`blocked_view`); ``kind`` is maxpool or avgpool."""
    pool(x5, y5, k, s, p, kind == "maxpool")
