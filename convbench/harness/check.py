"""``convbench check``: every applicable variant of every problem against the reference."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from convbench.harness.inputs import make_inputs
from convbench.harness.verify import verify
from convbench.identity import CaseKey
from convbench.kernels import registry
from convbench.kernels.asm import calls_recorded, kernel_profiles, profile_summary
from convbench.kernels.base import ParamValue, Variant
from convbench.kernels.reference import Reference
from convbench.spec.problem import ConvProblem
from convbench.status import Status


@dataclass(frozen=True)
class CheckRow:
    layer: str
    descriptor: str
    variant: str
    algorithm: str
    status: Status          # ok, fail, error or skip
    max_abs: float = float("nan")
    max_rel: float = float("nan")
    bound_ratio: float = float("nan")   # worst error / tolerance bound; <= 1 passes
    reason: str = ""
    seconds: float = float("nan")
    threads: int = 1
    vector_width: str = "auto"
    asm: str = ""           # the static vector profile when asked for (asm.profile_summary)

    @property
    def ok(self) -> bool:
        return self.status.acceptable

    @property
    def identity(self) -> CaseKey:
        return CaseKey(self.layer, self.variant, self.threads, self.vector_width,
                       self.descriptor)


def _candidates(problem: ConvProblem, algorithms: tuple[str, ...] | None,
                layouts: tuple[str, ...] | None,
                params: Mapping[str, Mapping[str, tuple[ParamValue, ...]]] | None,
                variant: Variant | None) -> Iterator[tuple[Variant, str | None]]:
    """The (variant, skip reason) pairs to check: one named variant, or the registry's."""
    if variant is None:
        yield from registry.variants(problem, algorithms, layouts, params)
        return
    alg = registry.get(variant.algorithm)
    refusal = alg.layout_refusal(variant.layout)
    if refusal:
        yield variant, refusal
        return
    yield variant, alg.applies(problem, variant.layout, variant.param_dict)


def check_problems(problems: Iterable[ConvProblem],
                   algorithms: tuple[str, ...] | None = None,
                   layouts: tuple[str, ...] | None = None,
                   params: Mapping[str, Mapping[str, tuple[ParamValue, ...]]] | None = None,
                   seed: int = 0,
                   on_row: Callable[[CheckRow], None] | None = None,
                   variant: Variant | None = None, threads: int = 1,
                   vector_width: str = "auto", profile: bool = False) -> list[CheckRow]:
    """Check each problem's variants (only ``variant`` when given); ``on_row`` sees each
    row as it is produced.  ``threads`` and ``vector_width`` are recorded in the rows, the
    caller applies them (numba reads the width once, at import).  ``profile``: each variant
    that ran also gets its static vector profile (packed FMAs in its compiled code; code
    loaded from numba's cache is read from the cache's object file:
    :mod:`convbench.kernels.asm`)."""
    rows: list[CheckRow] = []
    for problem in problems:
        x, w = make_inputs(problem, seed)
        reference: Reference | None = None
        for candidate, skip in _candidates(problem, algorithms, layouts, params, variant):
            base = {"layer": problem.name, "descriptor": str(problem),
                    "variant": candidate.id, "algorithm": candidate.algorithm,
                    "threads": threads, "vector_width": vector_width}
            if skip is not None:
                row = CheckRow(**base, status=Status.SKIP, reason=skip)
            else:
                if reference is None:
                    reference = Reference(problem, x, w)
                with calls_recorded(profile) as calls:
                    t0 = time.perf_counter()
                    verdict, execution = verify(problem, candidate, reference, x, w)
                    elapsed = time.perf_counter() - t0
                rep = verdict.report
                asm = ""
                if profile and execution is not None:
                    asm = profile_summary(kernel_profiles(execution.prepared, calls))
                row = CheckRow(**base, status=verdict.status, reason=verdict.reason,
                               max_abs=rep.max_abs if rep else float("nan"),
                               max_rel=rep.max_rel if rep else float("nan"),
                               bound_ratio=rep.worst_ratio if rep else float("nan"),
                               seconds=elapsed, asm=asm)
            rows.append(row)
            if on_row:
                on_row(row)
    return rows
