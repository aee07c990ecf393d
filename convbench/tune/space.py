"""The candidates ``convbench tune`` searches for one layer group.

A group is a layer at one thread count, vector width and cache mode (:meth:`Plan.groups`).
Its candidates are the plan's runnable cases of the group, except for an algorithm with a
tuning space (:attr:`Algorithm.tuning_space`, e.g. nchwc's NeoCPU space): its cases are
generated from that space for the layer, in every layout the plan has for it, instead of
the sweep's fixed grid (the sweep's ``params`` for it are not used).  The run's ``--only``
/ ``--exclude`` filters apply to generated cases as to the plan's.  Variants that do not
apply (a tile that spills) are not measured, only counted.

Library baselines are left out: they are what a tuned kernel is compared with (``run
--records`` keeps them), not a setting to choose.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from convbench.harness.plan import Case, Filter
from convbench.kernels import registry


@dataclass(frozen=True)
class Candidates:
    cases: tuple[Case, ...]
    not_applicable: int   # generated variants that do not apply to the layer (skip reason)


def group_label(case: Case) -> str:
    """A layer group as the user reads it, e.g. ``conv1x1 t1 vauto cold-weights``."""
    return f"{case.layer} t{case.threads} v{case.vector_width} {case.cache}"


def _selected(case: Case, only: Sequence[Filter], exclude: Sequence[Filter]) -> bool:
    """The plan's filter rule (harness.plan.build_plan): one --only matches, no --exclude."""
    if only and not any(f.matches(case) for f in only):
        return False
    return not any(f.matches(case) for f in exclude)


def generated(group: Sequence[Case], algorithm: str, only: Sequence[Filter] = (),
              exclude: Sequence[Filter] = ()) -> tuple[list[Case], int]:
    """Cases of ``algorithm``'s tuning space for the group's layer (its ``applies`` and the
    filters decide); and how many did not apply."""
    alg = registry.get(algorithm)
    assert alg.tuning_space is not None
    first = group[0]
    layouts = list(dict.fromkeys(c.variant.layout for c in group
                                 if c.variant.algorithm == algorithm))
    space = alg.tuning_space(first.problem)
    version = registry.kernel_version(algorithm)
    cases, not_applicable = [], 0
    for layout in layouts:
        for params in space:
            skip = alg.applies(first.problem, layout, params)
            case = Case(first.suite, first.problem, first.layer_count,
                        alg.variant(layout, params), first.threads,
                        first.vector_width, skip, alg.baseline, version, first.cache)
            if not _selected(case, only, exclude):
                continue
            if skip is None:
                cases.append(case)
            else:
                not_applicable += 1
    return cases, not_applicable


def candidates(group: Sequence[Case], only: Sequence[str] = (),
               exclude: Sequence[str] = ()) -> Candidates:
    """The group's candidates (``group``: every case of the plan in it, skipped ones too;
    ``only``/``exclude``: the filter texts the plan was built with)."""
    keep = [Filter.parse(text) for text in only]
    drop = [Filter.parse(text) for text in exclude]
    cases: list[Case] = []
    not_applicable = 0
    for name in dict.fromkeys(c.variant.algorithm for c in group):
        alg = registry.get(name)
        if alg.baseline:
            continue
        if alg.tuning_space is None:
            mine = [c for c in group if c.variant.algorithm == name
                    and _selected(c, keep, drop)]
            cases += [c for c in mine if c.skip_reason is None]
            not_applicable += sum(c.skip_reason is not None for c in mine)
        else:
            found, skipped = generated(group, name, keep, drop)
            cases += found
            not_applicable += skipped
    return Candidates(tuple(cases), not_applicable)


def sweep_filters(only: Sequence[str], exclude: Sequence[str]
                  ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ``--only`` / ``--exclude`` texts to build the sweep's plan with when tuning.

    A ``variant`` glob may name a candidate of the tuner's space that the sweep's grid lacks
    (nchwc with ic_bn=3, indirect with MR=5); filtering the grid by it drops the algorithm
    from the layer, and :func:`candidates` then never generates it (``tune --only
    'layer=res3a_branch1,variant=indirect/nhwc/KC=256/MC=100/MR=5/NR=16'`` measured
    nothing).  So variant globs act on the candidates only: an ``--only`` loses its variant
    terms here (it keeps more of the grid; one left with none keeps all of it), and an
    ``--exclude`` with one is left out here (without its variant term it would drop more)."""
    def without_variant(text: str) -> tuple[str, bool]:
        globs = Filter.parse(text).globs
        rest = ",".join(f"{key}={glob}" for key, gs in globs if key != "variant" for glob in gs)
        return rest, any(key == "variant" for key, _ in globs)

    kept = [without_variant(text)[0] for text in only]
    sweep_only = () if "" in kept else tuple(kept)
    sweep_exclude = tuple(text for text in exclude if not without_variant(text)[1])
    return sweep_only, sweep_exclude
