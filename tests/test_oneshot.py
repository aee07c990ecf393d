"""oneshot workers (transforms, network pass) from the runner's side: answers, progress
ticks, a hang and a failure each told in one line."""

from __future__ import annotations

import pytest

from convbench.errors import ConvbenchError
from convbench.harness import oneshot

MODULE = "tests.oneshot_workers"


def test_answers_and_every_tick_reach_the_runner():
    units: list[int] = []
    answers = oneshot.run_worker(MODULE, {"threads": 1, "ticks": 3, "then": "answer"}, 60,
                                 "test", on_progress=units.append)
    assert answers == [{"answer": 42}]
    assert sum(units) == 3 and all(n > 0 for n in units)


def test_a_hanging_worker_is_killed_at_its_limit():
    with pytest.raises(ConvbenchError, match=r"test at 1 thread\(s\): the worker took over "
                                             r"2 s \(--timeout\)"):
        oneshot.run_worker(MODULE, {"threads": 1, "ticks": 0, "then": "hang"}, 2, "test",
                           " (--timeout)")


def test_a_failing_worker_is_named_with_its_last_words():
    with pytest.raises(ConvbenchError, match=r"exited with 1: .*RuntimeError: the job said so"):
        oneshot.run_worker(MODULE, {"threads": 1, "ticks": 1, "then": "fail"}, 60, "test")
