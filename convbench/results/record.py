"""The per-case record: one row of the results table, built once, derived figures included.

A row is the case's identity and problem, its outcome (a :class:`~convbench.status.Status`
and reason), what the worker measured (verification error, one-time costs, timing values,
counters) and every figure derived from those: the timing statistics, GFLOP/s, GB/s of
compulsory traffic, the share of the host's measured peak and of the roofline bound.  This
module is the only place those derived figures are computed; the report and compare read
them from the table.  Columns and their meaning are in :mod:`convbench.results.schema`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from convbench import stats
from convbench.kernels.base import PERFORMED_FLOPS
from convbench.machine.store import emitted_bits, peak_for, roofline_for
from convbench.status import Status

if TYPE_CHECKING:
    from convbench.harness.plan import Case


def case_row(case: Case) -> dict[str, Any]:
    """The columns every row has, whatever its outcome: identity, problem, kernel code."""
    p = case.problem
    key = case.identity
    return {"case_id": key.case_id, "suite": case.suite, "layer": key.layer,
            "variant": key.variant, "algorithm": case.variant.algorithm,
            "layout": case.variant.layout,
            "params": json.dumps(case.variant.param_dict, sort_keys=True),
            "threads": key.threads, "vector_width": key.vector_width, "cache": key.cache,
            "baseline": case.baseline, "descriptor": key.descriptor,
            "kernel_version": case.kernel_version, "layer_count": case.layer_count,
            "flops": p.flops, "compulsory_bytes": p.compulsory_bytes}


def performed_flops(flops: int, info: str | None) -> int:
    """The FLOPs a variant actually performs: ``performed_flops`` from its kernel's info
    (Winograd, Strassen: fewer multiplies than the direct conv), else the nominal FLOPs."""
    try:
        figure = json.loads(info or "{}").get(PERFORMED_FLOPS)
    except (json.JSONDecodeError, AttributeError):
        figure = None
    return int(figure) if isinstance(figure, int | float) and figure > 0 else int(flops)


def share_tolerance(resolution_s: float, median_s: float) -> float:
    """How far above 1 a share may read before it is flagged: the timer's resolution
    relative to the median (NaN resolution: none), the only error that lets a correctly
    timed kernel seem to pass a correctly measured bound."""
    ratio = resolution_s / median_s if median_s and median_s > 0 else float("nan")
    return ratio if math.isfinite(ratio) else 0.0


def checked_shares(shares: Mapping[str, float], tolerance: float
                   ) -> tuple[dict[str, float], str]:
    """The shares with each one above 1 + ``tolerance`` replaced by NaN, and the flag that
    says which and how far (empty when none is).  A bound a kernel beats is not a bound (the
    Intel host's depthwise layers showed 115-228% of a bound read at a sysfs "L3" that ran
    at DRAM speed): such a share is a measurement error, not a result."""
    over = {k: v for k, v in shares.items() if math.isfinite(v) and v > 1.0 + tolerance}
    if not over:
        return dict(shares), ""
    flag = (f"measurement error: {', '.join(f'{k} {v:.2f}' for k, v in over.items())} above "
            "the measured bound (limits measured low, e.g. under co-tenant load: re-run "
            "`convbench machine`; or a wrong time)")
    return {k: float("nan") if k in over else v for k, v in shares.items()}, flag


def derived(flops: float, compulsory_bytes: float, median_s: float, threads: int,
            vector_width: str, limits: Mapping[str, Any] | None,
            performed: int | None = None, resolution_s: float = float("nan")
            ) -> dict[str, Any]:
    """GFLOP/s, GB/s and the shares of the host's limits for one median time.

    ``gflops`` counts the nominal FLOPs (an algorithm's effective rate); the shares count
    the ``performed`` FLOPs, which the peak limits (default: the nominal).  Shares are NaN
    (and the roofline level empty) when the host's limits are unknown, and NaN with a
    ``share_flag`` when above 1 (:func:`checked_shares`, :func:`share_tolerance`).
    """
    performed = int(flops) if performed is None else performed
    gflops = flops / median_s / 1e9
    done_gflops = performed / median_s / 1e9
    limits = dict(limits) if limits else None
    roof = roofline_for(limits, performed, compulsory_bytes, threads, vector_width)
    shares, flag = checked_shares(
        {"peak_share": done_gflops / peak_for(limits, threads, vector_width),
         "roofline_share": done_gflops / roof.gflops},
        share_tolerance(resolution_s, median_s))
    return {"gflops": gflops, "gbs": compulsory_bytes / median_s / 1e9,
            "performed_flops": performed, **shares, "roofline_level": roof.level,
            "roofline_gbs": roof.gbs, "share_flag": flag}


def outcome_row(case: Case, status: Status, reason: str = "",
                figures: Mapping[str, Any] | None = None, values: Sequence[float] = (),
                ref_values: Sequence[float] = (), loops: int | None = None,
                limits: Mapping[str, Any] | None = None,
                processes: Sequence[int] | None = None) -> dict[str, Any]:
    """The row of a finished case; an ok case gets its statistics and derived figures
    (``processes``: the worker process of each value, the intervals' resampled unit)."""
    row = {**case_row(case), **(figures or {}), "status": Status.of(status).value,
           "reason": reason, "n_values": len(values)}
    if loops is not None:
        row["loops"] = loops
    width = row.get("compile_width") or case.vector_width
    if case.vector_width == "auto" and "compile_width" in row:
        row["compile_width"] = row["compile_width"] or "llvm-default"
    row["vector_width_bits"] = emitted_bits(limits, width)
    if status == Status.OK:
        row.update(**stats.summarize(values, processes),
                   **stats.ratio_summary(values, ref_values, processes))
        row.update(derived(row["flops"], row["compulsory_bytes"], row["median_s"],
                           case.threads, width, limits,
                           performed_flops(row["flops"], row.get("info")),
                           row.get("timer_resolution_s", float("nan"))))
    return row


def value_rows(case_id: str, values: Sequence[float], ref_values: Sequence[float],
               loops: int, process: int = 0) -> list[dict[str, Any]]:
    """The long-form raw values of one case from one worker process (schema.VALUE_COLUMNS)."""
    return [{"case_id": case_id, "process": process, "round": i, "value": v,
             "ref_value": r, "loops": loops}
            for i, (v, r) in enumerate(zip(values, ref_values, strict=True))]


def pooled_row(case: Case, results: Sequence[Any], limits: Mapping[str, Any] | None
               ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The row and value rows of an ok case timed in several worker processes (each a
    :class:`convbench.harness.protocol.Result`): values pooled, the one-time figures
    (compile, prepare, error, counters) of the first process, and ``process_spread``, how
    far the processes' reference-normalised medians lie apart."""
    values = [v for r in results for v in r.values]
    ref_values = [v for r in results for v in r.ref_values]
    processes = [p for p, r in enumerate(results) for _ in r.values]
    medians = [float(np.median(np.divide(r.values, r.ref_values))) for r in results
               if r.values and r.ref_values]
    figures = {**results[0].figures, "processes": len(results),
               "process_spread": (max(medians) - min(medians)) / float(np.median(medians))
               if len(medians) > 1 else float("nan")}
    loops = min(r.loops for r in results) or None
    row = outcome_row(case, Status.OK, "", figures, values, ref_values, loops, limits,
                      processes)
    rows = [v for p, r in enumerate(results)
            for v in value_rows(case.case_id, r.values, r.ref_values, r.loops, p)]
    return row, rows
