"""What the tests need to run as two pytest-xdist workers (``pytest -n 2``) and stay true.

- **Serial tests.** A test marked ``serial`` measures times and judges them (the gate's
  end-to-end tests) or loads the CPUs on purpose (the busy warning): it runs with no other
  test beside it.  Measuring the machine's limits is not serial: those tests judge
  structure and plausibility only, and a serial test holds both cores (27 + 10 s of them).
  The two workers share a readers-writer lock (``flock`` on two files in a folder the
  controller makes): every test holds the ``rw`` file shared, a serial test holds it
  exclusively; the ``gate`` file gives a waiting serial test priority, so the other
  worker's next test waits instead of starving it.
- **Session work done once.** A session fixture (a smoke run, a tune) would otherwise run
  once per worker: :func:`once` runs it in one worker and the other reads what it left.

pyproject's ``--dist loadfile`` keeps a file's tests on one worker, so a module fixture (a run
the file's tests all read) is set up once, not once per worker.  Without xdist (``pytest``
alone, or one test) nothing here waits or shares.

- **Order.** xdist hands files out in the order it gets them (``--no-loadscope-reorder``;
  by default it sorts them by test count, which put a 73 s file last on one worker while
  the other had ended 96 s before).  :func:`order_files` hands out the longest first
  (``tests/durations.json``, refreshed by ``tools/test_durations.py``) so the two end
  together, and the files with serial tests last: the other worker waits through a serial
  test whenever it runs, and by the end the numba cache holds the kernels the other files
  compiled, so the README tour's serial smoke runs (33 s each with a cold numba cache, 13 s
  warm, Zen 4) do not compile while the other worker waits.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

MARKER = "serial"
DURATIONS = Path(__file__).with_name("durations.json")
SHARED_KEY = "convbench_shared_dir"   # the controller's folder, passed in workerinput


def shared_dir(config: pytest.Config) -> Path | None:
    """The folder the workers share, or None outside xdist."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or SHARED_KEY not in workerinput:
        return None
    return Path(workerinput[SHARED_KEY])


def controller_dir(config: pytest.Config) -> Path:
    """The controller's side: the session's one folder (made on the first call), removed
    by :func:`remove_shared_dir`."""
    if _STASH not in config.stash:
        config.stash[_STASH] = Path(tempfile.mkdtemp(prefix="convbench-tests-"))
    return config.stash[_STASH]


def remove_shared_dir(config: pytest.Config) -> None:
    path = config.stash.get(_STASH, None)
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


_STASH = pytest.StashKey[Path]()
_files: dict[Path, Any] = {}


def _open(path: Path) -> Any:
    # one open file per path and process: flock belongs to the open file, and reopening
    # for every test would cost a file handle each
    if path not in _files:
        _files[path] = path.open("a+")
    return _files[path]


@contextlib.contextmanager
def turn(config: pytest.Config, alone: bool) -> Iterator[None]:
    """Hold this worker's turn for one test: shared, or (``alone``) exclusive."""
    where = shared_dir(config)
    if where is None:
        yield
        return
    gate, rw = _open(where / "gate"), _open(where / "rw")
    fcntl.flock(gate, fcntl.LOCK_EX)      # a serial test keeps the gate until it is done
    fcntl.flock(rw, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
    if not alone:
        fcntl.flock(gate, fcntl.LOCK_UN)
    try:
        yield
    finally:
        fcntl.flock(rw, fcntl.LOCK_UN)
        if alone:
            fcntl.flock(gate, fcntl.LOCK_UN)


def once(config: pytest.Config, name: str, fallback: Path,
         make: Callable[[Path], dict]) -> tuple[dict, Path]:
    """``make(folder)``'s JSON-able answer and the folder it worked in, computed by the first
    worker to ask and read by the other; outside xdist, in ``fallback``."""
    where = shared_dir(config)
    if where is None:
        fallback.mkdir(parents=True, exist_ok=True)
        return make(fallback), fallback
    folder, answer = where / name, where / f"{name}.json"
    with (where / f"{name}.lock").open("a+") as lock:   # closing it unlocks
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not answer.is_file():
            folder.mkdir(exist_ok=True)
            answer.write_text(json.dumps(make(folder)))
    return json.loads(answer.read_text()), folder


def order_files(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place, a file's tests kept together and in their order: files
    without serial tests, longest first (a file missing from the durations as a short one),
    then those with serial tests, longest first."""
    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def key(path: str) -> tuple[bool, float]:
        serial = any(i.get_closest_marker(MARKER) is not None for i in files[path])
        return serial, -seconds.get(path, 0.0)

    items[:] = [item for path in sorted(files, key=key) for item in files[path]]
