"""A suite's ``sweep`` section: what to run on its layers, validated where it is read.

Every axis is a list without repeats (a repeated thread count or parameter value would
make two cases with one id, which the results cannot hold), every name is checked
against the kernel registry (algorithms, layouts, parameters and their valid values,
:class:`~convbench.kernels.base.Param`), and every timing value against its range
(:mod:`convbench.spec.limits`).  The same checks serve ``convbench run``'s overrides.

Format (every key optional)::

    sweep:
      algorithms: [direct, im2col]     # default: every registered algorithm
      layouts: [nchw, nhwc]            # default: every layout an algorithm takes
      threads: [1, 2]
      vector_widths: [auto]            # auto, 128 (aarch64), 256, 512 (x86)
      cache: [warm]                    # warm, cold-weights, cold
      params: {im2col: {gemm: [blas, own]}}   # replaces a parameter's default domain
      timing: {min_time: 0.02, values: 5, warmups: 1, timeout: 120, processes: 3}
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from convbench.identity import WARM
from convbench.spec.limits import MAX_REPEATS, MAX_THREADS, seconds_problem, shown
from convbench.spec.where import Where, key

SWEEP_KEYS = {"algorithms", "layouts", "threads", "vector_widths", "cache", "params",
              "timing", "tolerance"}
TIMING_KEYS = ("min_time", "values", "warmups", "timeout", "processes")
# Every width a suite may name; the host decides which of them run (the others are skipped
# with convbench.host.width_unsupported's reason), so one suite serves x86 and ARM hosts.
VECTOR_WIDTHS = ("auto", "128", "256", "512")
# Cache state a layer is timed in: warm (its buffers stay in cache between calls), cold
# weights (the kernel's packed weights evicted before each call), cold (everything evicted).
CACHE_MODES = (WARM, "cold-weights", "cold")


@dataclass(frozen=True)
class TimingOptions:
    """How each variant is timed (see the harness timer)."""

    min_time: float = 0.02    # seconds one value must last at least (inner loop calibrated)
    values: int = 5           # timed values per variant in each worker process
    warmups: int = 1          # untimed values after the JIT-paying first call
    timeout: float = 120.0    # seconds a variant may take in total before it is killed
    # Worker processes per group, values pooled (pyperf's runs): one process can carry a
    # bias of its own (direct/nchw differed 5-10% between processes with identical buffers
    # on the Intel host), which no number of values inside it averages away.
    processes: int = 3


@dataclass(frozen=True)
class SweepSpec:
    """The sweep section as written; the planner expands it against the kernel registry.

    ``None`` for algorithms/layouts means "every registered / every supported one".
    """

    algorithms: tuple[str, ...] | None = None
    layouts: tuple[str, ...] | None = None
    threads: tuple[int, ...] = (1,)
    vector_widths: tuple[str, ...] = ("auto",)
    cache: tuple[str, ...] = ("warm",)
    params: dict[str, dict[str, tuple[Any, ...]]] = field(default_factory=dict)
    timing: TimingOptions = TimingOptions()


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def timing_problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be timing option ``name``; None when it can."""
    if name in ("min_time", "timeout"):
        return seconds_problem(value)
    low = {"values": 3, "warmups": 0, "processes": 1}.get(name)
    if low is None:
        return f"unknown timing option {shown(name)}; expected {', '.join(TIMING_KEYS)}"
    if not _is_int(value) or not low <= value <= MAX_REPEATS:
        return f"expected an integer from {low} to {MAX_REPEATS}, got {shown(value)}"
    return None


def thread_problem(value: Any) -> str | None:
    if not _is_int(value) or not 1 <= value <= MAX_THREADS:
        return f"expected thread counts from 1 to {MAX_THREADS}, got {shown(value)}"
    return None


def repeated(values: Iterable[Any]) -> list[str]:
    """Values given more than once, as a case id prints them (``4`` and ``"4"`` repeat)."""
    seen: set[str] = set()
    twice: list[str] = []
    for value in values:
        text = str(value)
        if text in seen and text not in twice:
            twice.append(text)
        seen.add(text)
    return twice


def _no_repeats(values: list[Any], where: Where, fld: str) -> tuple[Any, ...]:
    twice = repeated(values)
    if twice:
        raise where.error(f"{', '.join(map(shown, twice))} given more than once (each value "
                          f"is one case; a repeat would make two cases with one id)", fld=fld)
    return tuple(values)


