"""The plan of a run: the suite's sweep expanded into cases, filtered, grouped and estimated.

A case is one layer x variant (algorithm, layout, parameters) x thread count x vector
width x cache mode; its identity (id, pyperf name, the problem it measures) is
:mod:`convbench.identity`.  Variants that do not apply are kept as cases with a skip reason
(recorded, never dropped).  Cases of one layer with the same threads, vector width and
cache mode form a *group*: one worker process times them round-robin together with the
in-run reference kernel."""

from __future__ import annotations

import fnmatch
import itertools
import math
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from convbench import host
from convbench.errors import ConvbenchError
from convbench.identity import WARM, CaseKey
from convbench.kernels import registry
from convbench.kernels.base import Variant
from convbench.spec.limits import MAX_PLAN_CASES
from convbench.spec.problem import ConvProblem
from convbench.spec.suite import Suite, SweepSpec, TimingOptions

# Keys accepted by --only / --exclude, and how to read each from a case.
FILTER_KEYS = ("case", "layer", "algorithm", "layout", "variant", "threads", "vector_width",
               "cache")
_KEY_ALIASES = {"alg": "algorithm", "width": "vector_width", "vw": "vector_width",
                "t": "threads"}

# Estimate: a compile (or cache load) per case and a worker start per group, in seconds.
COMPILE_ALLOWANCE_S = 0.5
WORKER_START_S = 1.5
CALIBRATION_VALUES = 3  # values' worth of time spent finding the loop count
EVICTION_GBS = 10.0     # a pile streamed from DRAM: a low guess on both hosts (BRIEF.md)
EVICTOR_START_EVICTIONS = 6  # the pile's first touch, a compile or cache load, 4 evictions


@dataclass(frozen=True)
class Case:
    """One measurement the run owes: a variant of a layer at a thread count and width."""

    suite: str
    problem: ConvProblem
    layer_count: int
    variant: Variant
    threads: int
    vector_width: str
    skip_reason: str | None = None
    baseline: bool = False
    kernel_version: str = ""    # registry.kernel_version of the algorithm's code
    cache: str = WARM           # spec.suite.CACHE_MODES

    @property
    def layer(self) -> str:
        return self.problem.name

    @property
    def identity(self) -> CaseKey:
        return CaseKey(self.layer, self.variant.id, self.threads, self.vector_width,
                       str(self.problem), self.cache)

    @property
    def case_id(self) -> str:
        return self.identity.case_id

    @property
    def group(self) -> tuple[str, int, str, str]:
        """Cases sharing a group run round-robin in one worker process."""
        return (self.layer, self.threads, self.vector_width, self.cache)

    def field(self, key: str) -> str:
        values = {"case": self.case_id, "layer": self.layer, "algorithm": self.variant.algorithm,
                  "layout": self.variant.layout, "variant": self.variant.id,
                  "threads": str(self.threads), "vector_width": self.vector_width,
                  "cache": self.cache}
        return values[key]


@dataclass(frozen=True)
class Filter:
    """``KEY=GLOB[,KEY=GLOB...]``: a case matches when every key matches one of its globs."""

    globs: tuple[tuple[str, tuple[str, ...]], ...]

    @classmethod
    def parse(cls, text: str) -> Filter:
        by_key: dict[str, list[str]] = {}
        for part in text.split(","):
            key, sep, glob = part.partition("=")
            key = _KEY_ALIASES.get(key.strip(), key.strip())
            if not sep or not glob.strip():
                raise ConvbenchError(f"filter {text!r}: expected KEY=GLOB, got {part!r}")
            if key not in FILTER_KEYS:
                raise ConvbenchError(f"filter {text!r}: unknown key {key!r}; expected one of "
                                     f"{', '.join(FILTER_KEYS)}")
            by_key.setdefault(key, []).append(glob.strip())
        return cls(tuple((k, tuple(v)) for k, v in by_key.items()))

    def matches(self, case: Case) -> bool:
        return all(any(fnmatch.fnmatchcase(case.field(key), g) for g in globs)
                   for key, globs in self.globs)


@dataclass(frozen=True)
class Plan:
    suite: Suite
    cases: tuple[Case, ...]
    timing: TimingOptions

    @property
    def runnable(self) -> list[Case]:
        return [c for c in self.cases if c.skip_reason is None]

    def groups(self, cases: Iterable[Case] | None = None) -> list[list[Case]]:
        """Cases grouped by (layer, threads, width, cache mode), in plan order."""
        grouped: dict[tuple[str, int, str, str], list[Case]] = {}
        for case in self.cases if cases is None else cases:
            grouped.setdefault(case.group, []).append(case)
        return list(grouped.values())

    def estimate_seconds(self, cases: Iterable[Case] | None = None,
                         cold_bytes: int | None = None,
                         eviction_gbs: float = EVICTION_GBS) -> float:
        """Rough wall time: per case and worker process, calibration + warmups + values at
        ``min_time``, plus a compile allowance per case; per group and process, a worker
        start and the reference kernel's share.
        A cold case's values are single calls, each after an eviction of the cache pile
        (``coldcache.pile_bytes``) streamed at ``eviction_gbs``.

        An estimate only: a kernel whose single call outlasts ``min_time`` takes longer.
        """
        t = self.timing
        per_value = t.min_time
        total = 0.0
        for group in self.groups(c for c in (cases or self.cases) if c.skip_reason is None):
            values = CALIBRATION_VALUES + t.warmups + t.values
            # every one of the group's worker processes starts, calibrates and times
            total += t.processes * (WORKER_START_S + values * per_value)  # the reference
            if group[0].cache == WARM:
                total += len(group) * (COMPILE_ALLOWANCE_S
                                       + t.processes * values * per_value)
                continue
            from convbench.harness.coldcache import pile_bytes

            pile = pile_bytes(group[0].threads, cold_bytes, self.suite.pass_weight_bytes,
                              group[0].cache)
            eviction = pile / (eviction_gbs * 1e9)
            total += t.processes * EVICTOR_START_EVICTIONS * eviction  # allocate, touch
            total += len(group) * (COMPILE_ALLOWANCE_S
                                   + t.processes * (t.warmups + t.values) * eviction)
        return total


