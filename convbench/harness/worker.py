"""The worker process: verifies, calibrates, times and counts one group of cases.

Started by the runner as ``python -m convbench.harness.worker --job FILE --fd N``.  The job
(JSON) names the cases of one layer at one thread count and vector width.  The worker
talks back through file descriptor N, one JSON object per line:

    {"type": "hello", "settings": {...}}         threads, vector width as applied
    {"type": "enter", "case": ID|null, "phase": P} what runs now (the parent's timeout clock)
    {"type": "result", "case": ID, ...}          a finished case (verification, timing)
    {"type": "settings", "settings": {...}}      figures known only after a kernel ran

Everything that can crash or hang (kernels) runs here, so the runner survives it.  The
vector width must be in ``NUMBA_CPU_FEATURES`` before numba is imported, so this module
imports numba and the kernels only inside :func:`main`, after :func:`apply_vector_width`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Any, TextIO

from convbench.host import FEATURES_ENV, cpu_features


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
    """JSON lines to the runner."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def send(self, kind: str, **fields: Any) -> None:
        self.stream.write(json.dumps({"type": kind, **fields}) + "\n")
        self.stream.flush()

    def enter(self, case: str | None, phase: str) -> None:
        self.send("enter", case=case, phase=phase)


def _error_fields(report: Any) -> dict[str, float]:
    nan = float("nan")
    if report is None:
        return {"max_abs_err": nan, "max_rel_err": nan, "err_bound_ratio": nan}
    return {"max_abs_err": report.max_abs, "max_rel_err": report.max_rel,
            "err_bound_ratio": report.worst_ratio}


def run_job(job: dict[str, Any], channel: Channel) -> None:
    """Verify every case, then time the survivors round-robin, then count them."""
    import numba
    import numpy as np
    import threadpoolctl

    from convbench.harness import counters, timer
    from convbench.harness.inputs import make_inputs
    from convbench.harness.verify import verify
    from convbench.kernels.base import Variant
    from convbench.kernels.reference import Reference
    from convbench.spec.problem import ConvProblem

    threads, timing = job["threads"], job["timing"]
    numba.set_num_threads(threads)
    blas_limit = threadpoolctl.threadpool_limits(threads)  # noqa: F841 - held for the job
    channel.send("hello", settings={
        "threads": threads, "numba_threads": numba.get_num_threads(),
        "vector_width": job["vector_width"], FEATURES_ENV: os.environ.get(FEATURES_ENV, ""),
        "spin": {k: os.environ.get(k, "")
                 for k in ("OPENBLAS_THREAD_TIMEOUT", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY")},
        "blas": [{k: str(v) for k, v in lib.items()}
                 for lib in threadpoolctl.threadpool_info()]})
    count_kind = job["counters"]
    count_only = job.get("count_only", False)
    if counters.needs_separate_pass(count_kind) and not count_only:
        count_kind = "none"  # simulated counts come from their own pass
    session = counters.open_session(count_kind)
    try:
        problem = ConvProblem(**job["problem"])
        x, w = make_inputs(problem, job.get("seed", 0))
        reference = Reference(problem, x, w)
        runtime_start = timer.start_parallel_runtime()
        alive: list[tuple[dict[str, Any], Any, dict[str, Any]]] = []
        for spec in job["cases"]:
            variant = Variant.of(spec["algorithm"], spec["layout"], spec["params"])
            channel.enter(spec["case_id"], "verify")
            verdict, execution = verify(problem, variant, reference, x, w)
            row: dict[str, Any] = {**_error_fields(verdict.report),
                                   "prepare_s": verdict.prepare_seconds}
            if verdict.status != "pass" or execution is None:
                status = "fail" if verdict.status == "fail" else "error"
                channel.send("result", case=spec["case_id"], status=status,
                             reason=verdict.reason, row=row)
                continue
            prepared = execution.prepared
            row.update(workspace_bytes=prepared.workspace_bytes,
                       packed_weight_bytes=prepared.packed_weight_bytes,
                       info=json.dumps(prepared.info(), sort_keys=True),
                       first_call_s=verdict.first_call_seconds)
            alive.append((spec, execution, row))
        with_layer = {"numba_threading_layer": _threading_layer(numba),
                      "parallel_runtime_start_s": runtime_start}
        channel.send("settings", settings=with_layer)
        if count_only:
            _count(alive, session, channel, calls=1)
            return
        channel.enter(None, "calibrate")
        ref = timer.ReferenceKernel()
        ref_entry = timer.Entry("reference", ref, timer.calibrate(ref, timing["min_time"]))
        entries = []
        for spec, ex, _row in alive:
            channel.enter(spec["case_id"], "calibrate")
            run, args = ex.prepared.run, (ex.x, ex.y)
            loops = timer.calibrate(run, timing["min_time"], args)
            for _ in range(timing["warmups"]):
                timer.time_calls(run, loops, args)
            entries.append(timer.Entry(spec["case_id"], run, loops, args))
        timer.run_rounds(entries, ref_entry, timing["values"],
                         on_enter=lambda key: channel.enter(key, "time"))
        for (_spec, _ex, row), entry in zip(alive, entries, strict=True):
            steady = float(np.median(entry.values))
            row["compile_s"] = max(0.0, row.pop("first_call_s") - steady)
            row["loops"] = entry.loops
        if session.kind != "none":
            _count(alive, session, channel, calls=None, entries=entries)
        for (spec, _ex, row), entry in zip(alive, entries, strict=True):
            channel.send("result", case=spec["case_id"], status="ok", reason="", row=row,
                         values=entry.values, ref_values=ref_entry.values,
                         ref_loops=ref_entry.loops)
    finally:
        session.close()


def _threading_layer(numba: Any) -> str:
    try:
        return numba.threading_layer()
    except ValueError:  # no parallel kernel has run in this worker
        return "not initialised"


def _count(alive: list, session: Any, channel: Channel, calls: int | None,
           entries: list | None = None) -> None:
    """A counted pass per case; columns go into the case's row (or a "counts" message)."""
    for i, (spec, ex, row) in enumerate(alive):
        n = calls if calls is not None else entries[i].loops  # type: ignore[index]
        channel.enter(spec["case_id"], "count")
        with session.region():
            for _ in range(n):
                ex.prepared.run(ex.x, ex.y)
        figures = session.read(n)
        if calls is not None:
            channel.send("counts", case=spec["case_id"], row=figures)
        else:
            row.update(figures)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True, help="job file (JSON)")
    parser.add_argument("--fd", type=int, required=True, help="descriptor to report on")
    args = parser.parse_args(argv)
    _die_with_parent()
    # Ctrl-C reaches the whole process group; the runner decides and kills this worker, so
    # an interrupt is never mistaken for a failing case.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with open(args.job) as f:
        job = json.load(f)
    apply_vector_width(job["vector_width"])  # before anything imports numba
    with os.fdopen(args.fd, "w") as stream:
        run_job(job, Channel(stream))
    return 0


if __name__ == "__main__":
    sys.exit(main())
