"""The machine limits a run divides by: the stored ones, or a quick measurement first.

Without limits a run's report has no roofs and ``peak_share`` stays empty until the user
finds ``convbench machine`` (issue 15).  So ``convbench run`` on a host with nothing stored
(or only an older format, see :mod:`.store`) measures the quick profile first (~10-20 s on
2 cores), stores it per host and goes on.  ``--no-measure-machine`` or
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
    """This host's stored limits; when there are none and ``measure`` (None: the
    environment's choice), the quick profile measured now for 1..CPUs and ``threads``,
    stored for later runs.  None when nothing is stored and measuring is off."""
    from convbench.machine import store

    limits = store.machine_limits()
    if limits is not None or not (measure_by_default() if measure is None else measure):
        return limits
    from convbench.machine.measure import measure_machine

    counts = sorted(set(range(1, (os.cpu_count() or 1) + 1)) | set(threads))
    progress(f"no machine limits stored for this host in {store.default_dir()}: measuring "
             "them once (quick profile; --no-measure-machine skips)")
    limits = measure_machine(counts, quick=True,
                             progress=lambda step: progress(f"  measuring {step} ..."))
    path = store.save(limits)
    progress(f"machine limits measured in {limits['seconds']:.1f} s, stored in {path}")
    return limits
