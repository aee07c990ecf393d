"""The worker process: verifies, calibrates, times and counts one group of cases.

Started by the runner as ``python -m convbench.harness.worker --job FILE --fd N``.  The job
(:class:`convbench.harness.protocol.Job`) names the cases of one layer at one thread count
and vector width.  The worker talks back through file descriptor N with the messages of
:mod:`convbench.harness.protocol`, one per line.

Everything that can crash or hang (kernels) runs here, so the runner survives it.  The
vector width must be in ``NUMBA_CPU_FEATURES`` before numba is imported, and the worker
pins itself to the job's CPUs before any thread pool starts (threads inherit the affinity),
so this module imports numba and the kernels only inside :func:`run_job`, after
:func:`main` applied both.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from convbench.harness import affinity, memory
from convbench.harness.protocol import (
    NUMBA_COMPILED,
    Counts,
    Enter,
    Hello,
    Job,
    Message,
    Restart,
    Result,
    Settings,
)
from convbench.harness.threads import SETTLE_N, use_threads
from convbench.host import FEATURES_ENV, SIM_WIDTH_PREFIX, cpu_features
from convbench.status import Status

PROCESS_ENV = "CONVBENCH_PROCESS"


def apply_vector_width(width: str) -> None:
    features = cpu_features(width)
    if features is not None:
        os.environ[FEATURES_ENV] = features


def _die_with_parent() -> None:
    """Ask Linux to kill this worker if the runner dies (a SIGKILLed runner leaves no orphan)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


