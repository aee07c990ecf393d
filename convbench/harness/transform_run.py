"""Measure what a layout plan pays besides its convs: a suite's layout transforms (into
``transforms.parquet``) and its network's glue ops (into ``glue.parquet``), in worker
processes.

Which tensors: every distinct conv input (mb, ic, ih, iw) and output (mb, oc, oh, ow) shape
of the suite's layers (known from the layers alone, no network graph needed).  Which
layouts: NCHW, NHWC and every layout a variant of the suite's sweep reads or writes
(:meth:`convbench.kernels.base.Algorithm.activation_layouts`, so NCHW[x]c for each ic_bn
and oc_bn the sweep tries); every ordered pair of distinct ones on every shape -- or, from
tuning records, per shape only the layouts the records' variants read or write there
(:func:`shape_layouts`).  Each thread count of the
sweep gets ``timing.processes`` worker processes (:mod:`convbench.harness.transform_worker`),
their values pooled as the runner pools a case's, and summarised by :mod:`convbench.stats`.

Glue ops: every distinct :class:`~convbench.network.glue.GlueKey` of the suite's network
graph (none without one), in each of the same layouts (the plan runs a relu, pool or add
in whatever layout its input arrives in).  Transforms and glue ops are each timed warm and
cold-weights (the plan takes the mode its conv costs were measured in).
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from convbench.errors import ConvbenchError
from convbench.harness import affinity, oneshot
from convbench.kernels.layouts import block_size
from convbench.spec.suite import Suite, TimingOptions

WORKER = "convbench.harness.transform_worker"

TRANSFORMS_FILE = "transforms.parquet"
GLUE_FILE = "glue.parquet"
SHAPE_COLUMNS = ("mb", "c", "h", "w")
TIMING_COLUMNS = ("threads", "median_s", "ci_low_s", "ci_high_s", "n_values", "ref_ratio",
                  "loops", "status", "reason", "host")
# cache: each transform, like each glue op, is timed warm and cold-weights (transform_worker)
COLUMNS = (*SHAPE_COLUMNS, "from_layout", "to_layout", "cache", *TIMING_COLUMNS)
GLUE_KEY_COLUMNS = ("kind", *SHAPE_COLUMNS, "inputs", "k", "s", "p", "in_place")
# cache: each glue op is timed warm and cold-weights (transform_worker._glue); the plan
# takes its own mode's
GLUE_COLUMNS = (*GLUE_KEY_COLUMNS, "layout", "cache", *TIMING_COLUMNS)
Shape = tuple[int, int, int, int]


@dataclass(frozen=True)
class LayoutCosts:
    """What ``convbench transforms`` measured: transforms and glue ops (columns
    :data:`COLUMNS` and :data:`GLUE_COLUMNS`; no glue rows for a suite without a graph)."""

    transforms: pd.DataFrame
    glue: pd.DataFrame


def tensor_shapes(suite: Suite) -> list[Shape]:
    """Every distinct conv input and output shape of the suite's layers, sorted."""
    found = {shape for layer in suite.layers
             for shape in (layer.problem.input_shape, layer.problem.output_shape)}
    return sorted(found)


def sweep_layouts(suite: Suite) -> tuple[str, ...]:
    """NCHW, NHWC and every layout a runnable variant of the suite's sweep reads or writes."""
    from convbench.harness.options import RunOptions, make_plan
    from convbench.kernels import registry, transforms

    plan = make_plan(suite, RunOptions())
    algorithms = registry.algorithms()
    pairs = {algorithms[c.variant.algorithm].activation_layouts(c.variant.layout,
                                                                c.variant.param_dict)
             for c in plan.runnable}
    return transforms.layouts_of(pairs)


def _kept_records(path: Path, within: float | None) -> list[tuple[str, str, str]]:
    """(layer, in layout, out layout) of every ok tuning record's variant; with ``within``,
    only the variants whose last-round median is within that factor of their layer group's
    fastest, and the layouts of the one-block plans (:func:`_one_block_layouts`)."""
    from convbench.kernels import registry
    from convbench.plan import costs

    algorithms = registry.algorithms()
    measured = [m for m in costs.read_records(path) if m.algorithm in algorithms]
    group = lambda m: (m.layer, m.threads, m.vector_width, m.cache)   # noqa: E731
    fastest: dict[tuple, float] = {}
    for m in measured:
        fastest[group(m)] = min(fastest.get(group(m), m.seconds), m.seconds)
    every = [(m.layer, *algorithms[m.algorithm].activation_layouts(m.layout, m.params))
             for m in measured]
    if within is None:
        return every
    kept = [r for r, m in zip(every, measured, strict=True)
            if m.seconds <= within * fastest[group(m)]]
    return kept + _one_block_layouts(every)