def _str_list(value: Any, where: Where, fld: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise where.error(f"expected a non-empty list of names, got {shown(value)}", fld=fld)
    return _no_repeats(value, where, fld)


def _choices(value: Any, allowed: tuple[str, ...], where: Where, fld: str) -> tuple[str, ...]:
    """A list (or one value) of words from ``allowed``, e.g. vector widths or cache modes."""
    values = value if isinstance(value, list) else [value]
    bad = [v for v in values if isinstance(v, (list, dict)) or str(v) not in allowed]
    if bad or not values:
        raise where.error(f"expected a list of {', '.join(allowed)}, got {shown(value)}",
                          fld=fld)
    return _no_repeats([str(v) for v in values], where, fld)


def parse_sweep(raw: Any, where: Where) -> SweepSpec:
    """Validate a suite's ``sweep`` mapping (None: the default sweep)."""
    if raw is None:
        return SweepSpec()
    if not isinstance(raw, dict):
        raise where.error(f"expected a mapping, got {shown(raw)}", fld="sweep")
    unknown = sorted(key(k) for k in set(raw) - SWEEP_KEYS)
    if unknown:
        raise where.error(f"unknown key(s) {', '.join(unknown)}; expected "
                          f"{', '.join(sorted(SWEEP_KEYS))}", fld="sweep")
    kwargs: dict[str, Any] = {}
    if "algorithms" in raw:
        kwargs["algorithms"] = _str_list(raw["algorithms"], where, "sweep.algorithms")
    if "layouts" in raw:
        kwargs["layouts"] = _str_list(raw["layouts"], where, "sweep.layouts")
    if "threads" in raw:
        threads = raw["threads"]
        threads = threads if isinstance(threads, list) else [threads]
        problems = [thread_problem(t) for t in threads]
        if not threads or any(problems):
            raise where.error(next(filter(None, problems), "expected at least one thread "
                                   "count"), fld="sweep.threads")
        kwargs["threads"] = _no_repeats(threads, where, "sweep.threads")
    for name, allowed in (("vector_widths", VECTOR_WIDTHS), ("cache", CACHE_MODES)):
        if name in raw:
            kwargs[name] = _choices(raw[name], allowed, where, f"sweep.{name}")
    if "params" in raw:
        kwargs["params"] = _parse_params(raw["params"], where)
    if "timing" in raw:
        kwargs["timing"] = _parse_timing(raw["timing"], where)
    spec = SweepSpec(**kwargs)
    if spec.algorithms or spec.layouts or spec.params:
        check_against_registry(spec, where)
    return spec


def _parse_params(raw: Any, where: Where) -> dict[str, dict[str, tuple[Any, ...]]]:
    """``{algorithm: {parameter: [values]}}``, shapes only (names: check_against_registry)."""
    if not isinstance(raw, dict):
        raise where.error(f"expected a mapping algorithm -> {{parameter: [values]}}, got "
                          f"{shown(raw)}", fld="sweep.params")
    parsed: dict[str, dict[str, tuple[Any, ...]]] = {}
    for alg, knobs in raw.items():
        fld = f"sweep.params.{key(alg)}"
        if not isinstance(alg, str):
            raise where.error(f"expected an algorithm name, got {shown(alg)}", fld=fld)
        if not isinstance(knobs, dict) or not knobs:
            raise where.error(f"expected a mapping parameter -> [values], got {shown(knobs)}",
                              fld=fld)
        parsed[alg] = {}
        for knob, values in knobs.items():
            kfld = f"{fld}.{key(knob)}"
            if not isinstance(knob, str):
                raise where.error(f"expected a parameter name, got {shown(knob)}", fld=kfld)
            values = values if isinstance(values, list) else [values]
            if not values:
                raise where.error("expected at least one value", fld=kfld)
            parsed[alg][knob] = _no_repeats(values, where, kfld)
    return parsed


def check_against_registry(spec: SweepSpec, where: Where) -> None:
    """Algorithms, layouts and parameters the registry knows, values each knob accepts."""
    from convbench.kernels import registry

    algorithms = registry.algorithms()
    known = ", ".join(algorithms)
    for name in spec.algorithms or ():
        if name not in algorithms:
            raise where.error(f"unknown algorithm {shown(name)}; known: {known}",
                              fld="sweep.algorithms")
    chosen = spec.algorithms or tuple(algorithms)
    layouts = {layout for name in chosen for layout in algorithms[name].layouts}
    for layout in spec.layouts or ():
        if layout not in layouts:
            raise where.error(f"unknown layout {shown(layout)}: no algorithm swept takes it; "
                              f"known: {', '.join(sorted(layouts))}", fld="sweep.layouts")
    for name, knobs in spec.params.items():
        fld = f"sweep.params.{key(name)}"
        if name not in algorithms:
            raise where.error(f"unknown algorithm {shown(name)}; known: {known}", fld=fld)
        alg = algorithms[name]
        names = [p.name for p in alg.params]
        for knob, values in knobs.items():
            kfld = f"{fld}.{key(knob)}"
            if knob not in names:
                expected = (f"{name} takes {', '.join(names)}" if names
                            else f"{name} takes no parameters")
                raise where.error(f"unknown parameter {shown(knob)}; {expected}", fld=kfld)
            param = alg.param(knob)
            for value in values:
                problem = param.rejects(value)
                if problem:
                    raise where.error(problem, fld=kfld)


def _parse_timing(raw: Any, where: Where) -> TimingOptions:
    if not isinstance(raw, dict):
        raise where.error(f"expected a mapping, got {shown(raw)}", fld="sweep.timing")
    unknown = sorted(key(k) for k in set(raw) - set(TIMING_KEYS))
    if unknown:
        raise where.error(f"unknown key(s) {', '.join(unknown)}; expected "
                          f"{', '.join(TIMING_KEYS)}", fld="sweep.timing")
    for name, value in raw.items():
        problem = timing_problem(name, value)
        if problem:
            raise where.error(problem, fld=f"sweep.timing.{name}")
    return TimingOptions(**{name: float(v) if name in ("min_time", "timeout") else v
                            for name, v in raw.items()})
