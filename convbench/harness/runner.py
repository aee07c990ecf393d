"""Orchestrates a run: plan -> one worker process per group -> records as cases finish.

Each group (one layer at one thread count and vector width) runs in a worker process
(:mod:`convbench.harness.supervise` starts and watches it).  A worker that dies (signal),
hangs or exits early costs only the case it was running: that case is recorded as crash /
timeout / error and a fresh worker takes the group's remaining cases.  Rows are built by
:mod:`convbench.results.record` and land in the results directory as they arrive, so a
killed run resumes (:func:`resume`) where it stopped.

Test hook: ``CONVBENCH_TEST_KILL_AFTER=N`` makes the runner SIGKILL itself after recording
N cases, to test that a killed run leaves a valid partial directory that resumes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from convbench.errors import ConvbenchError
from convbench.harness import affinity, counters, memory, precompile, sysinfo, system
from convbench.harness.counters import cache_models, sim, sim_cpu
from convbench.harness.options import RunOptions, check_counters_available, make_plan
from convbench.harness.plan import Case, Plan
from convbench.harness.protocol import (
    Counts,
    Enter,
    Hello,
    Message,
    Result,
    Settings,
)
from convbench.harness.scratch import Scratch
from convbench.harness.supervise import WorkerProcess, job_for
from convbench.identity import WARM
from convbench.results import record, schema
from convbench.results.store import (
    STATUS_COMPLETE,
    STATUS_INTERRUPTED,
    ResultsStore,
    now_utc,
)
from convbench.spec.suite import Suite, load_suite
from convbench.status import Status
from convbench.textsafe import terminal
from convbench.tune import apply as tune_apply

KILL_AFTER_ENV = "CONVBENCH_TEST_KILL_AFTER"
MAX_RESTARTS = 2   # a second compile means the kernels do not cache: measure what was built


def default_output(suite: Suite) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return Path("results") / f"{suite.name}-{stamp}"


class Runner:
    """Runs a plan's outstanding cases into a results store."""

    def __init__(self, plan: Plan, store: ResultsStore, options: RunOptions,
                 quiet: bool = False, stream: TextIO | None = None):
        self.plan = plan
        self.store = store
        self.options = options
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.recorded = 0
        self.bar: Any = None
        self.pool = affinity.resolve_pool(options.cpus)
        self.memory_limit = memory.worker_limit()
        store.environment["worker_memory_limit_bytes"] = self.memory_limit
        self.pending: dict[str, list[Result]] = {}   # ok results of a group's processes
        kill_after = os.environ.get(KILL_AFTER_ENV, "")
        self.kill_after = int(kill_after) if kill_after.isdigit() else None
        self.sim_cpu: tuple[str, str] | None = None   # what numba sees under valgrind

    def count_env(self) -> list[str]:
        """``env`` assignments that make a counting pass's code the simulated CPU's,
        natively (compile-ahead) and under valgrind alike (counters/sim_cpu.py)."""
        if self.sim_cpu is None:
            return []
        return ["env", *(f"{k}={v}" for k, v in sim_cpu.compile_env(self.sim_cpu).items())]

    def width_for(self, case: Case, limits: dict[str, Any] | None, count_only: bool) -> str:
        """The width ``case``'s code is compiled for in a timing or a counting pass."""
        if count_only:
            return sim_cpu.compile_width(self.sim_cpu)
        return compile_width(case.vector_width, limits)

    def sim_geometry(self) -> dict[str, str]:
        """callgrind's i1/d1/ll for the named cache model; {} (the host's) without one."""
        if not self.options.cache_model:
            return {}
        model = cache_models.get(self.options.cache_model)
        return {k.lower(): v for k, v in model.geometry().items()}

    def record(self, row: dict[str, Any], values: list[dict[str, Any]] | None = None) -> None:
        # every row says whose caches its simulated counts model, so two runs under
        # different models are never read (or compared) as the same measurement
        row = {**row, "cache_model": cache_models.label(self.options.cache_model)}
        self.store.add(row, values)
        self.recorded += 1
        if self.bar is not None:
            self.bar.update(1)
        if self.kill_after is not None and self.recorded >= self.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    def run(self) -> None:
        from tqdm import tqdm

        done = self.store.done
        todo = [c for c in self.plan.cases if c.case_id not in done]
        for case in todo:
            if case.skip_reason is not None:
                self.record(record.outcome_row(case, Status.SKIP, case.skip_reason))
        runnable = [c for c in todo if c.skip_reason is None]
        self.bar = tqdm(total=len(runnable), file=self.stream, disable=self.quiet,
                        unit="case", dynamic_ncols=True)
        try:
            with self.measuring():
                self.compile_ahead(self.plan.groups(runnable))
                for group in self.plan.groups(runnable):
                    self.run_group(group)
                if counters.needs_separate_pass(self.options.counters):
                    self.count_pass()
        finally:
            self.bar.close()

    @contextlib.contextmanager
    def measuring(self) -> Iterator[None]:
        """The scratch folder the workers need, removed after: wraps every
        :meth:`run_group` (``convbench tune`` calls it round by round)."""
        self.scratch = Scratch()
        try:
            yield
        finally:
            self.scratch.remove()

    def compile_ahead(self, groups: list[list[Case]], count_only: bool = False) -> None:
        """Compile the kernels of every case not yet compiled on this host in
        compile-only workers, one per allowed CPU at once (harness/precompile.py); for a
        counting pass, natively for the CPU valgrind shows (counters/sim_cpu.py)."""
        if count_only and self.sim_cpu is None:
            return   # unknown: the counting workers compile under valgrind, as before
        limits = sysinfo.machine(self.store.environment)
        jobs = []
        for group in groups:
            width = self.width_for(group[0], limits, count_only)
            todo = [c for c in group if precompile.needs_compile(c, width)]
            for part in precompile.chunks(todo, len(self.pool)):
                jobs.append((part, job_for(part, self.plan.timing, "none", self.options.seed,
                                           compile_width=width, restart_if_compiled=False,
                                           memory_limit=self.memory_limit,
                                           compile_only=True)))
        if not jobs:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(f"compiling kernels in {len(jobs)} workers, "
                                     f"{len(self.pool)} at a time", refresh=True)
        started = time.perf_counter()
        precompile.compile_ahead(
            jobs, len(self.pool), self.plan.timing.timeout, self.scratch.path,
            lambda cases, job: precompile.mark_compiled(cases, job.compile_width),
            prefix=self.count_env() if count_only else [])
        key = "compiled_ahead_for_counts" if count_only else "compiled_ahead"
        self.store.environment[key] = {
            "workers": len(jobs), "at_once": len(self.pool),
            "cases": sum(len(cases) for cases, _job in jobs),
            "seconds": round(time.perf_counter() - started, 2)}

    def run_group(self, group: list[Case], count_only: bool = False) -> None:
        """Run a group in ``timing.processes`` worker processes one after another (one for
        a counting pass): each verifies and times the cases the earlier ones left ok; the
        values are pooled into one row per case once the last process has finished."""
        limits = sysinfo.machine(self.store.environment)
        processes = 1 if count_only else self.plan.timing.processes
        self.pending = {}
        remaining = list(group)
        for process in range(processes):
            remaining = self.run_process(group, remaining, count_only, process, limits)
            remaining = [c for c in remaining if c.case_id in self.pending]
            if not remaining:
                break
        measured = []
        for case in group:
            results = self.pending.pop(case.case_id, None)
            if results:
                self.record(*record.pooled_row(case, results, limits))
                measured.append(case)
        if not count_only:   # their kernels are in numba's cache: no compile-ahead next run
            precompile.mark_compiled(
                measured, self.width_for(group[0], limits, count_only))
        self.store.save_environment()   # the group's worker settings, restarts

    def run_process(self, group: list[Case], remaining: list[Case], count_only: bool,
                    process: int, limits: dict[str, Any] | None) -> list[Case]:
        """One worker process over ``remaining`` (fresh workers take over after a crash, a
        hang or a compile); the cases it finished."""
        by_id = {c.case_id: c for c in group}
        where = "/".join(map(str, group[0].group))   # the group, as environment.json names it
        todo = list(remaining)
        restarts = 0
        while todo:
            # a directory of its own per simulated worker: one that lists a sibling's files
            # before its region allocates more and counts other D1 misses (2 of 733 seen);
            # the worker reads its own dumps, so the directory goes when the worker ends
            out_dir = str(self.scratch.new("convbench-sim-")) if count_only else None
            prefix = ([*self.count_env(),
                       *counters.worker_prefix(self.options.counters, out_dir=out_dir,
                                               **self.sim_geometry())]
                      if count_only else [])
            # The restarted worker gets the very same job: under simulation any difference
            # in what a worker reads before its region (a longer job file, say) moves the
            # allocator's state and the counts with it (harness/compiled.py).  Only a
            # worker that compiles again (its kernels do not cache) measures what it built.
            job = job_for(todo, self.plan.timing, self.options.counters,
                          self.options.seed, count_only, self.options.cold_bytes,
                          self.plan.suite.pass_weight_bytes,
                          affinity.cpus_for(self.pool, todo[0].threads),
                          restart_if_compiled=restarts < MAX_RESTARTS, process=process,
                          compile_width=self.width_for(todo[0], limits, count_only),
                          memory_limit=self.memory_limit)
            worker = WorkerProcess(job, self.plan.timing.timeout, prefix, self.scratch.path)
            try:
                end = worker.run(lambda m: self.on_message(m, by_id))
            finally:
                if out_dir is not None:
                    _keep_dumps(out_dir, f"{where.replace('/', '-')}-process{process}"
                                f"-start{restarts}")
                    shutil.rmtree(out_dir, ignore_errors=True)
            todo = [c for c in todo if c.case_id not in end.finished]
            if end.lingered:   # killed after it closed its channel (supervise.EXIT_GRACE_S)
                self.store.environment.setdefault("workers_killed_after_closing", []).append(
                    f"{where}/process{process}")
            if end.compiled and restarts < MAX_RESTARTS:
                # the worker compiled and measured nothing: a fresh one loads the cached
                # code that every later run will measure (harness/compiled.py)
                restarts += 1
                key = where + ("/count" if count_only else "")
                self.store.environment.setdefault("restarted_after_compile", {}).setdefault(
                    key, []).append(end.compiled)
                continue
            if not todo or end.status is None:
                break
            if end.culprit is not None:
                culprit = by_id[end.culprit]
                self.record_failure(culprit, end.status, end.reason, count_only)
                todo = [c for c in todo if c is not culprit]
            else:  # died outside any case: the rest cannot run in this setting
                for case in todo:
                    self.record_failure(case, Status.ERROR, end.reason, count_only)
                break
        return [c for c in remaining if c not in todo]

    def record_failure(self, case: Case, status: Status, reason: str,
                       count_only: bool, figures: dict[str, Any] | None = None) -> None:
        """A case that failed in any process fails: what earlier processes measured goes."""
        if count_only:
            self.store.update(case.case_id, {"counters_reason": f"{status}: {reason}"})
        else:
            self.pending.pop(case.case_id, None)
            self.record(record.outcome_row(case, status, reason, figures))

    def on_message(self, message: Message, by_id: dict[str, Case]) -> None:
        if isinstance(message, Enter):
            if message.case and self.bar is not None:
                case = by_id[message.case]
                self.bar.set_postfix_str(terminal(f"{case.layer} {case.variant.id} "
                                                  f"t{case.threads} v{case.vector_width} "
                                                  f"{message.phase}"), refresh=False)
        elif isinstance(message, Hello | Settings):
            case = next(iter(by_id.values()))
            key = f"t{case.threads}/v{case.vector_width}"
            if case.cache != WARM:
                key += f"/{case.cache}"
            self.store.environment.setdefault("workers", {}).setdefault(key, {}).update(
                message.settings)
        elif isinstance(message, Result):
            if message.status == Status.OK:
                self.pending.setdefault(message.case, []).append(message)
            else:
                self.record_failure(by_id[message.case], message.status, message.reason,
                                    count_only=False, figures=message.figures)
        elif isinstance(message, Counts):
            self.store.update(message.case, message.figures)

    def count_pass(self) -> None:
        """Simulated counters: a separate pass under the backend's prefix, ok cases only."""
        counted = set(self.store.manifest.setdefault("counted", []))
        ok = {r["case_id"] for r in self.store.rows if r["status"] == Status.OK}
        cases = [c for c in self.plan.cases if c.case_id in ok and c.case_id not in counted]
        if not cases:
            return
        self.sim_cpu = sim_cpu.simulated_cpu()
        self.compile_ahead(self.plan.groups(cases), count_only=True)
        for group in self.plan.groups(cases):
            self.run_group(group, count_only=True)
            self.store.mark_counted([c.case_id for c in group])