def _one_block_layouts(records: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """For each block x that every recorded layer writes in some record, each layer's
    layouts of the all-NCHW[x]c plan (convbench.plan.layouts.one_block): x read and
    written, or, where a layer has no such record (the stem, reading the input in a block
    its 3 channels fill), x written and what those records read.  Without them ``--within``
    left VGG-16's blocked layouts untimed on conv2_1's shapes (its blocked variants ran over
    1.1x its NHWC Winograd), and no one-block plan could be made."""
    written: dict[str, set[str]] = {}
    for layer, _src, dst in records:
        written.setdefault(layer, set()).add(dst)
    blocks = {x for x in set.intersection(*written.values()) if block_size(x)} \
        if written else set()
    out = []
    for x in blocks:
        for layer in written:
            mine = [(lay, src, dst) for lay, src, dst in records if lay == layer and dst == x]
            same = [r for r in mine if r[1] == x]
            out.extend(same[:1] or mine)
    return out


def record_layouts(path: Path, within: float | None = None) -> tuple[str, ...]:
    """NCHW, NHWC and every layout an ok tuning record's variant reads or writes; with
    ``within``, only the variants whose last-round median is within that factor of their
    layer group's fastest (MobileNet V2's tune tried 22 NCHW[x]c blocks, most of them on
    variants no plan would pick)."""
    from convbench.kernels import transforms

    return transforms.layouts_of({(src, dst) for _, src, dst in _kept_records(path, within)})


def shape_layouts(suite: Suite, path: Path, within: float | None = None
                  ) -> dict[Shape, tuple[str, ...]]:
    """Per tensor shape of the suite's network, the layouts a plan over these records can
    hold or want there: NCHW, NHWC, the layouts the kept variants (as in
    :func:`record_layouts`) of the layers reading that shape read and of those writing it
    write, joined over the shapes a pool links (a pool runs in its input's layout, so the
    layout conv1 writes reaches the pooled shape).  Keys: every conv input and output shape
    and every tensor shape of the network's graph.  These pairs are all the plan can ask
    for: it keeps a candidate only where both its layouts were timed on its shapes
    (:func:`convbench.plan.costs.with_timed_layouts`).  Every pair of every layout on every
    shape took MobileNet V2's warm 2-thread transforms 26 minutes (Zen 3 host), most of
    them between blocks of other channel counts."""
    from convbench.kernels import transforms

    graph = getattr(suite, "graph", None)
    problems = {layer.name: layer.problem for layer in suite.layers}
    found: dict[Shape, set[str]] = {}
    for layer, src, dst in _kept_records(path, within):
        if layer in problems:
            found.setdefault(tuple(problems[layer].input_shape), set()).add(src)
            found.setdefault(tuple(problems[layer].output_shape), set()).add(dst)
    parent: dict[Shape, Shape] = {}

    def root(shape: Shape) -> Shape:
        while parent.get(shape, shape) != shape:
            shape = parent[shape]
        return shape

    shapes = set(tensor_shapes(suite))   # every layer's shapes: found's keys among them
    if graph is not None:
        for op in graph.ops:
            shapes.add(tuple(graph.shape(op.name)))
            if op.kind != "conv":   # glue: its output holds its input's layout
                for tensor in op.inputs:
                    a, b = root(tuple(graph.shape(tensor))), root(tuple(graph.shape(op.name)))
                    if a != b:
                        parent[a] = b
    joined: dict[Shape, set[str]] = {}
    for shape, layouts in found.items():
        joined.setdefault(root(shape), set()).update(layouts)
    return {shape: transforms.layouts_of({(x, x) for x in joined.get(root(shape), ())})
            for shape in sorted(shapes)}


def glue_keys(suite: Suite) -> list[Any]:
    """The distinct glue keys of the suite's network graph ([] without a graph)."""
    from convbench.network import glue

    graph = getattr(suite, "graph", None)
    return glue.network_keys(graph) if graph is not None else []


def measure(suite: Suite, threads: Sequence[int] = (), layouts: Sequence[str] = (),
            timing: TimingOptions | None = None, seed: int = 0,
            cpus: Sequence[int] = (), progress: bool = True,
            by_shape: Mapping[Shape, Sequence[str]] | None = None) -> LayoutCosts:
    """Per thread count: one transform row per shape x (from, to) pair, one glue row per
    glue key x layout.  ``by_shape`` (:func:`shape_layouts`): the shapes (every tensor of
    the network, the pooled ones too) and on each the layouts to pair and to run its glue
    ops in, instead of ``layouts`` on every conv shape.  ``progress``: a bar with an ETA on
    stderr."""
    from tqdm import tqdm

    timing = timing or suite.sweep.timing
    chosen = tuple(layouts) or sweep_layouts(suite)

    def at(shape: Shape) -> Sequence[str]:
        return by_shape.get(tuple(shape), chosen) if by_shape is not None else chosen

    shapes = [[list(shape), [[a, b] for a in at(shape) for b in at(shape) if a != b]]
              for shape in (sorted(by_shape) if by_shape is not None else tensor_shapes(suite))]
    keys = glue_keys(suite)
    glue = [asdict(key) for key in keys]
    glue_layouts = [list(at(key.shape)) for key in keys]
    pool = affinity.resolve_pool(cpus)
    thread_counts = tuple(threads) or suite.sweep.threads
    affinity.check_pool(pool, thread_counts)
    host = socket.gethostname()
    rows, glue_rows = [], []
    units = len(shapes) + len(glue)   # a worker ticks once per shape and per glue op
    bar = tqdm(total=units * timing.processes * len(thread_counts), file=sys.stderr,
               unit="shape/op", dynamic_ncols=True, disable=not progress)
    for t in thread_counts:
        jobs = [{"threads": t, "cpus": list(affinity.cpus_for(pool, t)),
                 "shapes": shapes, "glue": glue, "glue_layouts": glue_layouts,
                 "timing": asdict(timing), "seed": seed, "process": process,
                 "pass_bytes": suite.pass_weight_bytes}
                for process in range(timing.processes)]
        bar.set_postfix_str(f"{t} thread(s)")
        answers = [oneshot.run_worker(WORKER, job, timing.timeout * units, "transforms",
                                      on_progress=bar.update)
                   for job in jobs]
        for pooled in zip(*answers, strict=True):
            if "kind" in pooled[0]:
                glue_rows.append({**_glue_summary(pooled), "threads": t, "host": host})
            else:
                rows.append({**_summary(pooled), "threads": t, "host": host})
    bar.close()
    return LayoutCosts(pd.DataFrame(rows, columns=list(COLUMNS)),
                       pd.DataFrame(glue_rows, columns=list(GLUE_COLUMNS)))


def _glue_summary(answers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One glue key and layout: the values of every process pooled."""
    first = answers[0]
    row: dict[str, Any] = {"kind": first["kind"],
                           **dict(zip(SHAPE_COLUMNS, first["shape"], strict=True)),
                           **{k: first[k] for k in ("inputs", "k", "s", "p", "in_place",
                                                    "layout", "cache", "status", "reason")}}
    row.update(oneshot.pooled_timing(answers))
    return row


def _summary(answers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One shape and pair: the values of every process pooled, or why it was not timed."""
    first = answers[0]
    row: dict[str, Any] = dict(zip(SHAPE_COLUMNS, first["shape"], strict=True))
    row.update(from_layout=first["from_layout"], to_layout=first["to_layout"],
               cache=first["cache"], status=first["status"], reason=first["reason"])
    row.update(oneshot.pooled_timing(answers))
    return row


def write(costs: LayoutCosts, directory: Path) -> Path:
    """``directory/transforms.parquet`` and ``glue.parquet`` (the directory may be a run's
    results directory); returns the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    costs.transforms.to_parquet(directory / TRANSFORMS_FILE, index=False)
    costs.glue.to_parquet(directory / GLUE_FILE, index=False)
    return directory


def load(directory: Path) -> pd.DataFrame:
    path = Path(directory) / TRANSFORMS_FILE
    if not path.is_file():
        raise ConvbenchError(f"{path}: no such file (measure with: convbench transforms "
                             "SUITE -o DIR)")
    return pd.read_parquet(path)


def load_glue(directory: Path) -> pd.DataFrame | None:
    """The glue timings beside transforms.parquet; None when they were not measured
    (a directory from before glue was measured, or a suite without a graph)."""
    path = Path(directory) / GLUE_FILE
    return pd.read_parquet(path) if path.is_file() else None


def with_timing(timing: TimingOptions, overrides: dict[str, Any]) -> TimingOptions:
    return replace(timing, **{k: v for k, v in overrides.items() if v is not None})
