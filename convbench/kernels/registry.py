"""Discovers the algorithm modules of :mod:`convbench.kernels` and enumerates variants.

The rule: every module of the package whose name does not start with ``_`` is imported, and
each one's ``ALGORITHMS`` list (if it has one) is registered.  Infrastructure modules
(``base``, ``layouts``, ``reference``, ``asm``, ...) simply have no ``ALGORITHMS``; a
``_``-prefixed module (``_numba_support``) is never imported by discovery at all.

``CONVBENCH_EXTRA_KERNELS`` (comma-separated module paths, e.g. ``tests.fault_kernels``)
names extra modules whose ``ALGORITHMS`` are registered too: tests use it to add kernels
that crash, hang or answer wrongly without shipping them in :mod:`convbench.kernels`.
The variable is inherited by worker processes, so they see the same registry.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Iterator, Mapping
from functools import cache

from convbench.errors import ConvbenchError
from convbench.kernels.base import Algorithm, ParamValue, Variant
from convbench.spec.problem import ConvProblem

EXTRA_KERNELS_ENV = "CONVBENCH_EXTRA_KERNELS"
KERNELS_PACKAGE = "convbench.kernels"


def _package_modules() -> list[str]:
    """Every module of :mod:`convbench.kernels` by full name, sorted, ``_``-prefixed included."""
    import convbench.kernels as pkg

    return [f"{KERNELS_PACKAGE}.{info.name}"
            for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name)]


def _algorithm_modules() -> list[str]:
    """The modules discovery imports: the package's non-``_`` modules, then the extra ones."""
    names = [name for name in _package_modules()
             if not name.rpartition(".")[2].startswith("_")]
    extra = os.environ.get(EXTRA_KERNELS_ENV, "")
    return names + [name.strip() for name in extra.split(",") if name.strip()]


@cache
def algorithms() -> dict[str, Algorithm]:
    """Every registered algorithm by name, in module order."""
    found: dict[str, Algorithm] = {}
    for name in _algorithm_modules():
        module = importlib.import_module(name)
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
