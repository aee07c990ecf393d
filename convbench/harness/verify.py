"""Run one variant once on seeded inputs and hold its output against the reference."""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass

import numpy as np

from convbench.kernels import layouts, registry
from convbench.kernels.base import Prepared, Variant
from convbench.kernels.buffers import page_aligned
from convbench.kernels.reference import ErrorReport, Reference
from convbench.spec.problem import ConvProblem
from convbench.status import Status


@dataclass
class Execution:
    """A prepared variant with its input and output buffers in the kernel's layouts."""

    prepared: Prepared
    x: np.ndarray
    y: np.ndarray
    prepare_seconds: float

    def output_nchw(self, problem: ConvProblem) -> np.ndarray:
        return layouts.from_layout(self.y, self.prepared.out_layout, problem.oc)


def prepare(problem: ConvProblem, variant: Variant, x_nchw: np.ndarray,
            w_oihw: np.ndarray) -> Execution:
    """Build the variant (timed: the one-time preparation) and lay out its buffers (untimed)."""
    alg = registry.get(variant.algorithm)
    refusal = alg.layout_refusal(variant.layout)
    if refusal:
        raise ValueError(refusal)
    t0 = time.perf_counter()
    prepared = alg.build(problem, w_oihw, variant.layout, variant.param_dict)
    prepare_seconds = time.perf_counter() - t0
    x = page_aligned(layouts.to_layout(x_nchw, prepared.in_layout))
    y = page_aligned(layouts.empty(problem.output_shape, prepared.out_layout))
    y.fill(np.nan)  # a kernel that forgets an output element fails the check
    return Execution(prepared, x, y, prepare_seconds)


@dataclass
class Verdict:
    status: Status              # OK, FAIL (wrong answer) or ERROR (raised)
    report: ErrorReport | None
    reason: str = ""
    prepare_seconds: float = float("nan")
    first_call_seconds: float = float("nan")   # includes JIT compilation


def verify(problem: ConvProblem, variant: Variant, reference: Reference,
           x_nchw: np.ndarray, w_oihw: np.ndarray) -> tuple[Verdict, Execution | None]:
    """Prepare, run once and compare; exceptions become an ``error`` verdict with a reason."""
    alg = registry.get(variant.algorithm)
    try:
        execution = prepare(problem, variant, x_nchw, w_oihw)
        t0 = time.perf_counter()
        execution.prepared.run(execution.x, execution.y)
        first = time.perf_counter() - t0
    except Exception as exc:  # a broken kernel is a result, not a crash of the sweep
        last = traceback.extract_tb(exc.__traceback__)[-1]
        where = f" ({last.filename.rsplit('/', 1)[-1]}:{last.lineno})"
        return Verdict(Status.ERROR, None, f"{type(exc).__name__}: {exc}{where}"), None
    report = reference.compare(execution.output_nchw(problem), alg.error_growth)
    status = Status.OK if report.passed else Status.FAIL
    return (Verdict(status, report, report.reason, execution.prepare_seconds, first),
            execution)
