"""What a dask worker runs for one group: the ordinary worker path, rows shipped back.

The task rebuilds the plan from the suite's text and the run's options on the worker's
host (skip reasons, such as a library that is not installed, are that host's), takes the
cases of its group and runs them through :meth:`Runner.run_group`, the very code a local
run uses (worker processes, verification, timing, crash isolation).  Instead of a results
directory the runner writes into a :class:`GroupSink`, whose rows and values go back to
the client with the host's environment.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convbench.errors import ConvbenchError

# The host's environment.json is collected once per worker process (0.5 s of busy
# measurement, the machine limits' lookup): a farm run sends it dozens of groups.
_ENVIRONMENTS: dict[bool | None, dict[str, Any]] = {}


@dataclass(frozen=True)
class GroupTask:
    """One group of one host's plan: what the client sends (plain data, pickled by dask)."""

    suite_name: str
    suite_text: str
    options: dict[str, Any]            # RunOptions.to_json()
    case_ids: tuple[str, ...]          # the group's cases still to run, in plan order
    measure_machine: bool | None = None


class GroupSink:
    """Stands in for the results store a :class:`Runner` writes to: keeps the group's rows
    and values to ship them; counter figures from a counting pass merge into the rows."""

    def __init__(self, environment: dict[str, Any]):
        self.environment = environment
        self.manifest: dict[str, Any] = {}
        self.rows: list[dict[str, Any]] = []
        self.values: list[dict[str, Any]] = []
        self.done: set[str] = set()

    def add(self, row: dict[str, Any], values: list[dict[str, Any]] | None = None) -> None:
        self.rows.append(row)
        self.values.extend(values or [])

    def update(self, case_id: str, figures: Mapping[str, Any]) -> None:
        for row in self.rows:
            if row["case_id"] == case_id:
                row.update(figures)

    def save_environment(self) -> None:
        pass   # the environment travels back with the rows


def host_environment(measure_machine: bool | None, threads: set[int]) -> dict[str, Any]:
    """environment.json of this host (collected once per worker process)."""
    if measure_machine not in _ENVIRONMENTS:
        from convbench.harness import affinity, sysinfo
        from convbench.machine.first_use import limits_for_run

        limits = limits_for_run(threads, measure_machine)
        _ENVIRONMENTS[measure_machine] = sysinfo.collect(limits, affinity.resolve_pool(()))
    return {**_ENVIRONMENTS[measure_machine], "workers": {}}


def run_group(task: GroupTask) -> dict[str, Any]:
    """Run one group on this host; its rows, values, environment and when it ran.

    ``started``/``ended`` are wall-clock seconds (``time.time()``), comparable across the
    processes of one host: the farm records them so the bench resource's one-task-per-
    worker promise can be checked afterwards."""
    from convbench.harness import counters
    from convbench.harness.options import RunOptions, make_plan
    from convbench.harness.runner import Runner
    from convbench.results import record
    from convbench.spec.suite import parse_suite
    from convbench.status import Status

    started = time.time()
    options = RunOptions.from_json(task.options)
    plan = make_plan(parse_suite(task.suite_text, Path(f"{task.suite_name}.yaml")), options)
    by_id = {c.case_id: c for c in plan.cases}
    absent = [cid for cid in task.case_ids if cid not in by_id]
    if absent:
        raise ConvbenchError(f"{socket.gethostname()}: this host's plan lacks {absent[0]} "
                             "(another convbench version or suite here?)")
    cases = [by_id[cid] for cid in task.case_ids]
    sink = GroupSink(host_environment(task.measure_machine, {c.threads for c in cases}))
    runner = Runner(plan, sink, options, quiet=True)  # type: ignore[arg-type]
    for case in cases:
        if case.skip_reason is not None:
            runner.record(record.outcome_row(case, Status.SKIP, case.skip_reason))
    runnable = [c for c in cases if c.skip_reason is None]
    if runnable:
        with runner.measuring():
            runner.run_group(runnable)
            if counters.needs_separate_pass(options.counters):
                ok = {r["case_id"] for r in sink.rows if r["status"] == Status.OK}
                counted = [c for c in runnable if c.case_id in ok]
                if counted:
                    runner.run_group(counted, count_only=True)
    return {"rows": sink.rows, "values": sink.values, "environment": sink.environment,
            "worker": _this_worker(), "started": started, "ended": time.time()}


def _this_worker() -> dict[str, str]:
    """The dask worker running this task (its name and address), and the host's name."""
    from distributed import get_worker

    worker = get_worker()
    return {"name": str(worker.name), "address": worker.address,
            "hostname": socket.gethostname()}
