"""The machine limits a run divides by: the stored ones, or a quick measurement first.

Without limits a run's report has no roofs and ``peak_share`` stays empty until the user
finds ``convbench machine`` (issue 15).  So ``convbench run`` on a host with nothing stored
(or only an older format, see :mod:`.store`) measures the quick profile first for the thread
counts the run needs (~10-20 s on 2 cores), stores it per host and goes on; a later run with
other thread counts measures only those and adds them.  ``--no-measure-machine`` or
``CONVBENCH_MEASURE_MACHINE=0`` skips that (the shares are then NaN, as before); the test
suite sets the variable so only the tests that ask for a measurement pay for one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

MEASURE_ENV = "CONVBENCH_MEASURE_MACHINE"


def measure_by_default() -> bool:
    """False when ``CONVBENCH_MEASURE_MACHINE`` is 0, no, false or off."""
    return os.environ.get(MEASURE_ENV, "1").strip().lower() not in ("0", "no", "false", "off")


def limits_for_run(threads: Iterable[int], measure: bool | None = None,
                   progress: Callable[[str], None] = lambda _: None
                   ) -> dict[str, Any] | None:
    """This host's stored limits, completed for ``threads``: when nothing is stored, or the
    stored limits lack some of those thread counts, and ``measure`` (None: the
    environment's choice), the quick profile measures the missing counts now (1 thread
    always: ``auto`` picks its width from the 1-thread peaks) and stores them with the rest.
    What is stored (possibly None) when measuring is off."""
    from convbench.machine import store

    limits = store.machine_limits()
    wanted = set(threads) | {1}
    missing = sorted(wanted - store.measured_threads(limits))
    if not missing or not (measure_by_default() if measure is None else measure):
        return limits
    from convbench.machine.measure import measure_machine

    # only the counts this run needs: measuring 1..CPUs took 135 s on a 16-CPU host
    where = store.default_dir()
    progress(f"no machine limits stored for {_counts(missing)} in {where}: measuring them "
             "once (quick profile; --no-measure-machine skips)")
    added = measure_machine(missing, quick=True,
                            progress=lambda step: progress(f"  measuring {step} ..."))
    known = set() if limits is None else set(limits.get("notes", []))
    limits = added if limits is None else store.merge(limits, added)
    path = store.save(limits)
    progress(f"machine limits measured in {added['seconds']:.1f} s, stored in {path}")
    for note in added.get("notes", []):
        if note not in known:   # e.g. a peak that did not scale: said now, not found later
            progress(f"  note: {note}")
    return limits


def _counts(threads: list[int]) -> str:
    return ("this host" if threads == [1] else
            f"{', '.join(map(str, threads))} threads on this host")
