"""Orchestrates a run: plan -> worker processes per group -> rows recorded as they land.

Each group (one layer at one thread count and vector width) runs in a worker subprocess
(:mod:`convbench.harness.worker`).  The runner follows the worker's "enter" messages to
know which case is running, charges elapsed time to it, and kills the worker when a case
exceeds ``timing.timeout``.  A worker that dies (signal), hangs or exits early costs only
the case it was running: that case is recorded as crash / timeout / error and a fresh
worker takes the group's remaining cases.

Test hook: ``CONVBENCH_TEST_KILL_AFTER=N`` makes the runner SIGKILL itself after recording
N cases, to test that a killed run leaves a valid partial directory that resumes.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from convbench.errors import ConvbenchError
from convbench.harness import counters, sysinfo
from convbench.harness.plan import Case, Plan, build_plan
from convbench.machine.store import peak_for, roofline_for
from convbench.results import schema, stats
from convbench.results.store import (
    STATUS_COMPLETE,
    STATUS_INTERRUPTED,
    ResultsStore,
    now_utc,
)
from convbench.spec.suite import Suite, TimingOptions, load_suite

KILL_AFTER_ENV = "CONVBENCH_TEST_KILL_AFTER"
STARTUP_LIMIT_S = 120.0   # imports, the reference kernel: time charged to no case
SIM_SLOWDOWN = 100        # a simulated counting pass may take this much longer

# Idle worker threads of one library spin and steal the cores from the next variant of a
# round (or from the BLAS reference).  Defaults spin long: OpenBLAS 2^28 cycles (~70 ms),
# libgomp (numba's omp layer, PyTorch) 300k iterations (2-20 ms): at 2 threads on 2 cores
# our packed GEMM right after np.matmul ran at 69-92 GFLOP/s instead of 173-184, and
# OpenBLAS after it at 122-134 instead of 195.  Shorter spins (~20 us and 10k iterations)
# gave both their quiet-machine speed with no idle gap, and cost nothing measurable to
# back-to-back calls: OpenBLAS 128^3-1024^3, oneDNN convs 0.15-2.4 ms (OMP_WAIT_POLICY=
# PASSIVE, by contrast, made oneDNN 1.2-2.1x slower).  A user's own setting wins.
QUIET_SPIN_ENV = {"OPENBLAS_THREAD_TIMEOUT": "16", "GOMP_SPINCOUNT": "10000"}


@dataclass
class RunOptions:
    only: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    counters: str = "none"
    seed: int = 0
    timing: dict[str, Any] = dataclasses.field(default_factory=dict)  # overrides
    threads: tuple[int, ...] = ()         # overrides sweep.threads when given
    vector_widths: tuple[str, ...] = ()   # overrides sweep.vector_widths when given

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunOptions:
        return cls(only=tuple(data.get("only", ())), exclude=tuple(data.get("exclude", ())),
                   counters=data.get("counters", "none"), seed=data.get("seed", 0),
                   timing=dict(data.get("timing", {})),
                   threads=tuple(data.get("threads", ())),
                   vector_widths=tuple(data.get("vector_widths", ())))


def check_counters_available(kind: str) -> None:
    """perf and sim live in their own modules; say so plainly when one is not there."""
    counters.needs_separate_pass(kind)  # validates the name
    if kind != "none" and importlib.util.find_spec(f"convbench.harness.counters.{kind}") is None:
        raise ConvbenchError(f"counters backend {kind!r} is not available in this convbench "
                             f"(no convbench/harness/counters/{kind}.py); use --counters none")


def make_plan(suite: Suite, options: RunOptions) -> Plan:
    sweep = suite.sweep
    if options.threads:
        sweep = dataclasses.replace(sweep, threads=tuple(options.threads))
    if options.vector_widths:
        sweep = dataclasses.replace(sweep, vector_widths=tuple(options.vector_widths))
    suite = dataclasses.replace(suite, sweep=sweep)
    timing = dataclasses.replace(sweep.timing, **options.timing)
    return build_plan(suite, options.only, options.exclude, timing)


def default_output(suite: Suite) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return Path("results") / f"{suite.name}-{stamp}"


# ---------------------------------------------------------------- rows


def base_row(case: Case) -> dict[str, Any]:
    p = case.problem
    return {"case_id": case.case_id, "suite": case.suite, "layer": case.layer,
            "variant": case.variant.id, "algorithm": case.variant.algorithm,
            "layout": case.variant.layout,
            "params": json.dumps(case.variant.param_dict, sort_keys=True),
            "threads": case.threads, "vector_width": case.vector_width,
            "baseline": case.baseline, "descriptor": str(p), "layer_count": case.layer_count,
            "flops": p.flops, "compulsory_bytes": p.compulsory_bytes}


def outcome_row(case: Case, status: str, reason: str, figures: dict[str, Any],
                values: Sequence[float] = (), ref_values: Sequence[float] = (),
                limits: dict[str, Any] | None = None) -> dict[str, Any]:
    row = {**base_row(case), **figures, "status": status, "reason": reason,
           "n_values": len(values)}
    if status == "ok":
        row.update(**stats.summarize(values), **stats.ratio_summary(values, ref_values))
        p = case.problem
        row["gflops"] = p.flops / row["median_s"] / 1e9
        row["gbs"] = p.compulsory_bytes / row["median_s"] / 1e9
        row["peak_share"] = row["gflops"] / peak_for(limits, case.threads, case.vector_width)
        bound, row["roofline_level"] = roofline_for(limits, p.flops, p.compulsory_bytes,
                                                    case.threads, case.vector_width)
        row["roofline_share"] = row["gflops"] / bound
    return row


def value_rows(case_id: str, values: Sequence[float], ref_values: Sequence[float],
               loops: int) -> list[dict[str, Any]]:
    return [{"case_id": case_id, "round": i, "value": v, "ref_value": r, "loops": loops}
            for i, (v, r) in enumerate(zip(values, ref_values, strict=True))]


# ---------------------------------------------------------------- one worker


@dataclass
class WorkerEnd:
    """How a worker ended: the case it was running when it died or hung (if any)."""

    finished: set[str]
    culprit: str | None = None
    status: str = ""          # crash | timeout | error, for the culprit or the whole rest
    reason: str = ""


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def _tail(path: Path, lines: int = 3) -> str:
    text = path.read_text(errors="replace").strip().splitlines()
    return " | ".join(text[-lines:])


class Worker:
    """One worker process for a list of cases of one group."""

    def __init__(self, cases: list[Case], timing: TimingOptions, options: RunOptions,
                 count_only: bool = False, prefix: Sequence[str] = ()):
        self.cases = cases
        self.timeout = timing.timeout * (SIM_SLOWDOWN if count_only else 1)
        self.tmp = Path(tempfile.mkdtemp(prefix="convbench-worker-"))
        case = cases[0]
        job = {"threads": case.threads, "vector_width": case.vector_width,
               "counters": options.counters, "count_only": count_only, "seed": options.seed,
               "timing": dataclasses.asdict(timing),
               "problem": {**case.problem.shape_fields, "name": case.problem.name},
               "cases": [{"case_id": c.case_id, "algorithm": c.variant.algorithm,
                          "layout": c.variant.layout, "params": c.variant.param_dict}
                         for c in cases]}
        (self.tmp / "job.json").write_text(json.dumps(job))
        self.log = self.tmp / "worker.log"
        read_fd, write_fd = os.pipe()
        env = {**QUIET_SPIN_ENV, **os.environ}
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [*prefix, sys.executable, "-m", "convbench.harness.worker",
                 "--job", str(self.tmp / "job.json"), "--fd", str(write_fd)],
                pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=env)
        os.close(write_fd)
        self.read_fd = read_fd

    def messages(self) -> Any:
        """Yield (message | None) ; None means the current stretch ran out of time."""
        buffer = b""
        current: str | None = None
        spent: dict[str | None, float] = {}
        since = time.monotonic()
        while True:
            limit = (STARTUP_LIMIT_S if current is None
                     else self.timeout - spent.get(current, 0.0))
            wait = max(0.0, since + limit - time.monotonic())
            ready, _, _ = select.select([self.read_fd], [], [], wait)
            if not ready:
                yield {"type": "timeout", "case": current}
                return
            chunk = os.read(self.read_fd, 1 << 16)
            if not chunk:
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                message = json.loads(line)
                if message["type"] == "enter":
                    now = time.monotonic()
                    if current is not None:
                        spent[current] = spent.get(current, 0.0) + now - since
                    current, since = message["case"], now
                yield message

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        os.close(self.read_fd)
        for f in self.tmp.iterdir():
            f.unlink()
        self.tmp.rmdir()

    def run(self, on_message: Callable[[dict[str, Any]], None]) -> WorkerEnd:
        end = WorkerEnd(finished=set())
        current: str | None = None
        phase = "starting"
        try:
            for message in self.messages():
                kind = message["type"]
                if kind == "timeout":
                    self.proc.kill()
                    culprit = message["case"]
                    what = f"{self.timeout:g} s" if culprit else f"{STARTUP_LIMIT_S:g} s"
                    end.culprit, end.status = culprit, "timeout"
                    end.reason = (f"killed after exceeding the time limit of {what} "
                                  f"({phase})")
                    return end
                if kind == "enter":
                    current, phase = message["case"], message["phase"]
                elif kind in ("result", "counts"):
                    end.finished.add(message["case"])
                on_message(message)
            code = self.proc.wait()
            if code == 0 and len(end.finished) == len(self.cases):
                return end
            if code < 0:
                end.status = "crash"
                end.reason = f"worker killed by {_signal_name(-code)} ({phase})"
            else:
                end.status = "error"
                end.reason = f"worker exited with code {code} ({phase}): {_tail(self.log)}"
            end.culprit = current if current not in end.finished else None
            return end
        finally:
            self.close()


# ---------------------------------------------------------------- the run


class Runner:
    def __init__(self, plan: Plan, store: ResultsStore, options: RunOptions,
                 quiet: bool = False, stream: TextIO | None = None):
        self.plan = plan
        self.store = store
        self.options = options
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.recorded = 0
        self.bar: Any = None
        kill_after = os.environ.get(KILL_AFTER_ENV, "")
        self.kill_after = int(kill_after) if kill_after.isdigit() else None

    def record(self, row: dict[str, Any], values: list[dict[str, Any]] | None = None) -> None:
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
                self.record(outcome_row(case, "skip", case.skip_reason, {}))
        runnable = [c for c in todo if c.skip_reason is None]
        self.bar = tqdm(total=len(runnable), file=self.stream, disable=self.quiet,
                        unit="case", dynamic_ncols=True)
        try:
            for group in self.plan.groups(runnable):
                self.run_group(group)
            if counters.needs_separate_pass(self.options.counters):
                self.count_pass()
        finally:
            self.bar.close()

    def run_group(self, group: list[Case], count_only: bool = False) -> None:
        by_id = {c.case_id: c for c in group}
        remaining = list(group)
        prefix = counters.worker_prefix(self.options.counters) if count_only else []
        limits = sysinfo.machine(self.store.environment)
        while remaining:
            worker = Worker(remaining, self.plan.timing, self.options, count_only, prefix)
            end = worker.run(lambda m: self.on_message(m, by_id, limits))
            remaining = [c for c in remaining if c.case_id not in end.finished]
            if not remaining or not end.status:
                break
            if end.culprit is not None:
                culprit = by_id[end.culprit]
                self.record_failure(culprit, end.status, end.reason, count_only)
                remaining = [c for c in remaining if c is not culprit]
            else:  # died outside any case: the rest cannot run in this setting
                for case in remaining:
                    self.record_failure(case, "error", end.reason, count_only)
                break

    def record_failure(self, case: Case, status: str, reason: str, count_only: bool) -> None:
        if count_only:
            self.store.update(case.case_id, {"counters_reason": f"{status}: {reason}"})
        else:
            self.record(outcome_row(case, status, reason, {}))

    def on_message(self, message: dict[str, Any], by_id: dict[str, Case],
                   limits: dict[str, Any] | None) -> None:
        kind = message["type"]
        if kind == "enter" and message["case"] and self.bar is not None:
            case = by_id[message["case"]]
            self.bar.set_postfix_str(f"{case.layer} {case.variant.id} t{case.threads} "
                                     f"v{case.vector_width} {message['phase']}", refresh=False)
        elif kind in ("hello", "settings"):
            case = next(iter(by_id.values()))
            key = f"t{case.threads}/v{case.vector_width}"
            self.store.environment.setdefault("workers", {}).setdefault(key, {}).update(
                message["settings"])
        elif kind == "result":
            case = by_id[message["case"]]
            values = message.get("values", [])
            refs = message.get("ref_values", [])
            row = outcome_row(case, message["status"], message["reason"], message["row"],
                              values, refs, limits)
            loops = message["row"].get("loops", 0)
            self.record(row, value_rows(case.case_id, values, refs, loops))
        elif kind == "counts":
            self.store.update(message["case"], message["row"])

    def count_pass(self) -> None:
        """Simulated counters: a separate pass under the backend's prefix, ok cases only."""
        counted = set(self.store.manifest.setdefault("counted", []))
        ok = {r["case_id"] for r in self.store.rows if r["status"] == "ok"}
        cases = [c for c in self.plan.cases if c.case_id in ok and c.case_id not in counted]
        for group in self.plan.groups(cases):
            self.run_group(group, count_only=True)
            self.store.manifest["counted"].extend(c.case_id for c in group)
            self.store.flush()


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
        Runner(plan, store, options, quiet).run()
    except KeyboardInterrupt:
        store.environment = sysinfo.finish(store.environment)
        store.set_status(STATUS_INTERRUPTED)
        return Outcome(store.path, plan, store.rows, interrupted=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    store.environment = sysinfo.finish(store.environment)
    store.manifest["finished"] = now_utc()
    store.set_status(STATUS_COMPLETE)
    return Outcome(store.path, plan, store.rows)


def run_suite(suite_path: str | Path, output: Path | None = None,
              options: RunOptions | None = None, quiet: bool = False) -> Outcome:
    """Plan and run a suite into a new results directory."""
    options = options or RunOptions()
    check_counters_available(options.counters)
    suite = load_suite(suite_path)
    plan = make_plan(suite, options)
    assert suite.path is not None
    store = ResultsStore.create(output or default_output(suite), suite.name,
                                suite.path.read_text(), [c.case_id for c in plan.cases],
                                sysinfo.collect(), options.to_json())
    return _execute(plan, store, options, quiet)


def resume(path: Path, quiet: bool = False) -> Outcome:
    """Finish a partial results directory: only cases without a row are run."""
    store = ResultsStore.reopen(path)
    options = RunOptions.from_json(store.manifest.get("options", {}))
    check_counters_available(options.counters)
    suite = load_suite(path / schema.SUITE_COPY)
    plan = make_plan(suite, options)
    planned = set(store.manifest.get("planned", []))
    unknown = [c.case_id for c in plan.cases if c.case_id not in planned]
    if unknown:
        raise ConvbenchError(f"{path}: the plan has changed since the run started (e.g. "
                             f"{unknown[0]}); start a new run")
    store.environment.setdefault("resumed", []).append(sysinfo.load_snapshot())
    store.set_status("running")
    return _execute(plan, store, options, quiet)


# ---------------------------------------------------------------- the closing table


def _seconds(s: float) -> str:
    return f"{s * 1e3:.3f} ms" if s < 1 else f"{s:.3f} s"


def summary(rows: Sequence[dict[str, Any]]) -> str:
    """Per layer the fastest ok case, its GFLOP/s and speed-up over the fastest direct one,
    then the network total: sum over layers of count x best time."""
    from convbench.textable import format_table

    table = [("layer", "count", "best variant", "t", "v", "median", "GFLOP/s", "x direct")]
    total, layers_without = 0.0, []
    for layer in dict.fromkeys(r["layer"] for r in rows):
        ok = [r for r in rows if r["layer"] == layer and r["status"] == "ok"]
        if not ok:
            layers_without.append(layer)
            continue
        best = min(ok, key=lambda r: r["median_s"])
        direct = [r["median_s"] for r in ok if r["algorithm"] == "direct"]
        speedup = f"{min(direct) / best['median_s']:.2f}" if direct else "-"
        total += best["layer_count"] * best["median_s"]
        table.append((layer, str(best["layer_count"]), best["variant"], str(best["threads"]),
                      best["vector_width"], _seconds(best["median_s"]),
                      f"{best['gflops']:.2f}", speedup))
    counts = {s: sum(r["status"] == s for r in rows) for s in schema.STATUSES}
    lines = [format_table(table, right=(1, 3, 5, 6, 7)), "",
             f"network total (count x best time, {len(table) - 1} layers): {_seconds(total)}"]
    if layers_without:
        lines.append(f"no ok case for: {', '.join(layers_without)}")
    lines.append("cases: " + (", ".join(f"{n} {s}" for s, n in counts.items() if n) or "none"))
    return "\n".join(lines)
