"""What a user asked of a run beyond the suite: filters, counters, seed, overrides.

Stored in the results directory's manifest so ``--resume`` rebuilds exactly the same plan.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from dataclasses import dataclass
from typing import Any

from convbench.errors import ConvbenchError
from convbench.harness import affinity, counters
from convbench.harness.plan import Plan, build_plan
from convbench.spec.suite import Suite


@dataclass
class RunOptions:
    only: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    counters: str = "none"
    seed: int = 0
    timing: dict[str, Any] = dataclasses.field(default_factory=dict)  # overrides
    threads: tuple[int, ...] = ()         # overrides sweep.threads when given
    vector_widths: tuple[str, ...] = ()   # overrides sweep.vector_widths when given
    cache: tuple[str, ...] = ()           # overrides sweep.cache when given
    cold_bytes: int | None = None         # eviction pile size (default: from the host's LLC)
    # CPUs workers are pinned to (harness.affinity); () until run_suite resolves the
    # default, so the manifest, and with it --resume, holds the set actually used
    cpus: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunOptions:
        return cls(only=tuple(data.get("only", ())), exclude=tuple(data.get("exclude", ())),
                   counters=data.get("counters", "none"), seed=data.get("seed", 0),
                   timing=dict(data.get("timing", {})),
                   threads=tuple(data.get("threads", ())),
                   vector_widths=tuple(data.get("vector_widths", ())),
                   cache=tuple(data.get("cache", ())), cold_bytes=data.get("cold_bytes"),
                   cpus=tuple(data.get("cpus", ())))


def check_counters_available(kind: str) -> None:
    """perf and sim live in their own modules; say so plainly when one is not there."""
    counters.needs_separate_pass(kind)  # validates the name
    if kind != "none" and importlib.util.find_spec(f"convbench.harness.counters.{kind}") is None:
        raise ConvbenchError(f"counters backend {kind!r} is not available in this convbench "
                             f"(no convbench/harness/counters/{kind}.py); use --counters none")


def make_plan(suite: Suite, options: RunOptions) -> Plan:
    """The suite's plan with the options' axis overrides, filters and timing applied."""
    sweep = suite.sweep
    if options.threads:
        sweep = dataclasses.replace(sweep, threads=tuple(options.threads))
    if options.vector_widths:
        sweep = dataclasses.replace(sweep, vector_widths=tuple(options.vector_widths))
    if options.cache:
        sweep = dataclasses.replace(sweep, cache=tuple(options.cache))
    suite = dataclasses.replace(suite, sweep=sweep)
    timing = dataclasses.replace(sweep.timing, **options.timing)
    pool = affinity.resolve_pool(options.cpus)
    if options.cpus:
        affinity.check_pool(pool, sweep.threads)
    return build_plan(suite, options.only, options.exclude, timing, cpu_count=len(pool))
