"""Discovers the algorithm modules of :mod:`convbench.kernels` and enumerates variants.

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

# Modules of the package that hold infrastructure, not algorithms.
_NOT_ALGORITHMS = {"base", "registry", "reference", "layouts"}
EXTRA_KERNELS_ENV = "CONVBENCH_EXTRA_KERNELS"


@cache
def algorithms() -> dict[str, Algorithm]:
    """Every registered algorithm by name, in module order."""
    import convbench.kernels as pkg

    names = [f"convbench.kernels.{info.name}"
             for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name)
             if info.name not in _NOT_ALGORITHMS and not info.name.startswith("_")]
    extra = [name.strip() for name in os.environ.get(EXTRA_KERNELS_ENV, "").split(",")
             if name.strip()]
    found: dict[str, Algorithm] = {}
    for name in names + extra:
        module = importlib.import_module(name) if name not in extra else _import_extra(name)
        for alg in getattr(module, "ALGORITHMS", ()):
            if alg.name in found:
                raise RuntimeError(f"algorithm {alg.name!r} registered twice")
            found[alg.name] = alg
    return found


def _import_extra(name: str) -> object:
    """An extra kernel module, found from the current directory too: ``python -m`` puts it
    on sys.path but the ``convbench`` script does not, and reproducer lines use the script."""
    import sys

    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConvbenchError(f"{EXTRA_KERNELS_ENV}: cannot import {name!r} ({exc})") from None


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


@cache
def kernel_version(name: str) -> str:
    """A short hash of the source of the module defining algorithm ``name``."""
    import hashlib
    import inspect
    import sys

    module = sys.modules[get(name).build.__module__]
    return hashlib.sha256(inspect.getsource(module).encode()).hexdigest()[:12]
