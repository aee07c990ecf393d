"""The registry: discovery by rule and the kernel version (a hash of the code behind it)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from convbench.kernels import registry

# A kernel module the test can edit; its build is never called, only its source is hashed.
PROBE_MODULE = '''
from convbench.kernels.base import Algorithm


def _build(problem, w, layout, params):
    raise NotImplementedError("only the version of this kernel is asked")


ALGORITHMS = [Algorithm(name="{name}", title="version probe", source="tests",
                        layouts=("nchw",), build=_build)]
'''


def _clear_caches() -> None:
    registry.algorithms.cache_clear()
    registry.kernel_version.cache_clear()


@pytest.fixture
def probe_kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                  ) -> Iterator[Callable[[str, str], None]]:
    """Registers t_probe_a and t_probe_b (modules probe_a, probe_b in ``tmp_path``) through
    CONVBENCH_EXTRA_KERNELS; yields ``edit(module, line)``, which appends a line to one and
    clears the registry's caches, as a new process would start without them."""
    modules = ("probe_a", "probe_b")
    for module in modules:
        (tmp_path / f"{module}.py").write_text(PROBE_MODULE.format(name=f"t_{module}"))
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(registry.EXTRA_KERNELS_ENV, ",".join(modules))
    _clear_caches()

    def edit(module: str, line: str) -> None:
        with open(tmp_path / f"{module}.py", "a") as source:
            source.write(f"{line}\n")
        _clear_caches()

    yield edit
    _clear_caches()
    for module in modules:
        sys.modules.pop(module, None)


def test_discovery_skips_underscore_modules_and_registers_only_algorithms():
    algorithms = registry.algorithms()
    assert {"direct", "im2col", "winograd2x2"} <= set(algorithms)
    # infrastructure modules have no ALGORITHMS; _numba_support is never imported for them
    assert not {"base", "layouts", "reference", "asm", "registry"} & set(algorithms)


def test_version_is_short_hex_and_stable():
    version = registry.kernel_version("im2col")
    assert len(version) == registry.VERSION_DIGITS
    int(version, 16)
    assert registry.kernel_version("im2col") == version
    registry.kernel_version.cache_clear()
    assert registry.kernel_version("im2col") == version


def test_algorithms_in_different_modules_differ_and_one_module_shares():
    assert registry.kernel_version("direct") != registry.kernel_version("im2col")
    assert registry.kernel_version("winograd2x2") == registry.kernel_version("winograd4x4")


def test_version_covers_the_kernel_helpers_it_imports_and_nothing_else():
    sources = registry.kernel_sources("convbench.kernels.im2col")
    helpers = {"convbench.kernels.gemm", "convbench.kernels._numba_support",
               "convbench.kernels.base"}
    assert helpers <= set(sources)
    assert "convbench.kernels.direct" not in sources
    assert sources["convbench.kernels.gemm"].name == "gemm.py"
    winograd = registry.kernel_sources("convbench.kernels.winograd")
    assert "convbench.kernels.winograd_transforms" in winograd


def test_editing_a_kernel_changes_its_version_only(probe_kernels):
    before_a = registry.kernel_version("t_probe_a")
    before_b = registry.kernel_version("t_probe_b")
    assert before_a != before_b

    probe_kernels("probe_a", "# an edit")
    assert registry.kernel_version("t_probe_a") != before_a
    assert registry.kernel_version("t_probe_b") == before_b


def test_unknown_algorithm_is_a_user_error():
    from convbench.errors import ConvbenchError

    with pytest.raises(ConvbenchError):
        registry.kernel_version("no_such_kernel")
