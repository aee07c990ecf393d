"""The costs a layout plan is made from, read from what convbench measured.

Conv candidates come from tuning records (JSON lines of ``convbench tune``: a candidate's
time is the median of the last round it reached) or from a run's ``results.parquet`` (its
median), one thread count, cache mode and optionally vector width at a time; a candidate's
(in, out) layouts come from its algorithm
(:meth:`convbench.kernels.base.Algorithm.activation_layouts`).  Transform costs come from
``transforms.parquet`` and glue op costs from ``glue.parquet`` (``convbench transforms``).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from convbench.plan.layouts import Candidate, PlanError, Shape


@dataclass(frozen=True)
class Measured:
    """One measured variant of one layer, whatever file it came from."""

    layer: str
    variant: str
    algorithm: str
    layout: str
    params: Mapping[str, Any]
    threads: int
    vector_width: str
    cache: str
    seconds: float
    host: str = ""
    reference_s: float = math.nan   # the in-run reference's median beside it (median/ref_ratio)
    final: bool = True              # measured at the suite's own timing (a tune's last round)


@dataclass(frozen=True)
class CostTable:
    """Candidates per layer at one thread count and cache mode, and where they came from;
    ``reference_s``: the median of their in-run reference medians (how fast the machine
    ran while they were measured; NaN where unknown)."""

    costs: dict[str, list[Candidate]]
    threads: int
    cache: str
    hosts: tuple[str, ...]
    reference_s: float = math.nan


def _reference(median_s: float, ref_ratio: Any) -> float:
    try:
        ratio = float(ref_ratio)
    except (TypeError, ValueError):
        return math.nan
    return median_s / ratio if ratio > 0 and math.isfinite(ratio) else math.nan


def read_records(path: Path) -> list[Measured]:
    """Tuning records: per (layer, variant, threads, width, cache) the last round's median.
    Read as :func:`convbench.tune.records.decoded_lines` reads them (a torn last line, which
    ``tune`` leaves when killed, is skipped), but leniently: fields a hand-written cost
    table lacks take their defaults."""
    from convbench.errors import ConvbenchError
    from convbench.tune import records

    if not Path(path).is_file():
        raise PlanError(f"{path}: no such records file")
    last: dict[tuple, tuple[int, Measured]] = {}
    try:
        decoded = list(records.decoded_lines(path))
    except ConvbenchError as exc:
        raise PlanError(str(exc)) from None
    for number, r in decoded:
        try:
            if r.get("status", "ok") != "ok":
                continue
            params = r.get("params") or {}
            m = Measured(r["layer"], r.get("variant") or _variant_id(r["algorithm"],
                                                                     r["layout"], params),
                         r["algorithm"], r["layout"], params, int(r["threads"]),
                         str(r.get("vector_width", "auto")), str(r.get("cache", "warm")),
                         float(r["median_s"]), str(r.get("host", "")),
                         _reference(float(r["median_s"]), r.get("ref_ratio")),
                         bool(r.get("final", True)))
            round_ = int(r.get("round", 0))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise PlanError(f"{path}:{number}: not a tuning record ({exc})") from None
        key = (m.layer, m.variant, m.threads, m.vector_width, m.cache)
        if key not in last or round_ >= last[key][0]:
            last[key] = (round_, m)
    return [m for _, m in last.values()]


def read_results(directory: Path) -> list[Measured]:
    """A run's results: every ok case's median."""
    from convbench.kernels.base import Variant
    from convbench.results.load import load_results

    results = load_results(directory, allow_partial=True)
    host = str(results.environment.get("host", ""))
    table = results.table[results.table.status == "ok"]
    return [Measured(r.layer, r.variant, r.algorithm, r.layout,
                     Variant.parse(r.variant).param_dict, int(r.threads), str(r.vector_width),
                     str(r.cache), float(r.median_s), host,
                     _reference(float(r.median_s), getattr(r, "ref_ratio", None)))
            for r in table.itertuples()]


def _variant_id(algorithm: str, layout: str, params: Mapping[str, Any]) -> str:
    from convbench.kernels.base import Variant

    return Variant.of(algorithm, layout, params).id


def _one(values: set, given: Any, what: str, option: str) -> Any:
    if given is not None:
        if given not in values:
            raise PlanError(f"no measurements at {what} {given} (have "
                            f"{', '.join(map(str, sorted(values)))})")
        return given
    if len(values) != 1:
        raise PlanError(f"measurements at several {what}s ({', '.join(map(str, sorted(values)))}"
                        f"): choose one with {option}")
    return next(iter(values))


def cost_table(measured: Iterable[Measured], threads: int | None = None,
               cache: str | None = None, vector_width: str | None = None) -> CostTable:
    """Candidates per layer at one thread count and cache mode (asked for, or the only one
    measured); at several vector widths each width is its own candidate."""
    from convbench.kernels import registry

    rows = list(measured)
    if not rows:
        raise PlanError("no successful measurements to plan from")
    threads = _one({m.threads for m in rows}, threads, "thread count", "--threads")
    # `tune --cache auto` may tune each thread count in its own mode
    cache = _one({m.cache for m in rows if m.threads == threads}, cache, "cache mode",
                 "--cache")
    rows = [m for m in rows if m.threads == threads and m.cache == cache
            and vector_width in (None, m.vector_width)]
    widths = {m.vector_width for m in rows}
    algorithms = registry.algorithms()
    costs: dict[str, list[Candidate]] = {}
    for m in rows:
        if m.algorithm not in algorithms:
            raise PlanError(f"layer {m.layer}: unknown algorithm {m.algorithm!r}")
        src, dst = algorithms[m.algorithm].activation_layouts(m.layout, m.params)
        name = m.variant if len(widths) == 1 else f"{m.variant}@{m.vector_width}"
        costs.setdefault(m.layer, []).append(Candidate(name, src, dst, m.seconds))
    # the final rounds' only where there are some: a short early round's reference reads
    # higher (ResNet-50 tune at 2 threads: 0.62 ms over all rounds, 0.49 ms in the final
    # ones), and the network pass times at the suite's own timing
    finals = [m for m in rows if m.final] or rows
    references = [m.reference_s for m in finals if math.isfinite(m.reference_s)]
    return CostTable(costs, threads, cache, tuple(sorted({m.host for m in rows} - {""})),
                     statistics.median(references) if references else math.nan)


def _rows_in_mode(frame: pd.DataFrame, threads: int, cache: str) -> pd.DataFrame:
    """The ok timings at ``threads`` in the mode a plan of ``cache`` conv costs takes
    (``warm``: the warm ones; any cold mode: the cold-weights ones).  A frame from before
    both modes were timed has no ``cache`` column: all its rows."""
    ok = frame[(frame.status == "ok") & (frame.threads == threads)]
    if "cache" in ok.columns:
        ok = ok[ok.cache == ("warm" if cache == "warm" else "cold-weights")]
    return ok


@dataclass
class TransformTable:
    """Transform seconds by (shape, from, to) at one thread count.  A shape not measured
    (a tensor between glue ops, say the pooled output) is estimated from the same pair on
    the measured shape nearest in size, scaled by element count; those are remembered in
    ``estimated`` so the plan can say so."""

    seconds_by_key: dict[tuple[Shape, str, str], float]
    estimated: set[tuple[Shape, str, str]] = field(default_factory=set)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, threads: int,
                   cache: str = "cold-weights") -> TransformTable:
        """The timings at ``threads`` in the cache mode of the conv costs (``warm``: warm,
        else cold-weights), as :meth:`GlueTable.from_frame` takes the glue's; a frame of
        before transforms were timed cold (no ``cache`` column) holds warm timings only."""
        ok = _rows_in_mode(frame, threads, cache)
        if ok.empty:
            raise PlanError(f"no transform timings at {threads} thread(s) (have "
                            f"{', '.join(map(str, sorted(set(frame.threads))))})")
        return cls({((int(r.mb), int(r.c), int(r.h), int(r.w)), r.from_layout, r.to_layout):
                    float(r.median_s) for r in ok.itertuples()})

    @property
    def layouts(self) -> set[str]:
        """Every layout some transform was timed from or to."""
        return {layout for _, src, dst in self.seconds_by_key for layout in (src, dst)}

    def timed_twin(self, shape: Shape | None, layout: str) -> str:
        """``layout``, or a layout timed on ``shape`` that holds the same bytes there
        (NCHW64c of a 64-channel tensor is NHWC), which then stands for it."""
        from convbench.kernels.transforms import same_memory

        timed = self.layouts_at(shape)
        if layout in timed or shape is None:
            return layout
        return next((t for t in sorted(timed) if same_memory(shape[1], layout, t)), layout)

    def layouts_at(self, shape: Shape | None) -> set[str]:
        """The layouts some transform was timed from or to on ``shape``; on a shape with
        none (not measured: its transforms are scaled from another shape), every layout."""
        here = {layout for s, src, dst in self.seconds_by_key if s == shape
                for layout in (src, dst)}
        return here or self.layouts

    def __call__(self, shape: Shape, src: str, dst: str) -> float:
        # a layout holding the same bytes as one timed on this shape costs what that one
        # does (NCHW64c of a 64-channel tensor is NHWC)
        src, dst = self.timed_twin(shape, src), self.timed_twin(shape, dst)
        key = (tuple(shape), src, dst)
        if key in self.seconds_by_key:
            return self.seconds_by_key[key]  # type: ignore[index]
        same_pair = [(s, t) for (s, a, b), t in self.seconds_by_key.items()
                     if (a, b) == (src, dst)]
        if not same_pair:
            raise PlanError(f"no timing of the transform {src} -> {dst} (measure it with "
                            f"convbench transforms SUITE --records RECORDS, which takes "
                            f"every layout the records use, or --layouts ...,{src},{dst})")
        size = _elements(shape)
        nearest, seconds = min(same_pair, key=lambda st: abs(_elements(st[0]) - size))
        self.estimated.add(key)  # type: ignore[arg-type]
        return seconds * size / _elements(nearest)


def with_timed_layouts(costs: Mapping[str, list[Candidate]], transforms: TransformTable,
                       shapes: Mapping[str, tuple[Shape, Shape]] | None = None
                       ) -> tuple[dict[str, list[Candidate]],
                                  list[tuple[Candidate, tuple[str, ...]]]]:
    """The candidates whose in and out layouts both have transform timings on their layer's
    input and output shapes (``shapes``: layer -> (input, output); a layer not in it, or
    none given, is judged by every timed layout), and the rest: ``convbench transforms
    --within`` times only the layouts of the faster variants, and on each shape only those
    read or written there.  The rest come with the layouts they lack timings of.  A layout
    holding the same bytes as a timed one on that shape (NCHW[C]c and NHWC) is as good as
    timed: the plan moves the tensor between them for free."""
    kept: dict[str, list[Candidate]] = {}
    left: list[tuple[Candidate, tuple[str, ...]]] = []
    for layer, cands in costs.items():
        src_shape, dst_shape = (shapes or {}).get(layer, (None, None))
        readable = transforms.layouts_at(src_shape)
        writable = transforms.layouts_at(dst_shape)
        for c in cands:
            untimed = tuple(dict.fromkeys(
                layout for layout, timed, shape in ((c.in_layout, readable, src_shape),
                                                    (c.out_layout, writable, dst_shape))
                if transforms.timed_twin(shape, layout) not in timed))
            if untimed:
                left.append((c, untimed))
            else:
                kept.setdefault(layer, []).append(c)
    return kept, left


def with_epilogues(costs: Mapping[str, list[Candidate]], graph: Any
                   ) -> dict[str, list[Candidate]]:
    """The candidates with the glue op kinds each runs in its stores on its layer
    (``Algorithm.fused_ops``), which the plan then charges nothing where the layouts agree."""
    from convbench.kernels import registry
    from convbench.kernels.base import Variant

    problems = {op.layer: graph.problem(op) for op in graph.ops if op.kind == "conv"}
    out: dict[str, list[Candidate]] = {}
    for layer, cands in costs.items():
        out[layer] = []
        for c in cands:
            variant = Variant.parse(c.variant_id.partition("@")[0])
            fuses = (registry.get(variant.algorithm).fused_ops(problems[layer], variant.layout)
                     if layer in problems else frozenset())
            out[layer].append(dataclasses.replace(c, fuses=fuses))
    return out


def _elements(shape: Iterable[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


@dataclass
class GlueTable:
    """Glue op seconds by (glue key, layout) at one thread count (``glue.parquet`` of
    ``convbench transforms``); called as ``table(op, layout)`` by the plan."""

    graph: Any
    seconds_by_key: dict[tuple[Any, str], float]

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, graph: Any, threads: int,
                   cache: str = "cold-weights") -> GlueTable:
        """The glue timings at ``threads`` in the cache mode of the conv costs (``warm``:
        the warm ones; any cold mode: the cold-weights ones).  A glue.parquet from before
        both were timed has only cold-weights timings, without the column."""
        from convbench.network.glue import GlueKey

        ok = _rows_in_mode(frame, threads, cache)
        if ok.empty:
            raise PlanError(f"no glue op timings at {threads} thread(s) (have "
                            f"{', '.join(map(str, sorted(set(frame.threads))))})")
        return cls(graph, {(GlueKey(str(r.kind), (int(r.mb), int(r.c), int(r.h), int(r.w)),
                                    int(r.inputs), int(r.k), int(r.s), int(r.p),
                                    bool(getattr(r, "in_place", False))),
                            str(r.layout)): float(r.median_s) for r in ok.itertuples()})

    def __call__(self, op: Any, layout: str) -> float:
        from convbench.kernels.transforms import same_memory
        from convbench.network.glue import GlueKey

        key = GlueKey.of(self.graph, op)
        # a layout holding the same bytes as one timed for this op costs what that one does,
        # as for transforms (TransformTable.timed_twin): a candidate writing NCHW64c on a
        # 64-channel tensor is kept where NHWC was timed there, and its add then runs in it
        # (MobileNet V2's block_7_add, 2-thread records of the Zen 3 host: the plan failed)
        if (key, layout) not in self.seconds_by_key:
            twins = sorted(other for k, other in self.seconds_by_key
                           if k == key and same_memory(key.shape[1], layout, other))
            layout = twins[0] if twins else layout
        if (key, layout) not in self.seconds_by_key:
            raise PlanError(f"no timing of glue op {op.name} ({key.kind} on "
                            f"{'x'.join(map(str, key.shape))}) in {layout} (measure it with "
                            f"convbench transforms SUITE --records RECORDS or --layouts "
                            f"...,{layout})")
        return self.seconds_by_key[key, layout]
