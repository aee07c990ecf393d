"""The farm's client: connect to the scheduler, send the groups, collect rows, lose groups.

Every group becomes one dask task asking for ``bench=1``; with ``--every-host`` each host
gets every group, pinned to it by its worker's name, with ``--shard`` each group goes to
whichever host is free.  Rows land in the host's directory as each task finishes
(:mod:`convbench.farm.hosts`), so a killed client resumes with ``--resume``.

A worker that dies takes only its running task with it.  dask reschedules that task:
under ``--shard`` on another host, under ``--every-host`` on the same host when it comes
back (a nanny restarts it).  A group is *lost*, recorded in ``farm.json`` and left for
``--resume``, when dask gives it up (the task killed workers ``allowed-failures`` times,
or raised), or when no host that may run it has been connected for ``lost_after_s``.
"""

from __future__ import annotations

import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convbench.errors import ConvbenchError
from convbench.farm import layout
from convbench.farm.hosts import HostStores
from convbench.farm.task import GroupTask, run_group
from convbench.harness.plan import Case, Plan
from convbench.results.store import now_utc

RESOURCE = "bench"
LOST_AFTER_S = 60.0
POLL_S = 0.5
WORKER_RECIPE = (f"dask worker tcp://HOST:PORT --nthreads 1 --resources {RESOURCE}=1 "
                 "--name $(hostname)")


def connect(address: str) -> Any:
    """A dask Client of the scheduler at ``address``; one clear line when there is none."""
    try:
        from distributed import Client
    except ImportError:
        raise ConvbenchError("--scheduler needs dask.distributed: pip install "
                             "'convbench[farm]'") from None
    try:
        return Client(address, timeout="15s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise ConvbenchError(f"--scheduler {address}: cannot connect "
                             f"({type(exc).__name__}: {exc})") from None


def bench_workers(client: Any) -> dict[str, str]:
    """Connected workers that offer the bench resource: host label -> dask name to pin to.

    A worker's label is its ``--name`` (the recipe names it after its host), or its
    address when it has none."""
    # Ask the scheduler and use its answer, not ``client.scheduler_info()``: that returns the
    # client's shared cache, which the client's own periodic refresh (worker-less, n_workers=0)
    # may overwrite between the fetch and the read -- a loaded host then saw healthy workers
    # "depart" and killed ones come back.
    identity = client.sync(client.scheduler.identity, n_workers=-1)
    out = {}
    for address, info in identity["workers"].items():
        if info.get("resources", {}).get(RESOURCE, 0) < 1:
            continue
        name = info.get("name")
        label = str(name) if name is not None and str(name) != address else address
        out[label] = str(name) if name is not None else address
    return out


@dataclass
class Pending:
    """A submitted task: the group, and the host it is pinned to (None: any host)."""

    group: tuple[Any, ...]
    case_ids: tuple[str, ...]
    host: str | None