def compile_width(width: str, limits: dict[str, Any] | None) -> str:
    """The width a case's code is timed at: an explicit width as asked; ``auto`` the
    host's measured fastest (machine limits), or LLVM's default ("") without limits.
    A simulated counting pass compiles for the CPU valgrind shows instead (valgrind
    executes no AVX-512): :meth:`Runner.width_for`."""
    if width != "auto":
        return width
    from convbench.machine.store import fastest_width

    return fastest_width(limits) or ""


@dataclass
class Outcome:
    path: Path
    plan: Plan
    rows: list[dict[str, Any]]
    interrupted: bool = False


def _execute(plan: Plan, store: ResultsStore, options: RunOptions, quiet: bool) -> Outcome:
    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        try:
            Runner(plan, store, options, quiet).run()
        except KeyboardInterrupt:
            store.environment = sysinfo.finish(store.environment)
            store.set_status(STATUS_INTERRUPTED)
            return Outcome(store.path, plan, store.rows, interrupted=True)
        store.environment = sysinfo.finish(store.environment)
        store.manifest["finished"] = now_utc()
        store.set_status(STATUS_COMPLETE)
        return Outcome(store.path, plan, store.rows)
    finally:
        signal.signal(signal.SIGTERM, previous)
        store.close()


def run_suite(suite_path: str | Path, output: Path | None = None,
              options: RunOptions | None = None, quiet: bool = False,
              measure_machine: bool | None = None) -> Outcome:
    """Plan and run a suite into a new results directory.  On a host without stored machine
    limits they are measured first unless ``measure_machine`` is False (None: the
    environment's choice, :mod:`convbench.machine.first_use`)."""
    from convbench.machine.first_use import limits_for_run

    options = options or RunOptions()
    check_counters_available(options.counters)
    suite = load_suite(suite_path)
    plan, applied = tune_apply.for_run(make_plan(suite, options), options.records)
    if applied is not None and not quiet:
        print(applied.line(), file=sys.stderr)
    # the pool itself (not "the default") goes into the manifest: --resume pins the same
    options = dataclasses.replace(options, cpus=affinity.resolve_pool(options.cpus))
    assert suite.path is not None
    limits = limits_for_run({c.threads for c in plan.cases}, measure_machine,
                            lambda line: None if quiet else print(line, file=sys.stderr))
    environment = sysinfo.collect(limits, options.cpus)
    environment["cache_model"] = cache_models.facts(options.cache_model)
    if environment["busy_warning"]:
        warnings.warn(environment["busy_warning"], stacklevel=2)
    if applied is not None:
        environment["records"] = applied.to_json()
    store = ResultsStore.create(output or default_output(suite), suite.name,
                                suite.path.read_text(), [c.case_id for c in plan.cases],
                                environment, options.to_json())
    return _execute(plan, store, options, quiet)