def variants_per_layer(sweep: SweepSpec) -> int:
    """Variants the sweep names for one layer (skipped ones included), counted from the
    registry's parameter domains without enumerating them."""
    total = 0
    for name in sweep.algorithms or tuple(registry.algorithms()):
        alg = registry.get(name)
        layouts = [lay for lay in alg.layouts if not sweep.layouts or lay in sweep.layouts]
        overrides = sweep.params.get(name, {})
        total += len(layouts) * math.prod(len(overrides.get(p.name, p.domain))
                                          for p in alg.params)
    return total


def count_cases(suite: Suite) -> int:
    """Cases :func:`build_plan` would expand before filters: a product, computed first so
    a sweep of 10^10 variants is refused instead of enumerated."""
    sweep = suite.sweep
    return (len(suite.layers) * variants_per_layer(sweep) * len(sweep.threads)
            * len(sweep.vector_widths) * len(sweep.cache))


def build_plan(suite: Suite, only: Sequence[str] = (), exclude: Sequence[str] = (),
               timing: TimingOptions | None = None, cpu_count: int | None = None) -> Plan:
    """Expand ``suite.sweep`` into cases; ``only``/``exclude`` are :class:`Filter` texts.

    Several ``only`` filters are alternatives (a case is kept when one matches); a case
    matching any ``exclude`` filter is dropped.  A sweep of more than
    :data:`~convbench.spec.limits.MAX_PLAN_CASES` cases (before filters) is refused.
    """
    sweep = suite.sweep
    cores = cpu_count or len(os.sched_getaffinity(0))
    too_many = [t for t in sweep.threads if t > cores]
    if too_many:
        raise suite.error(f"threads {too_many} exceed the {cores} CPU(s) this process may "
                          f"use", "sweep.threads")
    for name in sweep.algorithms or ():
        if name not in registry.algorithms():   # a suite built in code skips the loader
            raise suite.error(f"unknown algorithm {name!r}; known: "
                              f"{', '.join(registry.algorithms())}", "sweep.algorithms")
    size = count_cases(suite)
    if size > MAX_PLAN_CASES:
        raise suite.error(
            f"the sweep expands to {size} cases ({len(suite.layers)} layers x "
            f"{variants_per_layer(sweep)} variants x {len(sweep.threads)} thread counts x "
            f"{len(sweep.vector_widths)} vector widths x {len(sweep.cache)} cache modes), "
            f"more than the limit of {MAX_PLAN_CASES} (convbench.spec.limits.MAX_PLAN_CASES); "
            f"narrow sweep.params or split the suite", "sweep")
    keep = [Filter.parse(text) for text in only]
    drop = [Filter.parse(text) for text in exclude]
    # a width this host cannot run (128 on x86, 512 on ARM) skips its cases with the reason
    unrunnable = {width: host.width_unsupported(width) for width in sweep.vector_widths}
    cases: list[Case] = []
    for layer in suite.layers:
        found = list(registry.variants(layer.problem, sweep.algorithms, sweep.layouts,
                                       sweep.params))
        for threads, width, cache in itertools.product(sweep.threads, sweep.vector_widths,
                                                        sweep.cache):
            for variant, skip in found:
                case = Case(suite.name, layer.problem, layer.count, variant, threads, width,
                            unrunnable[width] or skip,
                            registry.get(variant.algorithm).baseline,
                            registry.kernel_version(variant.algorithm), cache)
                if keep and not any(f.matches(case) for f in keep):
                    continue
                if any(f.matches(case) for f in drop):
                    continue
                cases.append(case)
    ids = Counter(case.case_id for case in cases)
    twice = [case_id for case_id, n in ids.items() if n > 1]
    if twice:   # the loader rejects repeats; this is the last guard
        raise suite.error(f"two cases would share the id {twice[0]!r} (a value repeated "
                          f"under another spelling?)", "sweep")
    if not cases:
        raise ConvbenchError(f"suite {suite.name}: the filters leave no case to run")
    return Plan(suite=suite, cases=tuple(cases), timing=timing or sweep.timing)


def format_duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
