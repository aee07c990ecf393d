"""What other layers' tuning says about a new layer's candidates: the tuner's transfer prior.

``convbench tune --transfer`` measures, per layer group, only the candidates this prior
ranks best -- as many as keep the group's whole halving within a fifth of its candidate
count (:func:`field_size`) -- instead of all of them in round 0.  The idea is AutoTVM's
transfer learning (a cost model fitted on other workloads' logs ranks a new workload's
configurations before any is measured) in its simplest form, a nearest-neighbour rule
with no fitted parameters:

- the evidence is every round-0 record of *other* layer groups (the same tune's earlier
  groups, and ``--prior FILE``'s records): round 0 is the one round where all of a group's
  candidates ran at one timing, so ``median / the group's best round-0 median`` (the
  candidate's *slowdown*) compares them fairly;
- a candidate's predicted slowdown is a weighted geometric mean over the evidence groups of
  the slowdown of the nearest configuration of its own family (algorithm and layout) there,
  times ``2 ** distance`` (:func:`param_distance`: octaves between numeric knobs, 1 per
  other differing knob), so an exact match counts as measured and a far one barely; with
  the padding each computes taken out there and put back here (:data:`Work`);
- a group weighs ``2 ** -layer_distance`` (octaves between spatial size and channel
  counts), a quarter of that when its stride differs; only groups with the same kernel
  size and the same depthwise-or-not count (what decides which algorithms apply) -- with
  none such, or none within 4 octaves (:data:`MIN_WEIGHT`), the layer gets no prior and a
  full halving, and becomes evidence for the next;
- a family with no evidence in the class, or only far evidence (weights summing below
  :data:`MIN_WEIGHT`), is explored, not guessed: its first candidate (the space's default
  comes first) is ranked as if it tied the best;
- a family with thin evidence (weights summing below :data:`SURE_WEIGHT`: nothing of its
  stride within 2 octaves) is ranked from it, but its best-ranked candidate is measured
  in round 0 whether or not it made the top (:attr:`Ranking.unsure`) unless it is
  predicted more than :data:`UNSURE_SLOWDOWN` slower than the best: a family's rank can
  turn between layers that far apart, though not by orders of magnitude; so is the
  best-ranked candidate with each value of a categorical knob (a tile "2x4", a bool)
  that its better-ranked ones lack: numeric knobs are graded by octaves, but two tiles
  are only equal or not, and far evidence cannot say which other tile is next best;
- round 0 also measures the best-ranked candidate of each layout the global plan needs
  (NCHW, NHWC, each blocked layout the top reads or writes, or one blocked layout; each
  read and written) where the top lacks one (:func:`layout_cover`): a few more short
  measurements per group.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from convbench.kernels.layouts import block_size
from convbench.spec.descriptor import parse_descriptor
from convbench.spec.problem import ConvProblem
from convbench.tune import schedule
from convbench.tune.records import short_round_score

FRACTION = 5    # a transfer-guided group takes at most 1/FRACTION of its candidate count
MIN_FIELD = 3   # ... but round 0 never measures fewer than this many (fewer if fewer exist)
STRIDE_WEIGHT = 0.25   # a group of another stride counts this much (Winograd needs stride 1)
# Evidence weighing less than this (a group more than 4 octaves away, or 2 at another
# stride) is no prior on its own: tuning VGG-16 with --transfer, conv1_2 (64 -> 64 channels)
# was ranked from conv1_1 alone (3 -> 64, 4.4 octaves), where Winograd loses; it never
# measured Winograd, nor did the layers ranked after it, and the 3x3 picks ran 1.4-3.6x
# slower than the Winograd picks once conv1_2 had its full halving.  (2^-3 would also give
# ResNet-50's six stride-2 layers full halvings: their nearest evidence weighs 2^-4.)
MIN_WEIGHT = 2.0 ** -4
# Evidence weighing less than this is a ranking, not a verdict: each family judged only on
# it gets its best-ranked candidate measured.  Tuning ResNet-50 with --transfer (Zen 5 host,
# 1 thread, warm), res5b_branch2b (7 x 7, 512 -> 512) knew Winograd only from res4b_branch2b
# (14 x 14, 256 -> 256: 4 octaves), where F(2x2) ran 2.6x slower than F(4x4); F(2x2) was never
# measured and the tune picked F(4x4) at 912 us, where the grid's best is F(2x2) at 645 us:
# at 49 output pixels the layer streams its transformed weights, (m + 2)^2 / 9 of the raw
# 9.4 MB (F(4x4) 37.7 MB, F(2x2) 16.8 MB), so the smaller tile wins there.
SURE_WEIGHT = 2.0 ** -2
# ... but a family predicted this much slower than the best is not checked: with no bound the
# check measured ResNet-50's direct kernels (24-80x slower than nchwc) on every 1 x 1 layer,
# 18% more measurements over the network's transfer-tuned layers; F(2x2) was predicted 2.6x.
UNSURE_SLOWDOWN = 4.0
# CATEGORICAL: a thin family also has each value of a non-numeric knob measured once.
# MobileNet V1's and V2's stride-2 depthwise layers (nearest same-stride evidence 3 octaves
# away) kept the tiles their far evidence ranked first: tuning with --transfer (Zen 5
# host, warm), conv_dw_12 picked 2 x 2 at 8.35 us where the depthwise-only full halving
# found 1 x 1 at 6.68 (0.84 of ONNX Runtime against 1.04).  Replayed on session 38's
# transfer tunes (each layer's field from the records before it) and judged by a full
# halving's round 0: the best tile in the stride-2 layers' fields went from up to 1.24-1.32x
# the round's best (MobileNet V1 and V2, 1 and 2 threads) to at most 1.03x, for 7-17% more
# measurements over those networks, 3.6% over ResNet-50 and 0.8% over VGG-16 (numeric
# knobs, a bool unroll_ker).  Tuned again with it (same host, warm, --transfer), the
# stride-2 depthwise picks (four layers each, 1 and 2 threads) ran 0.93-1.05 of ORT in the
# run after (conv_dw_12 picked 1 x 1 at both), for 16% (V1) and 8% (V2) more measurements.


@dataclass(frozen=True)
class Config:
    """A candidate as the prior compares it: its family and its knobs."""

    algorithm: str
    layout: str
    params: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, algorithm: str, layout: str, params: Mapping[str, Any]) -> Config:
        return cls(algorithm, layout, tuple(sorted(params.items())))

    @property
    def family(self) -> tuple[str, str]:
        return self.algorithm, self.layout


def conv_class(p: ConvProblem) -> tuple[int, int, bool, bool]:
    """What must match for one layer's ranking to say something about another's: the
    kernel and depthwise or not decide which algorithms apply at all, and pointwise or not
    (1 x 1, stride 1, unpadded) which code runs them -- a pointwise layer is one GEMM over
    the pixel plane (nchwc tiles the whole plane, im2col unfolds nothing), a strided 1 x 1
    one is not.  Tuning ResNet-50 (Zen 3 host, 1 thread, warm) with the strided 1 x 1 layers
    in the class, res4a_branch2c (256 -> 1024, 14 x 14) was ranked mostly by res4a_branch1
    (512 -> 1024, stride 2: weight 2^-3 against 2^-5 and 2^-6 for the pointwise layers
    before it), whose row tiles along 14-wide rows favour reg_n 2 and 4; the 6 x 16 plane
    tiles the pointwise layers before it had picked ranked 10th and were never measured."""
    return p.kh, p.kw, p.g > 1, p.is_pointwise


def group_weight(problem: ConvProblem, other: ConvProblem) -> float:
    """How much ``other``'s ranking counts for ``problem`` (0: not at all)."""
    if conv_class(other) != conv_class(problem):
        return 0.0
    same_stride = (other.sh, other.sw) == (problem.sh, problem.sw)
    return 2.0 ** -layer_distance(problem, other) * (1.0 if same_stride else STRIDE_WEIGHT)


