"""Strassen for 1x1 convolutions (MNN; seed 003): recursive 2x2 block split of the GEMM.

A 1x1, stride-1, unpadded convolution is one GEMM per image, in NCHW
Y (OC x P) = W (OC x IC) @ X (IC x P), P = OH*OW.  One Strassen level (the Winograd
form MNN uses: 7 block products, 15 block additions; Boyer et al. 2009) replaces the 8
half-size products by 7.  The 4 additions on weight blocks are done once in ``build``
(every level's left operands are precomputed, (7/4)^depth times the weights); at run time
each level adds 4 input blocks and 7 output blocks.  Leaves are BLAS sgemm or our packed
GEMM (its left operands prepacked).  Dimensions are zero-padded to multiples of 2^depth.

Whether a level pays is :func:`level_cost`, MNN's cost model (made explicit): ``depth``
"auto" recurses while it says so (at most :data:`MAX_DEPTH` levels); 0, 1, 2 force it.
Strassen's extra additions amplify rounding: see ``ERROR_GROWTH``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from convbench.kernels.base import PERFORMED_FLOPS, Algorithm, Param, ParamValue, Prepared
from convbench.kernels.buffers import packed_weights, page_aligned_empty, page_aligned_zeros
from convbench.kernels.gemm import GEMM_BACKEND, Blocking, hot_gemm, own_blocking
from convbench.spec.problem import ConvProblem

MAX_DEPTH = 3
MNN_PENALTY = 1.5   # MNN's CPU penalty on additions (memory-bound) against multiplies

# Accuracy.  Strassen's error bound is normwise: an output's error scales with the norms of
# the blocks mixed into it, not with that output's own sum of |x*w| that the reference's
# componentwise rule uses.  The two agree only when every output sums many channels.
# Worst err/bound measured with the plain rule (growth 1) on uniform [-1, 1) inputs, 150
# random 1x1 shapes per depth plus ResNet-50's 1x1 layers:
#   IC:        1       2     3     8     16    32    64   ResNet-50 (IC >= 64)
#   depth 1  5359     78    6.0   0.85  0.42  0.36  0.17  0.29
#   depth 2  89762   127   13.1   3.5   1.75  0.55  0.31  0.56
#   depth 3  527779  173   87     5.4   2.5   1.13  0.80  1.17
# So a depth d applies only while every leaf still sums MIN_LEAF_CHANNELS channels
# (IC >= 4 * 2^d), and ERROR_GROWTH = 3 covers the worst measured (1.75) with margin while
# a dropped block product (error ~ the output itself) still fails by orders of magnitude.
MIN_LEAF_CHANNELS = 4
ERROR_GROWTH = 3.0


@dataclass(frozen=True)
class LevelCost:
    """One Strassen level of C (h x e) = A (h x l) @ B (l x e) in MNN's terms:
    e = plane (P), l = reduction (IC), h = output channels (OC)."""

    saved: float        # multiply-adds saved: one of the 8 half-size block products
    extra: float        # penalised element additions the level costs
    pays: bool


def level_cost(e: int, l: int, h: int, penalty: float = MNN_PENALTY) -> LevelCost:  # noqa: E741
    """MNN's rule for one level (StrassenMatmulComputor; seed 003 gives only the A term).

    saved = eSub*lSub*hSub, the product skipped;
    extra = penalty * (4*eSub*lSub  [input-side block sums]
                       + 4*lSub*hSub [weight-side sums; MNN counts them, we precompute]
                       + 7*eSub*hSub [output-side block sums]).
    The level pays when saved > extra.  (MNN rounds hSub up to its NR panel; omitted.)
    The seed's empirical rule "only when IC and OC >= 256" is what this host measures
    against, not part of the model."""
    es, ls, hs = e / 2, l / 2, h / 2
    saved = es * ls * hs
    extra = penalty * (4 * es * ls + 4 * ls * hs + 7 * es * hs)
    return LevelCost(saved, extra, saved > extra)


def max_accurate_depth(ic: int) -> int:
    """Deepest level whose leaves still sum ``MIN_LEAF_CHANNELS`` channels (see above)."""
    depth = 0
    while ic >= MIN_LEAF_CHANNELS * 2 ** (depth + 1):
        depth += 1
    return depth


def auto_depth(e: int, l: int, h: int, max_depth: int = MAX_DEPTH) -> int:  # noqa: E741
    """Levels MNN's model takes: recurse while the current level pays (and stays accurate)."""
    depth = 0
    max_depth = min(max_depth, max_accurate_depth(l))
    while depth < max_depth and min(e, l, h) >= 2 and level_cost(e, l, h).pays:
        e, l, h = -(-e // 2), -(-l // 2), -(-h // 2)  # noqa: E741 (MNN names)
        depth += 1
    return depth


def _quadrants(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r, c = m.shape[0] // 2, m.shape[1] // 2
    return m[:r, :c], m[:r, c:], m[r:, :c], m[r:, c:]


@dataclass
class _Left:
    """A left operand (weights) with, below it, the 7 left operands of its next level."""

    matrix: np.ndarray
    children: list[_Left]
    packed: np.ndarray | None = None      # for the own GEMM at the leaves


def _left_tree(a: np.ndarray, depth: int, blocking: Blocking | None) -> _Left:
    if depth == 0:
        packed = packed_weights(blocking.pack_a(a)) if blocking is not None else None
        return _Left(a, [], packed)
    a11, a12, a21, a22 = _quadrants(a)
    s1 = a21 + a22
    s2 = s1 - a11
    s3 = a11 - a21
    s4 = a12 - s2
    # order of the products M1..M7 (see _multiply)
    ops = [a11, a12, s4, a22, s1, s2, s3]
    return _Left(a, [_left_tree(packed_weights(o), depth - 1, blocking) for o in ops])


class _Level:
    """Scratch of one recursion level: two product blocks and one input-side block."""

    def __init__(self, h: int, l: int, e: int):  # noqa: E741
        self.p = page_aligned_empty((h // 2, e // 2))
        self.q = page_aligned_empty((h // 2, e // 2))
        self.t = page_aligned_empty((l // 2, e // 2))

    @property
    def nbytes(self) -> int:
        return self.p.nbytes + self.q.nbytes + self.t.nbytes


class StrassenNCHW(Prepared):
    in_layout = out_layout = "nchw"

    def __init__(self, problem: ConvProblem, w: np.ndarray, depth: int,
                 blocking: Blocking | None):
        p = self.p = problem
        self.depth = depth
        self.blocking = blocking
        unit = 2 ** depth
        e, l, h = p.oh * p.ow, p.ic, p.oc  # noqa: E741
        self.e, self.l, self.h = e, l, h
        self.ep, self.lp, self.hp = (-(-v // unit) * unit for v in (e, l, h))
        wpad = page_aligned_zeros((self.hp, self.lp))
        wpad[:h, :l] = np.asarray(w, np.float32).reshape(h, l)
        self.left = _left_tree(packed_weights(wpad), depth, blocking)
        self.levels = [_Level(self.hp >> d, self.lp >> d, self.ep >> d) for d in range(depth)]
        self.padded = (self.ep, self.lp, self.hp) != (e, l, h)
        self.xpad = page_aligned_zeros((self.lp, self.ep)) if self.padded else None
        self.ypad = page_aligned_empty((self.hp, self.ep)) if self.padded else None
        self.bpack = None
        if blocking is not None:
            leaf_l, leaf_e = self.lp >> depth, self.ep >> depth
            self.bpack = page_aligned_empty(blocking.packed_b_shape(leaf_l, leaf_e))
        self.packed_weight_bytes = _tree_bytes(self.left)
        self.workspace_bytes = (sum(lv.nbytes for lv in self.levels)
                                + sum(a.nbytes for a in (self.xpad, self.ypad, self.bpack)
                                      if a is not None))

    def _leaf(self, a: _Left, b: np.ndarray, out: np.ndarray) -> None:
        if self.blocking is None:
            np.matmul(a.matrix, b, out=out)
        else:
            self.blocking.pack_b(b, self.bpack)
            self.blocking.multiply_packed(a.packed, self.bpack, out, a.matrix.shape[1])

    def _multiply(self, a: _Left, b: np.ndarray, c: np.ndarray, level: int) -> None:
        """c = a @ b, Strassen-Winograd below ``level`` (schedule with 3 scratch blocks)."""
        if not a.children:
            self._leaf(a, b, c)
            return
        a11, a12, s4, a22, s1, s2, s3 = a.children
        b11, b12, b21, b22 = _quadrants(b)
        c11, c12, c21, c22 = _quadrants(c)
        scratch = self.levels[level]
        p, q, t = scratch.p, scratch.q, scratch.t
        nxt = level + 1
        self._multiply(a11, b11, p, nxt)               # M1
        self._multiply(a12, b21, c11, nxt)             # M2
        c11 += p                                       # C11 = M1 + M2
        np.subtract(b12, b11, out=t)                   # T1
        self._multiply(s1, t, c22, nxt)                # M5
        np.subtract(b22, t, out=t)                     # T2 = B22 - T1
        self._multiply(s2, t, q, nxt)                  # M6
        p += q                                         # U2 = M1 + M6
        t -= b21                                       # T4 = T2 - B21
        self._multiply(a22, t, q, nxt)                 # M4
        np.subtract(p, q, out=c21)                     # U2 - M4
        np.add(p, c22, out=c12)                        # U4 = U2 + M5
        np.subtract(b22, b12, out=t)                   # T3
        self._multiply(s3, t, q, nxt)                  # M7
        c21 += q                                       # C21 = U2 + M7 - M4
        c22 += p                                       # C22 = M5 + U2 + M7
        c22 += q
        self._multiply(s4, b22, q, nxt)                # M3
        c12 += q                                       # C12 = U4 + M3

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        p = self.p
        for n in range(p.mb):
            xm = x[n].reshape(self.l, self.e)
            ym = y[n].reshape(self.h, self.e)
            if not self.padded:
                self._multiply(self.left, xm, ym, 0)
                continue
            self.xpad[:self.l, :self.e] = xm
            self._multiply(self.left, self.xpad, self.ypad, 0)
            ym[:] = self.ypad[:self.h, :self.e]

    def hot_kernels(self) -> tuple[object, ...]:
        return hot_gemm(self.blocking)

    def info(self) -> dict[str, ParamValue]:
        plain = self.e * self.l * self.h
        leaves = 7 ** self.depth * ((self.ep * self.lp * self.hp) >> (3 * self.depth))
        first = level_cost(self.e, self.l, self.h)
        # the leaves' multiply-adds (zero padding included: the leaf GEMMs compute it); the
        # block additions are left out, as memory-bound element-wise work without FMAs
        return {"depth": self.depth, "macs_per_image": leaves, "macs_saved": plain - leaves,
                "macs_ratio": round(leaves / plain, 4),
                PERFORMED_FLOPS: 2 * self.p.mb * leaves,
                "model_saved": first.saved, "model_extra": first.extra}


def _tree_bytes(node: _Left) -> int:
    """Bytes of the leaf operands the run reads (the weights in Strassen's form)."""
    if not node.children:
        return node.packed.nbytes if node.packed is not None else node.matrix.nbytes
    return sum(_tree_bytes(c) for c in node.children)


def _applies(problem: ConvProblem, layout: str, params: Mapping[str, ParamValue]
             ) -> str | None:
    if not problem.is_pointwise or problem.g != 1:
        return "Strassen here covers 1x1, stride 1, unpadded, ungrouped convolutions only"
    depth = resolve_depth(problem, params.get("depth", "auto"))
    if depth > max_accurate_depth(problem.ic):
        return (f"depth {depth} needs IC >= {MIN_LEAF_CHANNELS * 2 ** depth}: with fewer "
                "channels Strassen's normwise error exceeds the componentwise tolerance")
    return None


def resolve_depth(problem: ConvProblem, depth: ParamValue) -> int:
    if depth == "auto":
        return auto_depth(problem.oh * problem.ow, problem.ic, problem.oc)
    return int(depth)


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    depth = resolve_depth(problem, params.get("depth", "auto"))
    return StrassenNCHW(problem, w, depth, own_blocking(params))


ALGORITHMS = [
    Algorithm(
        name="strassen",
        title="Strassen 1x1",
        source="MNN (Jiang et al. 2020), StrassenMatmulComputor; seed 003",
        layouts=("nchw",),
        build=_build,
        # Any forced depth builds; one too deep for the layer's IC is skipped with a
        # reason (_applies).  Six levels need IC >= 64 x MIN_LEAF_CHANNELS already.
        params=(Param("depth", ("auto", 0, 1, 2), "auto",
                      "Strassen levels: auto = MNN's cost model, or forced",
                      allowed=("auto", *range(7))),
                GEMM_BACKEND),
        applies=_applies,
        error_growth=ERROR_GROWTH,
        notes="Strassen-Winograd (7 products, 15 additions per level) on the 1x1 GEMM; "
              "weight-side sums precomputed; dims zero-padded to multiples of 2^depth.",
    )
]
