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
from convbench.spec import sweep as sweep_spec
from convbench.spec.limits import shown
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
    # tuning records applied to the plan (convbench.tune.apply), an absolute path
    records: str | None = None
    # a named core's cache geometry for --counters sim (harness.counters.cache_models);
    # None: the host's own
    cache_model: str | None = None
    # what ``convbench history`` calls the run (default: the checkout's git commit)
    label: str | None = None

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
                   cpus=tuple(data.get("cpus", ())), records=data.get("records"),
                   cache_model=data.get("cache_model"), label=data.get("label"))


def check_counters_available(kind: str) -> None:
    """perf and sim live in their own modules; say so plainly when one is not there."""
    counters.needs_separate_pass(kind)  # validates the name
    if kind != "none" and importlib.util.find_spec(f"convbench.harness.counters.{kind}") is None:
        raise ConvbenchError(f"counters backend {kind!r} is not available in this convbench "
                             f"(no convbench/harness/counters/{kind}.py); use --counters none")


def check_cache_model(options: RunOptions) -> None:
    """A cache model names a known core and only makes sense with simulated counters."""
    if options.cache_model is None:
        return
    from convbench.harness.counters import cache_models

    cache_models.get(options.cache_model)
    if options.counters != "sim":
        raise ConvbenchError("--cache-model sets callgrind's cache geometry: it needs "
                             "--counters sim")


def check_overrides(options: RunOptions) -> None:
    """The options' overrides pass the checks the suite's own sweep passed: ranges, no
    repeats, known words (they reach here from the command line or a stored manifest)."""
    for name, value in options.timing.items():
        problem = sweep_spec.timing_problem(name, value)
        if problem:
            raise ConvbenchError(f"--{name.replace('_', '-')}: {problem}")
    axes = (("--threads", options.threads, None), ("--vector-widths", options.vector_widths,
            sweep_spec.VECTOR_WIDTHS), ("--cache", options.cache, sweep_spec.CACHE_MODES))
    for option, values, allowed in axes:
        if allowed is None:
            problem = next(filter(None, map(sweep_spec.thread_problem, values)), None)
        else:
            bad = [shown(v) for v in values if v not in allowed]
            problem = f"expected {', '.join(allowed)}, got {', '.join(bad)}" if bad else None
        if problem:
            raise ConvbenchError(f"{option}: {problem}")
        twice = sweep_spec.repeated(values)
        if twice:
            raise ConvbenchError(f"{option}: {', '.join(twice)} given more than once")


def make_plan(suite: Suite, options: RunOptions) -> Plan:
    """The suite's plan with the options' axis overrides, filters and timing applied."""
    check_overrides(options)
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
    too_many = [t for t in options.threads if t > len(pool)]
    if too_many:   # said here, or the planner would blame the suite's sweep.threads
        raise ConvbenchError(f"--threads: {too_many} exceed the {len(pool)} CPU(s) this "
                             f"process may use")
    return build_plan(suite, options.only, options.exclude, timing, cpu_count=len(pool))
