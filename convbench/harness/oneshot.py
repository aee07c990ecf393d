"""Workers that take one job file and write one answer file: the transforms and the
network pass (neither is a conv case, so neither speaks the runner's protocol).

The runner side starts the worker module and reads its answers (:func:`run_worker`), and
pools the timed values of a job's processes (:func:`pooled_timing`); the worker side reads
the job, pins itself before any thread pool starts and writes its answers (:func:`main`).

Progress: a worker calls :func:`tick` after each unit of its job (a tensor shape, a glue
op, a cache mode); each tick appends one byte to the job's progress file, which
:func:`run_worker` watches and reports, so a 15-minute ``convbench transforms`` shows a bar
with an ETA instead of nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from convbench import stats
from convbench.errors import ConvbenchError
from convbench.harness import affinity
from convbench.harness.supervise import worker_env

PROGRESS_KEY = "progress_file"
POLL_S = 0.2


def run_worker(module: str, job: dict[str, Any], timeout: float, what: str,
               timeout_hint: str = "",
               on_progress: Callable[[int], None] = lambda units: None
               ) -> list[dict[str, Any]]:
    """``python -m module`` on ``job``; its answers, or a ConvbenchError naming ``what``.
    ``on_progress(n)`` is told of the units the worker finished since the last call."""
    with tempfile.TemporaryDirectory(prefix="convbench-oneshot-") as tmp:
        job_file, out_file = Path(tmp, "job.json"), Path(tmp, "out.json")
        progress, log = Path(tmp, "progress"), Path(tmp, "stderr")
        job_file.write_text(json.dumps({**job, PROGRESS_KEY: str(progress)}))
        command = [sys.executable, "-m", module, "--job", str(job_file), "--out",
                   str(out_file)]
        where = f"{what} at {job['threads']} thread(s)"
        reported = 0
        with open(log, "w") as stderr:
            # in its own folder with the conv workers' environment (harness/supervise.py:
            # the runner's folder first on sys.path would put its listing into the
            # worker's heap, and paths relative to it would point elsewhere)
            worker = subprocess.Popen(command, env=worker_env(os.environ), cwd=tmp,
                                      stdout=subprocess.DEVNULL, stderr=stderr)
            deadline = time.monotonic() + timeout
            while worker.poll() is None:
                if time.monotonic() > deadline:
                    worker.kill()
                    worker.wait()
                    raise ConvbenchError(f"{where}: the worker took over {timeout:g} s"
                                         f"{timeout_hint}")
                time.sleep(POLL_S)
                reported = _report(progress, reported, on_progress)
        _report(progress, reported, on_progress)
        if worker.returncode != 0 or not out_file.exists():
            tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
            raise ConvbenchError(f"{where}: the worker exited with {worker.returncode}: "
                                 f"{tail}")
        return json.loads(out_file.read_text())


def _report(progress: Path, reported: int, on_progress: Callable[[int], None]) -> int:
    done = progress.stat().st_size if progress.exists() else 0
    if done > reported:
        on_progress(done - reported)
    return max(done, reported)


def tick(job: dict[str, Any]) -> None:
    """Worker side: one more unit of ``job`` done."""
    path = job.get(PROGRESS_KEY)
    if path:
        with open(path, "ab") as f:
            f.write(b".")


def pooled_timing(answers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The values of every process's answer (one answer a process) pooled: median, CI with
    the processes as the resampled unit, count, reference ratio."""
    values = [v for a in answers for v in a.get("values", ())]
    ref_values = [v for a in answers for v in a.get("ref_values", ())]
    processes = [p for p, a in enumerate(answers) for _ in a.get("values", ())]
    summary = stats.summarize(values, processes)
    return {"median_s": summary["median_s"], "ci_low_s": summary["ci_low_s"],
            "ci_high_s": summary["ci_high_s"], "n_values": len(values),
            "ref_ratio": stats.ratio_summary(values, ref_values)["ref_ratio"],
            "loops": max((a.get("loops", 0) for a in answers), default=0)}


def main(run_job: Callable[[dict[str, Any]], list[dict[str, Any]]], description: str,
         argv: list[str] | None = None) -> int:
    """A worker's entry point: read the job, pin, run, write the answers."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--job", required=True, help="job file (JSON)")
    parser.add_argument("--out", required=True, help="answer file (JSON)")
    args = parser.parse_args(argv)
    job = json.loads(Path(args.job).read_text())
    if job.get("cpus"):
        affinity.pin(job["cpus"])  # before numba's, OpenBLAS's and torch's threads start
    Path(args.out).write_text(json.dumps(run_job(job)))
    return 0
