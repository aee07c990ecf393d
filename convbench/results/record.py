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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from convbench.machine.store import peak_for, roofline_for
from convbench import stats
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


def derived(flops: float, compulsory_bytes: float, median_s: float, threads: int,
            vector_width: str, limits: Mapping[str, Any] | None) -> dict[str, Any]:
    """GFLOP/s, GB/s and the shares of the host's limits for one median time.

    Shares are NaN (and the roofline level empty) when the host's limits are unknown.
    """
    gflops = flops / median_s / 1e9
    limits = dict(limits) if limits else None
    bound, level = roofline_for(limits, flops, compulsory_bytes, threads, vector_width)
    return {"gflops": gflops, "gbs": compulsory_bytes / median_s / 1e9,
            "peak_share": gflops / peak_for(limits, threads, vector_width),
            "roofline_level": level,
            "roofline_share": gflops / bound}


def outcome_row(case: Case, status: Status, reason: str = "",
                figures: Mapping[str, Any] | None = None, values: Sequence[float] = (),
                ref_values: Sequence[float] = (), loops: int | None = None,
                limits: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The row of a finished case; an ok case gets its statistics and derived figures."""
    row = {**case_row(case), **(figures or {}), "status": Status.of(status).value,
           "reason": reason, "n_values": len(values)}
    if loops is not None:
        row["loops"] = loops
    if status == Status.OK:
        row.update(**stats.summarize(values), **stats.ratio_summary(values, ref_values))
        row.update(derived(row["flops"], row["compulsory_bytes"], row["median_s"],
                           case.threads, case.vector_width, limits))
    return row


def value_rows(case_id: str, values: Sequence[float], ref_values: Sequence[float],
               loops: int) -> list[dict[str, Any]]:
    """The long-form raw values of one case (schema.VALUE_COLUMNS)."""
    return [{"case_id": case_id, "round": i, "value": v, "ref_value": r, "loops": loops}
            for i, (v, r) in enumerate(zip(values, ref_values, strict=True))]
