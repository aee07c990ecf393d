"""Discovers the algorithm modules of :mod:`convbench.kernels` and enumerates variants."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from functools import cache

from convbench.errors import ConvbenchError
from convbench.kernels.base import Algorithm, ParamValue, Variant
from convbench.spec.problem import ConvProblem

# Modules of the package that hold infrastructure, not algorithms.
_NOT_ALGORITHMS = {"base", "registry", "reference", "layouts"}


@cache
def algorithms() -> dict[str, Algorithm]:
    """Every registered algorithm by name, in module order."""
    import convbench.kernels as pkg

    found: dict[str, Algorithm] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name in _NOT_ALGORITHMS or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"convbench.kernels.{info.name}")
        for alg in getattr(module, "ALGORITHMS", ()):
            if alg.name in found:
                raise RuntimeError(f"algorithm {alg.name!r} registered twice")
            found[alg.name] = alg
    return found


def get(name: str) -> Algorithm:
    algs = algorithms()
    if name not in algs:
        raise ConvbenchError(f"unknown algorithm {name!r}; known: {', '.join(algs)}")
    return algs[name]


def variants(problem: ConvProblem, names: tuple[str, ...] | None = None,
             layouts: tuple[str, ...] | None = None,
             params: Mapping[str, Mapping[str, tuple[ParamValue, ...]]] | None = None,
             ) -> Iterator[tuple[Variant, str | None]]:
    """Every (variant, skip reason) for ``problem``; reason is None when it applies.

    ``params`` overrides parameter domains per algorithm (the suite's ``sweep.params``).
    """
    params = params or {}
    for name in names or tuple(algorithms()):
        alg = get(name)
        for layout in alg.layouts:
            if layouts and layout not in layouts:
                continue
            for combo in alg.param_grid(params.get(name)):
                yield Variant.of(name, layout, combo), alg.applies(problem, layout, combo)