class Channel:
    """Protocol messages to the runner, one line each."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def send(self, message: Message) -> None:
        self.stream.write(message.encode() + "\n")
        self.stream.flush()

    def enter(self, case: str | None, phase: str) -> None:
        self.send(Enter(case, phase))


def _error_fields(report: Any) -> dict[str, float]:
    nan = float("nan")
    if report is None:
        return {"max_abs_err": nan, "max_rel_err": nan, "err_bound_ratio": nan}
    return {"max_abs_err": report.max_abs, "max_rel_err": report.max_rel,
            "err_bound_ratio": report.worst_ratio}


def run_job(job: Job, channel: Channel) -> None:
    """Verify every case, then time the survivors round-robin, then count them."""
    import numba
    import numpy as np
    import threadpoolctl

    from convbench.harness import counters
    from convbench.harness.compiled import CompileWatch

    # before the timer module compiles (or loads) its thread-pool starter
    watch = CompileWatch().start()
    from convbench.harness import timer
    from convbench.harness.inputs import make_inputs
    from convbench.harness.verify import verify
    from convbench.kernels import asm, registry
    from convbench.kernels.base import Variant
    from convbench.kernels.reference import Reference
    from convbench.spec.problem import ConvProblem

    threads, timing = job.threads, job.timing
    cpus = affinity.format_cpu_list(affinity.allowed_cpus())  # as applied by main()
    # settling OpenBLAS is for timing; a counting pass under callgrind is never timed
    settle = not job.count_only
    blas_limit = use_threads(threads, settle)  # noqa: F841 - held for the job
    channel.send(Hello(settings={
        "threads": threads, "numba_threads": numba.get_num_threads(), "cpus": cpus,
        "vector_width": job.vector_width, "compile_width": job.compile_width,
        FEATURES_ENV: os.environ.get(FEATURES_ENV, ""),
        "numba_config": _numba_config(numba),
        "spin": {k: os.environ.get(k, "")
                 for k in ("OPENBLAS_THREAD_TIMEOUT", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY")},
        # sorted: threadpoolctl lists the libraries in the order they were loaded, which
        # moved between identical runs (libgomp before or after OpenBLAS), and a counting
        # worker's messages must be the same text every run (counters/sim.py)
        "blas": sorted(({k: str(v) for k, v in lib.items()}
                        for lib in threadpoolctl.threadpool_info()),
                       key=lambda lib: (lib.get("user_api", ""), lib.get("prefix", ""),
                                        lib.get("filepath", ""))),
        # a counting worker shares its group's settings entry: it leaves the timing
        # worker's word on settling as it is
        **({"blas_settled_by": f"sgemm {SETTLE_N}^3"} if settle else {})}))
    count_kind = job.counters
    if counters.needs_separate_pass(count_kind) and not job.count_only:
        count_kind = "none"  # simulated counts come from their own pass
    session = counters.open_session(count_kind)
    try:
        problem = ConvProblem(**job.problem)
        x, w = make_inputs(problem, job.seed)
        reference = Reference(problem, x, w)
        runtime_start = timer.start_parallel_runtime()
        alive: list[tuple[str, Any, dict[str, Any]]] = []
        variants: dict[str, Variant] = {}
        def thrown_away() -> bool:
            """Whether this worker will measure nothing (it compiles only, or it compiled
            and restarts)."""
            return job.compile_only or bool(watch.compiled and job.restart_if_compiled)

        for spec in job.cases:
            baseline = registry.get(spec.algorithm).baseline
            if thrown_away() and baseline:
                # this worker will restart and measure nothing: a library baseline compiles
                # no numba kernel, and building it here would import its library (torch:
                # ~4.7 s) in a process that is thrown away.  Its case stays unfinished, so
                # the restarted worker verifies it.
                continue
            variant = Variant.of(spec.algorithm, spec.layout, spec.params)
            channel.enter(spec.case_id, "verify")
            # The static profile is the same code in every process: the first measuring
            # process reads it (pooled rows keep its figures); never under a simulation,
            # whose counts the reading would move, nor in a worker that is thrown away,
            # nor for a library baseline (its code is not numba's).
            profile = not (job.count_only or job.process or thrown_away() or baseline)
            with asm.calls_recorded(profile) as calls:
                verdict, execution = verify(problem, variant, reference, x, w)
            figures: dict[str, Any] = {**_error_fields(verdict.report),
                                       "prepare_s": verdict.prepare_seconds, "cpus": cpus,
                                       "compile_width": job.compile_width}
            if verdict.status != Status.OK or execution is None:
                # a counting worker leaves out the clock readings, whose text would move
                # the next case's counts (below)
                channel.send(Result(spec.case_id, verdict.status, verdict.reason,
                                    _error_fields(verdict.report) if job.count_only
                                    else figures))
                continue
            prepared = execution.prepared
            figures.update(workspace_bytes=prepared.workspace_bytes,
                           packed_weight_bytes=prepared.packed_weight_bytes,
                           info=json.dumps(prepared.info(), sort_keys=True),
                           first_call_s=verdict.first_call_seconds)
            if profile and not thrown_away():   # compiling this case made it so
                figures.update(asm.static_profile(prepared, calls))
            alive.append((spec.case_id, execution, figures))
            variants[spec.case_id] = variant
        watch.stop()
        settings = {"numba_threading_layer": _threading_layer(numba),
                    NUMBA_COMPILED: watch.compiled}
        if not job.count_only:
            # A counting worker sends no clock reading: a float's repr is 15 to 18
            # characters long, and a text one character longer made and freed before the
            # region moved its simulated counts by 51 Ir and 10 D1 misses per call
            # (counters/sim.py).  Its reading was valgrind's, too, and replaced the timing
            # worker's in the group's settings.
            settings["parallel_runtime_start_s"] = runtime_start
        channel.send(Settings(settings=settings))
        if job.compile_only:   # the kernels are in numba's cache now: that was the job
            for case_id, _execution, _figures in alive:
                channel.send(Result(case_id, Status.OK, "", {}))
            return
        if watch.compiled and job.restart_if_compiled:
            # this process would time and count other code than every later one
            channel.send(Restart(watch.compiled))
            return
        if job.count_only:
            evictor = _evictor(job, channel)
            befores = _befores(evictor, alive, variants, problem, w, channel)
            _count(alive, session, channel, calls=[1] * len(alive), separate=True,
                   befores=befores)
            return
        channel.enter(None, "calibrate")
        evictor = _evictor(job, channel)
        ref = timer.ReferenceKernel()
        ref_entry = timer.Entry("reference", ref, timer.calibrate(ref, timing["min_time"]))
        entries = []
        befores = _befores(evictor, alive, variants, problem, w, channel)
        for case_id, ex, _figures in alive:
            channel.enter(case_id, "calibrate")
            run, args = ex.prepared.run, (ex.x, ex.y)
            if evictor is None:
                entry = timer.Entry(case_id, run, timer.calibrate(run, timing["min_time"], args),
                                    args)
            else:  # a cold value is one call right after an eviction
                entry = timer.Entry(case_id, run, 1, args, before=befores[case_id])
            for _ in range(timing["warmups"]):
                entry.value()
            entries.append(entry)
        channel.send(Settings(settings={"round_order_seed": [job.seed, job.process]}))
        timer.run_rounds(entries, ref_entry, timing["values"],
                         on_enter=lambda key: channel.enter(key, "time"),
                         order=np.random.default_rng([job.seed, job.process]))
        resolution = timer.timer_resolution()
        for (_case_id, _ex, figures), entry in zip(alive, entries, strict=True):
            steady = float(np.median(entry.values))
            figures["compile_s"] = max(0.0, figures.pop("first_call_s") - steady)
            figures["timer_resolution_s"] = resolution / entry.loops
        if session.kind != "none":
            _count(alive, session, channel, calls=[e.loops for e in entries], separate=False,
                   befores=befores)
        for (case_id, _ex, figures), entry in zip(alive, entries, strict=True):
            channel.send(Result(case_id, Status.OK, "", figures, values=list(entry.values),
                                ref_values=list(ref_entry.values), loops=entry.loops))
    finally:
        session.close()


# numba settings (from NUMBA_* variables) that change the machine code of the same source;
# compare warns when two runs differ in one (compare.match)
NUMBA_CODE_SETTINGS = ("OPT", "LOOP_VECTORIZE", "SLP_VECTORIZE", "ENABLE_AVX", "BOUNDSCHECK",
                       "DISABLE_JIT", "CPU_NAME")


def _numba_config(numba: Any) -> dict[str, Any]:
    """The settings as JSON values (OPT is an int subclass that prints as _OptLevel(3))."""
    values = {name: getattr(numba.config, name, None) for name in NUMBA_CODE_SETTINGS}
    return {name: int(v) if isinstance(v, int) and not isinstance(v, bool) else v
            for name, v in values.items()}


def _threading_layer(numba: Any) -> str:
    try:
        return numba.threading_layer()
    except ValueError:  # no parallel kernel has run in this worker
        return "not initialised"


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a counted region, after a full collection.

    A collection starts when allocations since the last one pass a threshold, so whether
    one lands inside the region would depend on everything allocated before it (a JIT
    compile or a cache load, an eviction's temporaries).  A precaution, not a measured
    fix: the 49.5k vs 58.6k instructions of a warm and a cold-weights depthwise call under
    callgrind did not move with it (the parallel eviction's wind-down was the cause).
    """
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _evictor(job: Job, channel: Channel) -> Any:
    """The cold modes' Evictor (None when warm), its settings told to the runner.  A
    counting pass under simulation skips the eviction's timing (each one is simulated)."""
    from convbench.harness import coldcache

    if job.cache == coldcache.WARM:
        return None
    evictor = coldcache.Evictor(job.cache, job.threads, job.cold_bytes,
                                parallel=not job.count_only, pass_bytes=job.pass_bytes)
    settings: dict[str, Any] = {"cold_pile_bytes": evictor.nbytes}
    if not job.count_only:
        settings["eviction_s"] = evictor.seconds_per_eviction()
    channel.send(Settings(settings=settings))
    return evictor