@dataclass
class FarmRun:
    """One farm run's state while it goes: the manifest, the host stores, the futures."""

    path: Path
    meta: dict[str, Any]
    plan: Plan
    hosts: HostStores
    client: Any
    say: Callable[[str], None]
    lost_after_s: float = LOST_AFTER_S
    measure_machine: bool | None = None
    pending: dict[Any, Pending] = field(default_factory=dict)
    absent_since: dict[str | None, float] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)   # hosts connected at the last look

    @property
    def shard(self) -> bool:
        return self.meta["mode"] == "shard"

    def whole(self) -> bool:
        """Whether every planned case has its row (on every host, for every-host)."""
        planned = set(self.meta["planned"])
        if self.shard:
            return planned <= self.hosts.done()
        return all(planned <= self.hosts.done(h) for h in self.meta["hosts"])

    def submit(self, group: list[Case], host: str | None, pin: str | None) -> None:
        done = self.hosts.done(host)
        todo = tuple(c.case_id for c in group if c.case_id not in done)
        if not todo:
            return
        task = GroupTask(self.meta["suite"], self.hosts.suite_text, self.meta["options"],
                         todo, self.measure_machine)
        key = f"convbench-{host or 'shard'}-{_group_text(group[0].group)}-{uuid.uuid4().hex}"
        future = self.client.submit(run_group, task, key=key, resources={RESOURCE: 1},
                                    workers=[pin] if pin else None,
                                    allow_other_workers=False, pure=False)
        self.pending[future] = Pending(group[0].group, todo, host)

    def collect(self) -> None:
        """Wait for tasks; record each that finished and each that was lost."""
        from distributed import wait

        while self.pending:
            try:
                finished, _ = wait(list(self.pending), timeout=POLL_S,
                                   return_when="FIRST_COMPLETED")
            except TimeoutError:
                finished = set()
            for future in finished:
                self.settle(future, self.pending.pop(future))
            events = self.events()
            self.watch_hosts()
            if finished or self.events() != events:   # farm.json holds every planned id:
                layout.write(self.path, self.meta)    # written when something happened

    def events(self) -> int:
        return len(self.meta["tasks"]) + len(self.meta["lost"]) + len(self.meta["departed"])

    def settle(self, future: Any, job: Pending) -> None:
        if future.status == "finished":
            result = future.result()
            host = job.host or result["worker"]["name"]
            self.hosts.add(host, result)
            self.meta["tasks"].append({"host": host, "worker": result["worker"],
                                       "group": list(job.group), "cases": list(job.case_ids),
                                       "started": result["started"],
                                       "ended": result["ended"]})
            self.progress(host, job, result["rows"])
            return
        if future.status == "cancelled":
            reason = "cancelled"
        else:
            exc = future.exception()
            reason = f"{type(exc).__name__}: {exc}"
        self.lose(job, reason)

    def lose(self, job: Pending, reason: str) -> None:
        self.meta["lost"].append({"host": job.host, "group": list(job.group),
                                  "cases": list(job.case_ids), "reason": reason})
        self.say(f"lost {_group_text(job.group)}"
                 f"{f' on {job.host}' if job.host else ''}: {reason}")

    def watch_hosts(self) -> None:
        """Lose the tasks no connected host may run any more (after ``lost_after_s``)."""
        connected = set(bench_workers(self.client))
        for host in sorted(self.seen - connected):   # its worker died or was stopped
            self.meta["departed"].append({"host": host, "time": now_utc()})
        self.seen = connected
        now = time.monotonic()
        for host in {job.host for job in self.pending.values()}:
            present = bool(connected) if host is None else host in connected
            if present:
                self.absent_since.pop(host, None)
                continue
            since = self.absent_since.setdefault(host, now)
            if now - since < self.lost_after_s:
                continue
            for future, job in list(self.pending.items()):
                if job.host == host:
                    future.cancel()
                    del self.pending[future]
                    self.lose(job, f"no worker {'of ' + host if host else 'at all'} "
                                   f"connected for {self.lost_after_s:g} s")

    def progress(self, host: str, job: Pending, rows: list[dict[str, Any]]) -> None:
        ok = sum(r["status"] == "ok" for r in rows)
        on_host = len(self.hosts.done(host))
        of = len(self.meta["planned"]) if not self.shard else "?"
        done = len(self.meta["tasks"])
        self.say(f"{host}: {_group_text(job.group)}: {ok}/{len(rows)} ok "
                 f"[{host}: {on_host}/{of} cases; farm: {done}/{self.meta['groups']} groups]")


def _group_text(group: tuple[Any, ...]) -> str:
    layer, threads, width, cache = group
    return f"{layer}-t{threads}-v{width}-{cache}"


def _say(quiet: bool) -> Callable[[str], None]:
    return (lambda line: None) if quiet else (lambda line: print(line, file=sys.stderr,
                                                                  flush=True))