def resume(path: Path, quiet: bool = False) -> Outcome:
    """Finish a partial results directory: only cases without a row are run."""
    store = ResultsStore.reopen(path)
    try:
        plan, options = _resumable_plan(path, store)
    except BaseException:
        store.close()   # the lock goes with it; nothing was written
        raise
    busy = system.busy_warning(system.measure_busy(affinity.resolve_pool(options.cpus)))
    if busy:
        warnings.warn(busy, stacklevel=2)
    store.environment.setdefault("resumed", []).append({**sysinfo.load_snapshot(),
                                                        "busy_warning": busy})
    store.set_status("running")
    return _execute(plan, store, options, quiet)


def _resumable_plan(path: Path, store: ResultsStore) -> tuple[Plan, RunOptions]:
    """The plan a reopened directory was started with, checked against its manifest."""
    try:
        options = RunOptions.from_json(store.manifest.get("options", {}))
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ConvbenchError(f"{path}/{schema.MANIFEST}: damaged run options, cannot resume "
                             f"({type(exc).__name__}: {exc}); start a new run") from None
    check_counters_available(options.counters)
    plan, _ = tune_apply.for_run(make_plan(load_suite(path / schema.SUITE_COPY), options),
                                 options.records)
    planned = set(store.manifest.get("planned", []))
    unknown = [c.case_id for c in plan.cases if c.case_id not in planned]
    if unknown:
        raise ConvbenchError(f"{path}: the plan has changed since the run started (e.g. "
                             f"{unknown[0]}); start a new run")
    return plan, options


def _keep_dumps(out_dir: str, name: str) -> None:
    """Copy a simulated worker's callgrind dumps to ``$CONVBENCH_SIM_KEEP/name`` where that
    is set (:data:`convbench.harness.counters.sim.KEEP_ENV`)."""
    keep = os.environ.get(sim.KEEP_ENV)
    if keep:
        shutil.copytree(out_dir, Path(keep) / name, dirs_exist_ok=True)
