"""One worker process seen from the runner: start it, read its messages, enforce time limits.

The runner follows the worker's :class:`~convbench.harness.protocol.Enter` messages to know
which case is running, charges elapsed time to it, and kills the worker when a case
exceeds its limit.  How the worker ended is a :class:`WorkerEnd`: the cases it finished and,
when it died or hung, the case it was running (the culprit) with a status and a reason.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from convbench.harness.protocol import (
    CaseSpec,
    Counts,
    Enter,
    Job,
    Message,
    Restart,
    Result,
    decode,
)
from convbench.status import Status

if TYPE_CHECKING:
    from convbench.harness.plan import Case
    from convbench.spec.suite import TimingOptions

STARTUP_LIMIT_S = 120.0   # imports, the reference kernel: time charged to no case
SIM_SLOWDOWN = 100        # a simulated counting pass may take this much longer
SIM_STARTUP_SLOWDOWN = 10  # a simulated worker's imports: 20 min, not 120 s
# After a worker closed its channel it has nothing left to say; a clean exit takes well
# under a second (numba's and BLAS's pools wind down).  One that is still there after this
# is held by a thread a kernel or library left running, and would be waited for forever.
EXIT_GRACE_S = 5.0

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
class WorkerEnd:
    """How a worker ended: the case it was running when it died or hung (if any)."""

    finished: set[str] = field(default_factory=set)
    culprit: str | None = None
    status: Status | None = None   # CRASH, TIMEOUT or ERROR, for the culprit or the rest
    reason: str = ""
    compiled: list[str] = field(default_factory=list)  # asked to be restarted after these
    lingered: bool = False         # closed its channel, did not exit, was killed


@dataclass(frozen=True)
class _OutOfTime:
    """Not a worker message: the current stretch ran past its limit."""

    case: str | None


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def _tail(path: Path, lines: int = 3) -> str:
    text = path.read_text(errors="replace").strip().splitlines()
    return " | ".join(text[-lines:])


# paths a worker reads from its environment: absolute, since it runs in another folder
_PATH_VARIABLES = ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")


def worker_env(environ: Mapping[str, str]) -> dict[str, str]:
    """A worker's environment: ``environ`` with idle threads told to sleep, and what a
    process started in a folder of its own needs to find what the runner's folder held
    (relative paths made absolute, the folder extra kernel modules come from)."""
    from convbench.kernels import registry  # the runner has it loaded already

    env = {**QUIET_SPIN_ENV, **environ, **registry.extra_kernels_dir_env(environ)}
    for name in _PATH_VARIABLES:
        if env.get(name):
            env[name] = os.path.abspath(env[name])
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(entry) for entry in env["PYTHONPATH"].split(os.pathsep))
    return env


class WorkerProcess:
    """One worker process running ``job`` (the cases of one group)."""

    def __init__(self, job: Job, timeout: float, prefix: Sequence[str] = (),
                 scratch: Path | None = None):
        self.job = job
        self.timeout = timeout * (SIM_SLOWDOWN if job.count_only else 1)
        self.exit_grace = EXIT_GRACE_S * (SIM_SLOWDOWN if job.count_only else 1)
        # numba's and numpy's imports run under valgrind too: alone on the AMD host they
        # took ~1 min, three simulated workers beside other load passed 120 s and every
        # case of the group lost its counts ("killed ... (starting)")
        self.startup_limit = STARTUP_LIMIT_S * (SIM_STARTUP_SLOWDOWN if job.count_only else 1)
        self.tmp = Path(tempfile.mkdtemp(prefix="convbench-worker-", dir=scratch))
        (self.tmp / "job.json").write_text(job.to_json())
        self.log = self.tmp / "worker.log"
        read_fd, write_fd = os.pipe()
        env = worker_env(os.environ)
        with open(self.log, "wb") as log:
            # The worker starts in its own folder (job.json and worker.log, nothing else):
            # `python -m` puts the current folder first on sys.path, and every import lists
            # it, so under callgrind the caller's folder moved the simulated counts with
            # what it held (one entry more, a results/ folder or .hypothesis/ made by an
            # earlier command: 307401 -> 307505 Ir per call, Zen 3) and run-to-run counts
            # of a fresh checkout did not repeat.
            self.proc = subprocess.Popen(
                [*prefix, sys.executable, "-m", "convbench.harness.worker",
                 "--job", str(self.tmp / "job.json"), "--fd", str(write_fd)],
                pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=env, cwd=self.tmp)
        os.close(write_fd)
        self.read_fd = read_fd

    def _messages(self) -> Iterator[Message | _OutOfTime]:
        """The worker's messages; an _OutOfTime when the current stretch runs out."""
        buffer = b""
        current: str | None = None
        spent: dict[str | None, float] = {}
        since = time.monotonic()
        while True:
            limit = (self.startup_limit if current is None
                     else self.timeout - spent.get(current, 0.0))
            wait = max(0.0, since + limit - time.monotonic())
            ready, _, _ = select.select([self.read_fd], [], [], wait)
            if not ready:
                yield _OutOfTime(current)
                return
            chunk = os.read(self.read_fd, 1 << 16)
            if not chunk:
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                message = decode(line)
                if isinstance(message, Enter):
                    now = time.monotonic()
                    if current is not None:
                        spent[current] = spent.get(current, 0.0) + now - since
                    current, since = message.case, now
                yield message

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        os.close(self.read_fd)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run(self, on_message: Callable[[Message], None]) -> WorkerEnd:
        """Hand every message to ``on_message`` until the worker ends; say how it ended."""
        end = WorkerEnd()
        current: str | None = None
        phase = "starting"
        try:
            for message in self._messages():
                if isinstance(message, _OutOfTime):
                    self.proc.kill()
                    what = f"{self.timeout:g} s" if message.case else f"{self.startup_limit:g} s"
                    end.culprit, end.status = message.case, Status.TIMEOUT
                    end.reason = (f"killed after exceeding the time limit of {what} "
                                  f"({phase})")
                    return end
                if isinstance(message, Enter):
                    current, phase = message.case, message.phase
                elif isinstance(message, Result | Counts):
                    end.finished.add(message.case)
                elif isinstance(message, Restart):
                    end.compiled = list(message.compiled)
                on_message(message)
            try:
                code = self.proc.wait(timeout=self.exit_grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                end.lingered = True
                if end.compiled or len(end.finished) == len(self.job.cases):
                    return end   # everything was said: the results stand
                end.status = Status.ERROR
                end.reason = (f"worker closed its channel but did not exit within "
                              f"{self.exit_grace:g} s ({phase}): a thread left running?")
                end.culprit = current if current not in end.finished else None
                return end
            if code == 0 and (end.compiled or len(end.finished) == len(self.job.cases)):
                return end
            if code < 0:
                end.status = Status.CRASH
                end.reason = f"worker killed by {_signal_name(-code)} ({phase})"
            else:
                end.status = Status.ERROR
                end.reason = f"worker exited with code {code} ({phase}): {_tail(self.log)}"
            end.culprit = current if current not in end.finished else None
            return end
        finally:
            self.close()


def job_for(cases: Sequence[Case], timing: TimingOptions, counters: str, seed: int,
            count_only: bool = False, cold_bytes: int | None = None,
            pass_bytes: int | None = None,
            cpus: tuple[int, ...] = (), restart_if_compiled: bool = True,
            process: int = 0, compile_width: str = "",
            memory_limit: int | None = None, compile_only: bool = False) -> Job:
    """The job of one group's cases."""
    case = cases[0]
    return Job(threads=case.threads, vector_width=case.vector_width,
               problem={**case.problem.shape_fields, "name": case.problem.name},
               cases=tuple(CaseSpec(c.case_id, c.variant.algorithm, c.variant.layout,
                                    c.variant.param_dict) for c in cases),
               timing=asdict(timing), counters=counters, count_only=count_only, seed=seed,
               cache=case.cache, cold_bytes=cold_bytes, pass_bytes=pass_bytes, cpus=cpus,
               restart_if_compiled=restart_if_compiled, process=process,
               compile_width=compile_width, memory_limit=memory_limit,
               compile_only=compile_only)