def _befores(evictor: Any, alive: list, variants: dict[str, Any], problem: Any,
             w: Any, channel: Channel) -> dict[str, Any]:
    """Per case, what runs untimed before each cold call: the eviction, and in cold-weights
    the case's twin -- its kernel built again on a copy of the weights (own memory) --
    on the call's input, into a spare output
    (:meth:`convbench.harness.coldcache.Evictor.before_twin`).
    Empty when warm.  A twin's build is entered as its case's, so a crash or hang in it
    is charged to that case."""
    from convbench.harness import coldcache
    from convbench.kernels import registry

    if evictor is None:
        return {}
    if evictor.mode != coldcache.COLD_WEIGHTS:
        return {case_id: evictor.before for case_id, _ex, _figures in alive}
    out = {}
    for case_id, _ex, _figures in alive:
        channel.enter(case_id, "prepare its twin")
        variant = variants[case_id]
        twin = registry.get(variant.algorithm).build(problem, w.copy(), variant.layout,
                                                     variant.param_dict)
        out[case_id] = evictor.before_twin(twin.run)
    return out


def _count(alive: list, session: Any, channel: Channel, calls: list[int],
           separate: bool, befores: dict[str, Any]) -> None:
    """A counted pass per case of ``calls[i]`` calls.  In a separate counting pass the
    figures go out as a Counts message; otherwise into the case's own figures.  In cold
    modes the case's ``befores`` entry runs outside the count first (:func:`_befores`)."""
    for (case_id, ex, figures), n in zip(alive, calls, strict=True):
        channel.enter(case_id, "count")
        prepare = None
        if case_id in befores:  # cold modes: n is 1 (single-call values)
            prepare = functools.partial(befores[case_id], ex.x, ex.y)
        elif separate:  # a separate pass counts a warm call: warm the buffers, uncounted
            prepare = functools.partial(ex.prepared.run, ex.x, ex.y)
        with _collector_paused(), session.region(prepare):
            for _ in range(n):
                ex.prepared.run(ex.x, ex.y)
        counted = session.read(n)
        if separate:
            channel.send(Counts(case_id, counted))
        else:
            figures.update(counted)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True, help="job file (JSON)")
    parser.add_argument("--fd", type=int, required=True, help="descriptor to report on")
    args = parser.parse_args(argv)
    _die_with_parent()
    # Ctrl-C reaches the whole process group; the runner decides and kills this worker, so
    # an interrupt is never mistaken for a failing case.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    job = Job.from_json(Path(args.job).read_text())
    if not job.count_only:   # valgrind keeps its own accounts; the limit is for kernels
        memory.apply(job.memory_limit)
    # which of its group's worker processes this is, for a kernel or library to read
    os.environ[PROCESS_ENV] = str(job.process)
    if not job.compile_width.startswith(SIM_WIDTH_PREFIX):
        # before anything imports numba; a counting pass's CPU comes in the environment
        apply_vector_width(job.compile_width or "auto")
    if job.cpus:
        affinity.pin(job.cpus)  # before numba's and OpenBLAS's threads start
    with os.fdopen(args.fd, "w") as stream:
        run_job(job, Channel(stream))
    return 0


if __name__ == "__main__":
    code = main()
    # Everything is said and the channel is closed: leave without the interpreter's
    # teardown.  Its garbage collections over numba's object graph cost every worker ~0.5 s
    # of CPU after its last message (Zen 3 host; many times that under valgrind), and a
    # thread a library left running (a pool never shut down) can no longer keep the process
    # alive.  numba writes its cache when it compiles, so nothing is lost; an exception
    # still leaves the normal way, with its traceback in the worker's log.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
