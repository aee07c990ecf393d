"""``convbench check``: every applicable variant of every problem against the reference."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from convbench.harness.inputs import make_inputs
from convbench.harness.verify import verify
from convbench.kernels import registry
from convbench.kernels.base import ParamValue
from convbench.kernels.reference import Reference
from convbench.spec.problem import ConvProblem


@dataclass(frozen=True)
class CheckRow:
    layer: str
    descriptor: str
    variant: str
    algorithm: str
    status: str             # pass, fail, error, skip
    max_abs: float = float("nan")
    max_rel: float = float("nan")
    bound_ratio: float = float("nan")   # worst error / tolerance bound; <= 1 passes
    reason: str = ""
    seconds: float = float("nan")

    @property
    def ok(self) -> bool:
        return self.status in ("pass", "skip")


def check_problems(problems: Iterable[ConvProblem],
                   algorithms: tuple[str, ...] | None = None,
                   layouts: tuple[str, ...] | None = None,
                   params: Mapping[str, Mapping[str, tuple[ParamValue, ...]]] | None = None,
                   seed: int = 0,
                   on_row: Callable[[CheckRow], None] | None = None) -> list[CheckRow]:
    """Check each problem's variants; ``on_row`` sees each row as it is produced."""
    rows: list[CheckRow] = []
    for problem in problems:
        x, w = make_inputs(problem, seed)
        reference: Reference | None = None
        for variant, skip in registry.variants(problem, algorithms, layouts, params):
            base = {"layer": problem.name, "descriptor": str(problem), "variant": variant.id,
                    "algorithm": variant.algorithm}
            if skip is not None:
                row = CheckRow(**base, status="skip", reason=skip)
            else:
                if reference is None:
                    reference = Reference(problem, x, w)
                t0 = time.perf_counter()
                verdict, _ = verify(problem, variant, reference, x, w)
                elapsed = time.perf_counter() - t0
                rep = verdict.report
                row = CheckRow(**base, status=verdict.status, reason=verdict.reason,
                               max_abs=rep.max_abs if rep else float("nan"),
                               max_rel=rep.max_rel if rep else float("nan"),
                               bound_ratio=rep.worst_ratio if rep else float("nan"),
                               seconds=elapsed)
            rows.append(row)
            if on_row:
                on_row(row)
    return rows
