"""A real dask cluster on loopback for the farm tests: `dask scheduler` and `dask worker`
processes, started as the README's recipe says, stopped by their own pids."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT

START_LIMIT_S = 60.0


def _wait_for(condition, what: str, log: Path) -> None:
    deadline = time.monotonic() + START_LIMIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)


def _address(scheduler_file: Path) -> str | None:
    """The scheduler's address once its file is written in full, else None."""
    try:
        return json.loads(scheduler_file.read_text())["address"]
    except (OSError, ValueError, KeyError):
        return None


class LoopbackCluster:
    """One scheduler on 127.0.0.1 and the workers the test starts (each: --nthreads 1
    --resources bench=1 --name NAME, no nanny, so a killed worker stays dead)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.workers: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}   # each worker's latest log
        address_file = folder / "scheduler.json"
        log = folder / "scheduler.log"
        self.scheduler = subprocess.Popen(
            [sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
             "--no-dashboard", "--scheduler-file", str(address_file)],
            stdout=log.open("wb"), stderr=subprocess.STDOUT)
        # the scheduler creates the file, then writes it: an empty file is not ready yet
        _wait_for(lambda: _address(address_file) is not None, "the scheduler", log)
        self.address = _address(address_file)

    def start_worker(self, name: str, env: dict[str, str] | None = None,
                     nthreads: int = 1) -> None:
        log = self.folder / f"{name}-{len(self.workers)}.log"
        self.workers[name] = subprocess.Popen(
            [sys.executable, "-m", "dask", "worker", self.address, "--nthreads", str(nthreads),
             "--resources", "bench=1", "--name", name, "--no-nanny", "--no-dashboard"],
            cwd=ROOT, env={**os.environ, **(env or {})}, stdout=log.open("wb"),
            stderr=subprocess.STDOUT)
        self.logs[name] = log

    def wait_ready(self) -> None:
        """Until every started worker has registered with the scheduler."""
        for name, log in self.logs.items():
            _wait_for(lambda log=log: "Registered to" in log.read_text(), f"worker {name}",
                      log)

    def alive(self, name: str) -> bool:
        return self.workers[name].poll() is None

    def close(self) -> None:
        # SIGKILL: a worker's graceful close waits for its scheduler, ~10 s here
        for proc in [*self.workers.values(), self.scheduler]:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait()