def start(suite_path: str | Path, output: Path | None, options: Any, scheduler: str,
          mode: str, quiet: bool = False, measure_machine: bool | None = None,
          lost_after_s: float = LOST_AFTER_S) -> FarmRun:
    """Plan the suite and create the farm directory (nothing sent yet)."""
    from convbench.harness.options import make_plan
    from convbench.harness.runner import default_output
    from convbench.spec.suite import load_suite

    if options.records:
        raise ConvbenchError("--records applies one host's tuning: not with --scheduler")
    suite = load_suite(suite_path)
    plan = make_plan(suite, options)
    assert suite.path is not None
    client = connect(scheduler)
    workers = bench_workers(client)
    if not workers:
        client.close()
        raise ConvbenchError(f"--scheduler {scheduler}: no worker offers the {RESOURCE} "
                             f"resource; start one per host with: {WORKER_RECIPE}")
    path = output or default_output(suite)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        client.close()
        raise ConvbenchError(f"{path}: output directory exists and is not empty; use "
                             f"--resume {path} to finish it or pick another -o")
    path.mkdir(parents=True, exist_ok=True)
    text = suite.path.read_text()
    (path / "suite.yaml").write_text(text)
    meta = {"format": layout.FORMAT, "mode": mode, "scheduler": scheduler,
            "suite": suite.name, "created": now_utc(), "status": "running",
            "planned": [c.case_id for c in plan.cases],
            "groups": len(plan.groups()) * (len(workers) if mode == "every-host" else 1),
            "hosts": sorted(workers) if mode == "every-host" else [],
            "options": options.to_json(), "tasks": [], "lost": [], "departed": []}
    layout.write(path, meta)
    hosts = HostStores(path, suite.name, text, meta["planned"], meta["options"],
                       whole_plan=mode == "every-host")
    return FarmRun(path, meta, plan, hosts, client, _say(quiet), lost_after_s,
                   measure_machine)


def reopen(path: Path, scheduler: str, quiet: bool = False,
           lost_after_s: float = LOST_AFTER_S) -> FarmRun:
    """A farm directory to resume: its plan, its hosts' rows; lost groups are retried."""
    from convbench.harness.options import RunOptions, make_plan
    from convbench.spec.suite import parse_suite

    meta = layout.read(path)
    text = (path / "suite.yaml").read_text()
    options = RunOptions.from_json(meta["options"])
    plan = make_plan(parse_suite(text, path / "suite.yaml"), options)
    if [c.case_id for c in plan.cases] != meta["planned"]:
        raise ConvbenchError(f"{path}: the plan has changed since the run started; start "
                             "a new run")
    client = connect(scheduler)
    hosts = HostStores(path, meta["suite"], text, meta["planned"], meta["options"],
                       whole_plan=meta["mode"] == "every-host")
    meta.update(status="running", scheduler=scheduler, lost=[])
    return FarmRun(path, meta, plan, hosts, client, _say(quiet), lost_after_s)


def execute(farm: FarmRun) -> bool:
    """Send every group not done yet, collect until none is pending; True when the run
    was interrupted (Ctrl-C or SIGTERM, as a local run)."""
    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        workers = bench_workers(farm.client)
        if farm.shard:
            for group in farm.plan.groups():
                farm.submit(group, None, None)
        else:
            absent = [h for h in farm.meta["hosts"] if h not in workers]
            if absent:
                raise ConvbenchError(f"host(s) {', '.join(absent)} of this every-host run "
                                     "are not connected to the scheduler; start their "
                                     f"workers ({WORKER_RECIPE})")
            for host in farm.meta["hosts"]:
                for group in farm.plan.groups():
                    farm.submit(group, host, workers[host])
        farm.collect()
    except KeyboardInterrupt:
        for future in farm.pending:
            future.cancel()
        farm.meta["status"] = "interrupted"
        return True
    finally:
        signal.signal(signal.SIGTERM, previous)
        interrupted = farm.meta["status"] == "interrupted"
        if not interrupted:
            farm.meta["status"] = "complete" if farm.whole() else "incomplete"
        farm.hosts.finish(interrupted)
        farm.meta["finished"] = now_utc()
        layout.write(farm.path, farm.meta)
        farm.client.close()
    return False


def rows(path: Path) -> list[dict[str, Any]]:
    """Every host's rows of a farm directory (the run summary reads them)."""
    from convbench.results.store import load

    return [row for host in layout.host_dirs(path).values()
            for row in load(host).table.to_dict("records")]
