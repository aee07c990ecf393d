"""A wheel install (no checkout around it) lists and shows the shipped suites.

The suites are package data read through importlib.resources; a path computed from the
checkout's layout finds nothing in site-packages.  The wheel is built without build
isolation and installed with ``--no-deps`` into a fresh venv that reuses this interpreter's
packages (numpy, numba, ...), so the test needs no network.  The venv runs with a clean
environment from a directory outside the checkout, and the test checks that it imported the
installed copy: if the editable install leaked in, the test could not fail.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = {p.stem for p in (ROOT / "convbench" / "suites").glob("*.yaml")}
_MISSING = [m for m in ("pip", "venv", "setuptools", "wheel") if not importlib.util.find_spec(m)]

pytestmark = pytest.mark.skipif(
    bool(_MISSING), reason=f"building and installing a wheel offline needs {_MISSING} "
                           f"(the test extras: pip install -e '.[test]')")


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path, dict[str, str]]:
    """(venv python, a working directory outside the checkout, a clean environment)."""
    tmp = tmp_path_factory.mktemp("wheel")
    # Build from a copy so the test writes nothing (build/, *.egg-info) into the checkout.
    source = tmp / "source"
    shutil.copytree(ROOT / "convbench", source / "convbench",
                    ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "-w", str(tmp / "dist"), str(source)], cwd=tmp)
    (wheel,) = (tmp / "dist").glob("convbench-*.whl")

    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
         cwd=tmp)
    python = venv / "bin" / "python"
    # --system-site-packages reaches the base interpreter's packages only; when this
    # interpreter is itself a venv, a .pth adds its site-packages as plain paths (the .pth
    # files there, such as the editable install's finder, are not run from such a path).
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                   cwd=tmp).strip()
    Path(purelib, "running_env.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
          "--no-index", str(wheel)], cwd=tmp)

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "CONVBENCH_")) and k != "VIRTUAL_ENV"}
    outside = tmp / "elsewhere"
    outside.mkdir()
    return python, outside, env


def test_the_installed_package_is_imported_not_the_checkout(installed):
    python, cwd, env = installed
    where = _run([str(python), "-c", "import convbench; print(convbench.__file__)"], cwd, env)
    assert Path(where.strip()).is_relative_to(python.parents[1]), where


def test_suites_lists_the_shipped_suites(installed):
    python, cwd, env = installed
    out = _run([str(python), "-m", "convbench", "suites"], cwd, env)
    listed = {line.split()[0] for line in out.splitlines()[2:] if line.strip()}
    assert SHIPPED and listed == SHIPPED, out


def test_show_finds_a_shipped_suite_by_name(installed):
    python, cwd, env = installed
    out = _run([str(python), "-m", "convbench", "show", "smoke"], cwd, env)
    assert out.startswith("smoke:") and "conv3x3_s1" in out, out
