"""Discovers the algorithm modules of :mod:`convbench.kernels`, enumerates variants and
versions each kernel's code (:func:`kernel_version`).

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

import ast
import hashlib
import importlib
import importlib.util
import inspect
import os
import pkgutil
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from types import ModuleType

from convbench.errors import ConvbenchError
from convbench.kernels.base import Algorithm, ParamValue, Variant
from convbench.spec.problem import ConvProblem

EXTRA_KERNELS_ENV = "CONVBENCH_EXTRA_KERNELS"
# the folder a run's extra modules are imported from, passed to its workers
EXTRA_KERNELS_DIR_ENV = "CONVBENCH_EXTRA_KERNELS_DIR"
KERNELS_PACKAGE = "convbench.kernels"
VERSION_DIGITS = 12


@cache
def _package_modules() -> tuple[str, ...]:
    """Every module of :mod:`convbench.kernels` by full name, sorted, ``_``-prefixed included.

    Listed once per process: pkgutil opens every subfolder to see whether it is a package,
    numba's cache folder (``__pycache__``) too, which grows with every kernel signature ever
    compiled (11,446 files in a long-used checkout: 90 ms a listing, five a `convbench run`)."""
    import convbench.kernels as pkg

    return tuple(f"{KERNELS_PACKAGE}.{info.name}"
                 for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name))


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
        module = _import(name)
        for alg in getattr(module, "ALGORITHMS", ()):
            if alg.name in found:
                raise RuntimeError(f"algorithm {alg.name!r} registered twice")
            found[alg.name] = alg
    return found


def _extra_kernels_dir(environ: Mapping[str, str]) -> str:
    """The folder extra modules are imported from: the runner's, in a worker."""
    return os.path.abspath(environ.get(EXTRA_KERNELS_DIR_ENV) or os.getcwd())


def extra_kernels_dir_env(environ: Mapping[str, str]) -> dict[str, str]:
    """What a worker process (started in a folder of its own) needs to import the extra
    modules ``environ`` names from the folder they were named in: that folder, if any."""
    if not environ.get(EXTRA_KERNELS_ENV, "").strip():
        return {}
    return {EXTRA_KERNELS_DIR_ENV: _extra_kernels_dir(environ)}


def _import(name: str) -> ModuleType:
    """An algorithm module.  An extra one (``CONVBENCH_EXTRA_KERNELS``) is found from the
    current directory too (``python -m`` puts that on sys.path but the ``convbench`` script
    does not, and reproducer lines use the script), or in a worker from its runner's."""
    import sys

    if name.startswith(KERNELS_PACKAGE + "."):
        return importlib.import_module(name)
    where = _extra_kernels_dir(os.environ)
    if where not in sys.path:
        sys.path.append(where)
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConvbenchError(f"{EXTRA_KERNELS_ENV}: cannot import {name!r} ({exc})") from None


def get(name: str) -> Algorithm:
    algs = algorithms()
    if name not in algs:
        raise ConvbenchError(f"unknown algorithm {name!r}; known: {', '.join(algs)}")
    return algs[name]


@cache
def kernel_version(name: str) -> str:
    """Short hash of the code behind algorithm ``name``: its module's source plus the source
    of every :mod:`convbench.kernels` module that module imports, transitively (``gemm``,
    ``_numba_support``, ``layouts``, ``winograd_transforms``, ``base``, ...).

    Editing the kernel or a helper it uses changes the version; editing a kernel module it
    does not import does not.  Algorithms defined in one module share a version.  Sources
    are read from disk once per process (the result is cached), like asv's benchmark hash:
    results that carry it say when the kernel's code changed between runs."""
    get(name)   # an unknown name is the user's error
    root = _defining_module(name)
    digest = hashlib.sha256()
    for module_name, path in sorted(kernel_sources(root.__name__).items()):
        digest.update(module_name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:VERSION_DIGITS]


def _defining_module(name: str) -> ModuleType:
    """The module whose ALGORITHMS lists ``name``; else (an algorithm registered by hand,
    as tests do) the module of its ``build`` function."""
    for module_name in _algorithm_modules():
        module = _import(module_name)
        if any(alg.name == name for alg in getattr(module, "ALGORITHMS", ())):
            return module
    module = inspect.getmodule(get(name).build)
    if module is None:
        raise RuntimeError(f"algorithm {name!r} is registered but no module defines it")
    return module


def kernel_sources(module_name: str) -> dict[str, Path]:
    """``module_name``'s source file and those of the :mod:`convbench.kernels` modules it
    imports, directly or through one another, by module name.

    Imports are read from the source (``import``/``from ... import`` anywhere in it, lazy
    ones inside functions included), so nothing is imported to find them."""
    package = set(_package_modules())
    sources = {module_name: _source_path(module_name)}
    pending = [module_name]
    while pending:
        current = pending.pop()
        for imported in _imported_names(current, sources[current]):
            if imported in package and imported not in sources:
                sources[imported] = _source_path(imported)
                pending.append(imported)
    return sources


def _source_path(module_name: str) -> Path:
    return Path(importlib.util.find_spec(module_name).origin)


def _imported_names(module_name: str, path: Path) -> set[str]:
    """Every module name an import statement of the file could refer to: ``from a import b``
    gives both ``a`` and ``a.b`` (b may be a submodule)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            relative = "." * node.level + (node.module or "")
            base = importlib.util.resolve_name(relative, module_name.rpartition(".")[0])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


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
            for combo in alg.param_grid(params.get(name), problem):
                yield alg.variant(layout, combo), alg.applies(problem, layout, combo)

