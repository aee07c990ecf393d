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
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from convbench.errors import ConvbenchError
from convbench.identity import WARM, CaseKey
from convbench.kernels import registry
from convbench.kernels.base import Variant
from convbench.spec.problem import ConvProblem
from convbench.spec.suite import Suite, TimingOptions

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

            eviction = pile_bytes(group[0].threads, cold_bytes) / (eviction_gbs * 1e9)
            total += t.processes * EVICTOR_START_EVICTIONS * eviction  # allocate, touch
            total += len(group) * (COMPILE_ALLOWANCE_S
                                   + t.processes * (t.warmups + t.values) * eviction)
        return total


def build_plan(suite: Suite, only: Sequence[str] = (), exclude: Sequence[str] = (),
               timing: TimingOptions | None = None, cpu_count: int | None = None) -> Plan:
    """Expand ``suite.sweep`` into cases; ``only``/``exclude`` are :class:`Filter` texts.

    Several ``only`` filters are alternatives (a case is kept when one matches); a case
    matching any ``exclude`` filter is dropped.
    """
    sweep = suite.sweep
    cores = cpu_count or len(os.sched_getaffinity(0))
    too_many = [t for t in sweep.threads if t > cores]
    if too_many:
        raise ConvbenchError(f"suite {suite.name}: threads {too_many} exceed the {cores} "
                             f"CPU(s) this process may use")
    for name in sweep.algorithms or ():
        registry.get(name)  # unknown names are a user error, said once here
    keep = [Filter.parse(text) for text in only]
    drop = [Filter.parse(text) for text in exclude]
    cases: list[Case] = []
    for layer in suite.layers:
        found = list(registry.variants(layer.problem, sweep.algorithms, sweep.layouts,
                                       sweep.params))
        for threads, width, cache in itertools.product(sweep.threads, sweep.vector_widths,
                                                        sweep.cache):
            for variant, skip in found:
                case = Case(suite.name, layer.problem, layer.count, variant, threads, width,
                            skip, registry.get(variant.algorithm).baseline,
                            registry.kernel_version(variant.algorithm), cache)
                if keep and not any(f.matches(case) for f in keep):
                    continue
                if any(f.matches(case) for f in drop):
                    continue
                cases.append(case)
    if not cases:
        raise ConvbenchError(f"suite {suite.name}: the filters leave no case to run")
    return Plan(suite=suite, cases=tuple(cases), timing=timing or sweep.timing)


def format_duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
