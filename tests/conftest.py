"""Helpers shared by the tests: the checkout's paths and the two ways to call the CLI."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import parallel

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def pytest_configure(config: pytest.Config) -> None:
    """`convbench run` measures the machine on a host without stored limits (~10-20 s):
    the tests that run it by the dozen opt out here (in-process and, through os.environ,
    in the processes they start); tests/test_machine_limits.py measures once on purpose.
    Set CONVBENCH_MEASURE_MACHINE=1 to run the whole suite with measurement."""
    from convbench.machine.first_use import MEASURE_ENV

    os.environ.setdefault(MEASURE_ENV, "0")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist's controller, per worker: the folder the workers share (tests/parallel.py)."""
    node.workerinput[parallel.SHARED_KEY] = str(parallel.controller_dir(node.config))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the order the files are handed out in (tests/parallel.py): the workers'
    collections are the ones the controller schedules, so only they reorder."""
    if parallel.shared_dir(config) is not None:
        parallel.order_files(items)


def pytest_unconfigure(config: pytest.Config) -> None:
    parallel.remove_shared_dir(config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """A test marked ``serial`` runs with no other test beside it (tests/parallel.py)."""
    with parallel.turn(item.config, item.get_closest_marker(parallel.MARKER) is not None):
        return (yield)


@contextlib.contextmanager
def numba_threads(threads: int) -> Iterator[None]:
    """numba's parallel loops with ``threads`` threads inside the block, the count before it
    restored after; the test is skipped where numba has fewer (a one-CPU machine)."""
    import numba

    if threads > numba.config.NUMBA_NUM_THREADS:
        pytest.skip(f"numba has {numba.config.NUMBA_NUM_THREADS} thread(s), not {threads}")
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        yield
    finally:
        numba.set_num_threads(before)


def convbench_process(*args: object, env: dict | None = None, check: bool = False,
                      timeout: float = 600, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``python -m convbench ARGS`` as its own process, from the checkout root (so test
    kernels under ``tests`` import) unless told, output captured as text."""
    return subprocess.run([sys.executable, "-m", "convbench", *map(str, args)], cwd=cwd,
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
def smoke_run(request, tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """One real ``convbench run smoke -q`` shared by the session (its output and results
    directory; read it, never write into it): a smoke run costs 30-45 s on two cores, and
    tests/test_smoke_suite.py and tests/test_compare_gate.py each needed one.  No test
    judges its timings, so it may be measured beside another test."""
    def make(folder: Path) -> dict:
        done = convbench_process("run", "smoke", "-q", "-o", folder / "run")
        return {"args": done.args, "returncode": done.returncode, "stdout": done.stdout,
                "stderr": done.stderr}

    fields, folder = parallel.once(request.config, "smoke", tmp_path_factory.mktemp("smoke"),
                                   make)
    done = subprocess.CompletedProcess(**fields)
    assert done.returncode == 0, done.stdout + done.stderr
    return done, folder / "run"


@pytest.fixture(scope="session")
def tuned(request, tmp_path_factory) -> Path:
    """One real ``convbench tune`` of tests/data/tune_suite.yaml (one layer, six
    candidates, cold-weights) shared by the session: its records file (read it, never
    append to it).  tests/test_tune.py and tests/test_tune_prior.py each needed one."""
    from convbench.harness.options import RunOptions
    from convbench.tune.session import tune_suite

    def make(folder: Path) -> dict:
        outcome = tune_suite(DATA / "tune_suite.yaml", RunOptions(cache=("cold-weights",)),
                             folder / "records.jsonl", quiet=True)
        (group,) = outcome.groups
        return {"spent": outcome.budget_spent, "interrupted": outcome.interrupted,
                "group": [group.candidates, group.measured, group.rounds]}

    made, folder = parallel.once(request.config, "tune", tmp_path_factory.mktemp("tune"), make)
    assert not made["spent"] and not made["interrupted"]
    assert made["group"] == [6, 8, 2]
    return folder / "records.jsonl"


SIM_ONLY = ("--only", "layer=conv3x3,variant=direct/nhwc")


@pytest.fixture(scope="session")
def sim_runs(request, tmp_path_factory) -> tuple[list[dict], Path]:
    """Two real ``convbench run tests/data/tiny_suite.yaml --counters sim`` of one case, the
    first from an empty numba cache, from a folder that changes between them, shared by
    the session: their exit codes and stderr, and the folder holding them (``a``, ``b``;
    callgrind's dumps kept in ``keep-a``, ``keep-b``).
    A run under valgrind costs 15-20 s; tests/test_sim_run_determinism.py compares the two,
    tests/test_report_counters_sim.py draws the first."""
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed")

    def make(folder: Path) -> dict:
        from convbench.harness.counters import sim

        env = {**os.environ, "NUMBA_CACHE_DIR": str(folder / "numba-cache")}
        # Run from a folder that gains an entry between the runs, as a user's folder gains
        # results/: workers once had it first on sys.path, and its listing moved the
        # counts (harness/supervise.py).
        here = folder / "cwd"
        here.mkdir()
        runs = []
        for name in ("a", "b"):
            # the dumps kept (the same path length for both runs: the worker sees this too)
            env[sim.KEEP_ENV] = str(folder / f"keep-{name}")
            done = convbench_process("run", DATA / "tiny_suite.yaml", "-o", folder / name,
                                     "--counters", "sim", "-q", *SIM_ONLY, env=env,
                                     timeout=300, cwd=here)
            (here / f"made-after-run-{name}").mkdir()
            runs.append({"returncode": done.returncode, "stderr": done.stderr})
        return {"runs": runs}

    made, folder = parallel.once(request.config, "sim", tmp_path_factory.mktemp("sim"), make)
    return made["runs"], folder
