"""Helpers shared by the tests: the checkout's paths and the two ways to call the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def pytest_configure(config: pytest.Config) -> None:
    """`convbench run` measures the machine on a host without stored limits (~10-20 s):
    the tests that run it by the dozen opt out here (in-process and, through os.environ,
    in the processes they start); tests/test_machine_limits.py measures once on purpose.
    Set CONVBENCH_MEASURE_MACHINE=1 to run the whole suite with measurement."""
    from convbench.machine.first_use import MEASURE_ENV

    os.environ.setdefault(MEASURE_ENV, "0")


def convbench_process(*args: object, env: dict | None = None, check: bool = False,
                      timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m convbench ARGS`` as its own process, from the checkout root (so test
    kernels under ``tests`` import), output captured as text."""
    return subprocess.run([sys.executable, "-m", "convbench", *map(str, args)], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=check,
                          timeout=timeout)


@pytest.fixture
def cli(capsys) -> Callable[..., tuple[int, str, str]]:
    """Call ``convbench ARGS`` in this process: (exit code, stdout, stderr)."""
    from convbench.cli import main

    def call(*args: object) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exit_info:
            main([str(a) for a in args])
        out = capsys.readouterr()
        return exit_info.value.code, out.out, out.err

    return call


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """One real ``convbench run smoke -q`` shared by the session (its output and results
    directory; read it, never write into it): a smoke run costs 30-45 s on two cores, and
    tests/test_smoke_suite.py and tests/test_compare_gate.py each needed one."""
    out = tmp_path_factory.mktemp("smoke") / "run"
    done = convbench_process("run", "smoke", "-q", "-o", out)
    assert done.returncode == 0, done.stdout + done.stderr
    return done, out


@pytest.fixture(scope="session")
def tuned(tmp_path_factory) -> Path:
    """One real ``convbench tune`` of tests/data/tune_suite.yaml (one layer, six
    candidates, cold-weights) shared by the session: its records file (read it, never
    append to it).  tests/test_tune.py and tests/test_tune_prior.py each needed one."""
    from convbench.harness.options import RunOptions
    from convbench.tune.session import tune_suite

    path = tmp_path_factory.mktemp("tune") / "records.jsonl"
    outcome = tune_suite(DATA / "tune_suite.yaml", RunOptions(cache=("cold-weights",)), path,
                         quiet=True)
    assert not outcome.budget_spent and not outcome.interrupted
    (group,) = outcome.groups
    assert (group.candidates, group.measured, group.rounds) == (6, 8, 2)
    return path
