"""Hardware and simulated counters around the measured region: the contract the worker uses.

The worker process opens one :class:`CounterSession` (``open_session``) and, after a case's
timing, runs a counted pass::

    with session.region(prepare):   # only these calls are counted; prepare() runs first,
        for _ in range(calls):      # outside the count (cold modes: the eviction)
            prepared.run(x, y)
    row.update(session.read(calls))  # columns for the tidy table, per call

``read`` returns raw counts as ``ctr_<event>`` and derived metrics (schema.COUNTER_METRICS),
NaN with a ``<name>_reason`` string where a figure is missing.  Backends:

- ``none``: nothing is counted.
- ``perf``: ``perf stat`` attached to the worker, enabled/disabled through its control FIFO.
- ``sim``:  callgrind's cache simulation; the worker must run under valgrind, so the runner
  starts it with :func:`worker_prefix` and in a separate pass (:func:`needs_separate_pass`),
  since timing under simulation means nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Protocol

from convbench.errors import ConvbenchError

KINDS = ("none", "perf", "sim")


Prepare = Callable[[], None] | None


class CounterSession(Protocol):
    kind: str

    def region(self, prepare: Prepare = None) -> contextlib.AbstractContextManager[None]: ...

    def read(self, calls: int) -> dict[str, float | str]: ...

    def close(self) -> None: ...


class NullSession:
    """Counts nothing; ``read`` adds no columns."""

    kind = "none"

    @contextlib.contextmanager
    def region(self, prepare: Prepare = None) -> Iterator[None]:
        if prepare is not None:
            prepare()
        yield

    def read(self, calls: int) -> dict[str, float | str]:
        return {}

    def close(self) -> None:
        pass


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ConvbenchError(f"unknown counters backend {kind!r}; expected one of "
                             f"{', '.join(KINDS)}")


def needs_separate_pass(kind: str) -> bool:
    """Whether counting must run apart from timing (simulation is ~50-100x slower)."""
    _check_kind(kind)
    return kind == "sim"


def worker_prefix(kind: str, **options: str) -> list[str]:
    """Command prefix for the worker process of a counting pass ([] when none is needed)."""
    _check_kind(kind)
    if kind == "sim":
        from convbench.harness.counters import sim

        return sim.worker_prefix(**options)
    return []


def open_session(kind: str, **options: str) -> CounterSession:
    """Open the backend inside the worker process (once per worker, not per case)."""
    _check_kind(kind)
    if kind == "perf":
        from convbench.harness.counters import perf

        return perf.open_session(**options)
    if kind == "sim":
        from convbench.harness.counters import sim

        return sim.open_session(**options)
    return NullSession()
