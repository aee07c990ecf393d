"""The runner's guard for a worker that closes its channel but does not exit: it is killed
after the exit grace and its results stand (issue 16, item 1).  A real worker runs the
case; ``sh`` wraps it and outlives it, as a process stuck after its last word would."""

from __future__ import annotations

import sys

from convbench.harness import supervise
from convbench.harness.plan import build_plan
from convbench.harness.protocol import Result
from convbench.spec.suite import load_suite
from tests.conftest import DATA

TINY = DATA / "tiny_suite.yaml"
# Runs the worker (its last argument is the channel's descriptor), closes its own copy of
# the channel so that the runner sees the end of it, then lingers.
OUTLIVES = (sys.executable, "-c",
            "import os, subprocess, sys, time; fd = int(sys.argv[-1]); "
            "subprocess.call(sys.argv[1:], pass_fds=(fd,)); os.close(fd); time.sleep(60)")


def _run_worker(prefix: tuple[str, ...]) -> tuple[supervise.WorkerEnd, list[Result]]:
    plan = build_plan(load_suite(TINY), only=["layer=conv1x1,variant=direct/nhwc"])
    job = supervise.job_for(plan.runnable, plan.timing, "none", seed=0,
                            restart_if_compiled=False)
    worker = supervise.WorkerProcess(job, plan.timing.timeout, prefix)
    results: list[Result] = []
    end = worker.run(lambda m: results.append(m) if isinstance(m, Result) else None)
    return end, results


def test_a_worker_that_outlives_its_channel_is_killed_and_its_results_stand(monkeypatch):
    monkeypatch.setattr(supervise, "EXIT_GRACE_S", 1.0)
    end, results = _run_worker(OUTLIVES)
    assert end.lingered and end.status is None, end
    assert [r.status for r in results] == ["ok"] and end.finished == {results[0].case}


def test_a_worker_exits_by_itself_once_it_has_said_everything():
    end, results = _run_worker(())
    assert not end.lingered and end.status is None, end
    assert [r.status for r in results] == ["ok"]
