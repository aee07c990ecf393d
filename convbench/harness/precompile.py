"""Compile a run's numba kernels on every allowed CPU at once, before anything is timed.

Why: a worker that compiles measures nothing and is restarted (harness/compiled.py), so on
a cold numba cache every group compiles in one process, one group after another, while the
other CPUs idle: two thirds of the smoke suite's first run on two cores.  Compile-only
workers (``Job.compile_only``: verify every case, time nothing) run side by side here,
each on its own part of the cases, and leave the kernels in numba's cache; the timing
workers then load them.  Nothing is timed while this runs, and nothing they report is
recorded: the timing pass verifies every case again and records failures itself.

Which cases need it: those not stamped as compiled.  A stamp is an empty file under
``$XDG_CACHE_HOME/convbench/compiled/`` named by a hash of what selects the machine code
(variant, layer shape, compile width, the algorithm's kernel version, numba's version, its
cache directory, the package's place, and whether one thread runs it: a serial build then);
it is written once a case has run in a worker that ended normally.  A warm run finds every
stamp and starts no extra process.  A stamp that lies (numba's cache was wiped) costs
only the old behaviour: the timing worker compiles and is restarted.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from convbench import host
from convbench.harness.plan import Case
from convbench.harness.protocol import Job, Message, Result
from convbench.status import Status


def stamp_dir() -> Path:
    return host.cache_dir() / "compiled"


def _stamp(case: Case, compile_width: str) -> Path:
    import numba

    import convbench

    # numba caches beside the sources unless NUMBA_CACHE_DIR says where: both place it;
    # on one thread a kernel may launch its serial build (_numba_support.launched_build)
    key = "\n".join((case.variant.id, str(case.problem), compile_width, case.kernel_version,
                     numba.__version__, os.environ.get("NUMBA_CACHE_DIR", ""),
                     str(Path(convbench.__file__).resolve().parent),
                     "serial" if case.threads == 1 else "parallel"))
    return stamp_dir() / hashlib.sha256(key.encode()).hexdigest()[:24]


def needs_compile(case: Case, compile_width: str) -> bool:
    """Whether ``case``'s kernels may be missing from numba's cache (no stamp)."""
    return not case.baseline and not _stamp(case, compile_width).exists()


def mark_compiled(cases: Sequence[Case], compile_width: str) -> None:
    """Stamp ``cases`` as compiled for ``compile_width`` (best effort: a read-only cache
    directory only means the next run compiles in the timing workers again)."""
    try:
        stamp_dir().mkdir(parents=True, exist_ok=True)
        for case in cases:
            if not case.baseline:
                _stamp(case, compile_width).touch()
    except OSError:
        pass


def chunks(cases: Sequence[Case], parts: int) -> list[list[Case]]:
    """``cases`` (one group's) split by algorithm into at most ``parts`` lists of similar
    length: an algorithm's variants share kernels, so one worker compiles them."""
    by_algorithm: dict[str, list[Case]] = {}
    for case in cases:
        by_algorithm.setdefault(case.variant.algorithm, []).append(case)
    bins: list[list[Case]] = [[] for _ in range(max(1, parts))]
    for members in sorted(by_algorithm.values(), key=len, reverse=True):
        min(bins, key=len).extend(members)
    return [b for b in bins if b]


def compile_ahead(jobs: Sequence[tuple[list[Case], Job]], workers: int, timeout: float,
                  scratch: Path | None,
                  on_done: Callable[[list[Case], Job], None],
                  prefix: Sequence[str] = ()) -> None:
    """Run every compile-only ``job`` (its cases, the job), ``workers`` at a time, each
    worker's command after ``prefix``; call ``on_done`` for each job whose worker ended
    without a failed case."""
    from convbench.harness.supervise import WorkerProcess

    def one(item: tuple[list[Case], Job]) -> None:
        cases, job = item
        failed: list[Message] = []

        def on_message(message: Message) -> None:
            if isinstance(message, Result) and message.status != Status.OK:
                failed.append(message)

        end = WorkerProcess(job, timeout, prefix, scratch).run(on_message)
        if end.status is None and not failed:
            on_done(cases, job)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for _ in pool.map(one, jobs):
            pass
