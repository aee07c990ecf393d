"""Measure a suite's layout transforms: which ones, in worker processes, into
``transforms.parquet``.

Which tensors: every distinct conv input (mb, ic, ih, iw) and output (mb, oc, oh, ow) shape
of the suite's layers (known from the layers alone, no network graph needed).  Which
layouts: NCHW, NHWC and every layout a variant of the suite's sweep reads or writes
(:meth:`convbench.kernels.base.Algorithm.activation_layouts`, so NCHW[x]c for each ic_bn
and oc_bn the sweep tries); every ordered pair of distinct ones.  Each thread count of the
sweep gets ``timing.processes`` worker processes (:mod:`convbench.harness.transform_worker`),
their values pooled as the runner pools a case's, and summarised by :mod:`convbench.stats`.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pandas as pd

from convbench.errors import ConvbenchError
from convbench.harness import affinity, oneshot
from convbench.spec.suite import Suite, TimingOptions

WORKER = "convbench.harness.transform_worker"

TRANSFORMS_FILE = "transforms.parquet"
SHAPE_COLUMNS = ("mb", "c", "h", "w")
COLUMNS = (*SHAPE_COLUMNS, "from_layout", "to_layout", "threads", "median_s", "ci_low_s",
           "ci_high_s", "n_values", "ref_ratio", "loops", "status", "reason", "host")
Shape = tuple[int, int, int, int]


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


def measure(suite: Suite, threads: Sequence[int] = (), layouts: Sequence[str] = (),
            timing: TimingOptions | None = None, seed: int = 0,
            cpus: Sequence[int] = ()) -> pd.DataFrame:
    """One row per shape x (from, to) pair x thread count (columns :data:`COLUMNS`)."""
    timing = timing or suite.sweep.timing
    chosen = tuple(layouts) or sweep_layouts(suite)
    pairs = [(a, b) for a in chosen for b in chosen if a != b]
    shapes = tensor_shapes(suite)
    pool = affinity.resolve_pool(cpus)
    thread_counts = tuple(threads) or suite.sweep.threads
    affinity.check_pool(pool, thread_counts)
    host = socket.gethostname()
    rows = []
    for t in thread_counts:
        jobs = [{"threads": t, "cpus": list(affinity.cpus_for(pool, t)),
                 "shapes": [list(s) for s in shapes], "pairs": [list(p) for p in pairs],
                 "timing": asdict(timing), "seed": seed, "process": process}
                for process in range(timing.processes)]
        answers = [oneshot.run_worker(WORKER, job, timing.timeout * len(shapes), "transforms")
                   for job in jobs]
        for pooled in zip(*answers, strict=True):
            rows.append({**_summary(pooled), "threads": t, "host": host})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _summary(answers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One shape and pair: the values of every process pooled, or why it was not timed."""
    first = answers[0]
    row: dict[str, Any] = dict(zip(SHAPE_COLUMNS, first["shape"], strict=True))
    row.update(from_layout=first["from_layout"], to_layout=first["to_layout"],
               status=first["status"], reason=first["reason"])
    row.update(oneshot.pooled_timing(answers))
    return row


def write(frame: pd.DataFrame, directory: Path) -> Path:
    """``directory/transforms.parquet`` (the directory may be a run's results directory)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / TRANSFORMS_FILE
    frame.to_parquet(path, index=False)
    return path


def load(directory: Path) -> pd.DataFrame:
    path = Path(directory) / TRANSFORMS_FILE
    if not path.is_file():
        raise ConvbenchError(f"{path}: no such file (measure with: convbench transforms "
                             "SUITE -o DIR)")
    return pd.read_parquet(path)


def with_timing(timing: TimingOptions, overrides: dict[str, Any]) -> TimingOptions:
    return replace(timing, **{k: v for k, v in overrides.items() if v is not None})