def layer_distance(a: ConvProblem, b: ConvProblem) -> float:
    """Octaves between two layers' output area, input channels and output channels."""
    return sum(abs(math.log2(x / y)) for x, y in ((a.oh * a.ow, b.oh * b.ow),
                                                  (a.ic // a.g, b.ic // b.g), (a.oc, b.oc)))


def param_distance(a: Config, b: Config) -> float:
    """Octaves between numeric knobs of one family, plus one per other knob that differs."""
    left, right = dict(a.params), dict(b.params)
    total = 0.0
    for name in left.keys() | right.keys():
        x, y = left.get(name), right.get(name)
        if graded(x) and graded(y):
            total += abs(math.log2(float(x) / float(y)))   # type: ignore[arg-type]
        elif x != y:
            total += 1.0
    return total


def graded(value: Any) -> bool:
    """A knob value the prior grades by octaves; any other (a tile "2x4", a bool) is only
    equal or not."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


Work = Callable[[Config, ConvProblem], float]
"""A configuration's multiply-adds per needed one on a layer (the algorithm's ``work_ratio``:
zero-padded channel blocks).  A slowdown measured on another layer is divided by the
configuration's padding there and multiplied by its padding here.  Tuning MobileNet V2 with
--transfer (Zen 5 host, 1 thread, warm), block_1_expand (16 -> 96 channels) was ranked from
expanded_conv_project (32 -> 16), where nchwc's oc_bn = 32 computes twice the outputs and ran
1.67x the best: none of the 20 measured had oc_bn = 32, and the tune kept ic_bn 8 / oc_bn 16
at 186 us where the grid's best, ic_bn 16 / oc_bn 32 (no padding at 96), ran 157 us."""


def no_padding(config: Config, problem: ConvProblem) -> float:
    return 1.0


@dataclass(frozen=True)
class Evidence:
    """One other layer group's round 0: its layer and each configuration's slowdown."""

    problem: ConvProblem
    slowdown: Mapping[Config, float]


def evidence(records: Iterable[Mapping[str, Any]]) -> list[Evidence]:
    """Round-0 evidence per layer group (descriptor, threads, width, cache, host) of ok
    records; a group with a single ok candidate says nothing about ranking and is left out."""
    groups: dict[tuple, dict[Config, float]] = {}
    for r in records:
        score = short_round_score(r)
        if r.get("round") != 0 or score is None:
            continue
        key = (r["descriptor"], r["threads"], r["vector_width"], r["cache"], r["host"])
        config = Config.of(r["algorithm"], r["layout"], r.get("params") or {})
        # a later line of the same variant wins: it was measured again
        groups.setdefault(key, {})[config] = score
    found = []
    for key, times in groups.items():
        if len(times) < 2:
            continue
        best = min(times.values())
        found.append(Evidence(parse_descriptor(key[0]),
                              {c: t / best for c, t in times.items()}))
    return found


@dataclass(frozen=True)
class Ranking:
    """The prior's verdict on one layer's candidates (indices into them)."""

    order: list[int]     # most to least promising
    exploring: set[int]  # an unseen family's first, ranked as a tie with no evidence behind it
    # the best-ranked of each family with thin evidence (SURE_WEIGHT), and the best-ranked
    # with each categorical knob value the family's better-ranked ones lack (CATEGORICAL)
    unsure: set[int]


def rank(problem: ConvProblem, candidates: Sequence[Config],
         known: Sequence[Evidence], work: Work = no_padding) -> Ranking | None:
    """``candidates`` from most to least promising for ``problem``, with those to explore
    and those to check (:class:`Ranking`); None when no evidence group has its kernel and
    depthwise-ness (no prior: measure them all)."""
    weighted = [(e, group_weight(problem, e.problem)) for e in known]
    weighted = [(e, w) for e, w in weighted if w > 0]
    if not weighted or max(w for _, w in weighted) < MIN_WEIGHT:
        return None
    explored: set[tuple[str, str]] = set()
    exploring: set[int] = set()
    thin: set[tuple[str, str]] = set()
    scores = []
    for config in candidates:
        num = den = 0.0
        here = math.log2(work(config, problem))
        for e, w in weighted:
            near = [(param_distance(config, c), s, c) for c, s in e.slowdown.items()
                    if c.family == config.family]
            if not near:
                continue
            distance, slowdown, measured = min(near, key=lambda n: n[:2])
            there = math.log2(work(measured, e.problem))
            num += w * (math.log2(slowdown) - there + here + distance)
            den += w
        if den >= MIN_WEIGHT:
            scores.append(num / den)
            if den < SURE_WEIGHT:
                thin.add(config.family)
        elif config.family not in explored:      # an unseen family: try its first one
            explored.add(config.family)
            exploring.add(len(scores))
            scores.append(0.0)
        else:
            scores.append(math.inf)
    order = sorted(range(len(candidates)), key=lambda i: scores[i])
    unsure: set[int] = set()
    seen: dict[tuple[str, str], set[tuple[str, Any]]] = {}
    for i in order:
        config = candidates[i]
        if config.family not in thin or scores[i] > math.log2(UNSURE_SLOWDOWN):
            continue
        values = {(k, v) for k, v in config.params if not graded(v)}
        had = seen.get(config.family)
        if had is None or not values <= had:   # the family's first, or a value it lacks
            unsure.add(i)
            seen.setdefault(config.family, set()).update(values)
    return Ranking(order, exploring, unsure)


def layout_cover(order: Sequence[int], layouts: Sequence[tuple[str, str]],
                 size: int, exploring: Collection[int] = (),
                 neighbours: Collection[str] = (), unsure: Collection[int] = ()) -> list[int]:
    """Round 0's field: the ``size`` best-ranked of ``order`` (indices into ``layouts``, each
    candidate's (read, written) activation layouts) and the ``unsure`` ones (each thinly
    evidenced family's best-ranked, :class:`Ranking`), plus the best-ranked candidate of each
    *cover kind* the top lacks: reading and writing NCHW, NHWC, each blocked NCHW[x]c layout
    a top candidate reads or writes or ``neighbours`` holds (the blocked layouts the tuned
    variants of the network's other layers read or write), and one blocked layout where
    there is none of these.  The
    global layout plan trades a layer's time against its neighbours' transforms, so it
    needs each layer measured in layouts its neighbours can pass on without one, and the
    single-layout plans it is compared with (all-NCHW, all-NHWC, all-NCHW[x]c) need a
    candidate of every layer in theirs.  Tuning MobileNet V1 at 2 threads with the top
    only, conv_pw_2 and conv_pw_3 kept nchwc candidates reading nchw32c alone: the plan paid
    0.52 ms of transforms around them and neither single-layout plan existed; with one
    blocked layout of any x, conv_pw_13 kept nchw16c -> nchw32c and nchw32c -> nchw32c
    only, and no one-block plan existed (the rest of the network ran nchw16c); with the
    blocks of the top alone, a cold-weights tune at 1 thread left conv_pw_12 with nchw32c
    and NHWC candidates, and no one-block plan existed either: hence ``neighbours``.

    A candidate in ``exploring`` (an unseen family's first, :func:`rank`) covers
    no kind: it was picked to learn about its family, not as that layout's best.  Tuning
    MobileNet V2 from MobileNet V1's records, block_1_depthwise explored direct/nhwc
    (9.08 ms), which then stood for NHWC, and its depthwise NHWC tiles were never measured:
    the all-NHWC plan ran 30.9 ms against the plan's 12.0."""
    def kind(pair: tuple[str, str]) -> str | None:
        src, dst = pair
        return src if src == dst else None

    field = list(order[:size])
    field += [i for i in order[size:] if i in unsure]
    known = [i for i in field if i not in exploring]
    have = {kind(layouts[i]) for i in known}
    want = ({"nchw", "nhwc"} | {lay for i in known for lay in layouts[i] if block_size(lay)}
            | {lay for lay in neighbours if block_size(lay)})
    one_block = not any(block_size(w) for w in want)   # the top has none: cover any one
    for i in order[size:]:
        k = kind(layouts[i])
        if k is None or k in have or i in exploring:
            continue
        blocked = block_size(k) is not None
        if k in want or (one_block and blocked):
            one_block = one_block and not blocked
            have.add(k)
            field.append(i)
    return field


def field_size(n: int) -> int:
    """How many of ``n`` candidates round 0 measures under the prior: the most whose whole
    halving (:func:`.schedule.sizes`) takes at most n / FRACTION measurements."""
    m = min(n, MIN_FIELD)
    while m < n and schedule.measurements_for(m + 1) * FRACTION <= n:
        m += 1
    return m
