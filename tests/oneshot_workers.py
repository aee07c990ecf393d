"""A oneshot worker for the tests of convbench.harness.oneshot: ticks, then answers, hangs
or fails as its job says (run as ``python -m tests.oneshot_workers``)."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from convbench.harness import oneshot


def run_job(job: dict[str, Any]) -> list[dict[str, Any]]:
    for _ in range(job["ticks"]):
        oneshot.tick(job)
    if job["then"] == "hang":
        time.sleep(60)
    if job["then"] == "fail":
        raise RuntimeError("the job said so")
    return [{"answer": 42, "cwd": os.getcwd()}]


if __name__ == "__main__":
    sys.exit(oneshot.main(run_job, "test worker"))
