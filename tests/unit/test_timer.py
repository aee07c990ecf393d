"""The timer's loop calibration (harness/timer.py)."""

from __future__ import annotations

import time

from convbench.harness import timer


def test_one_interrupted_call_does_not_decide_the_loop_count():
    """The first call lasts 5 ms (a preemption, say), every later one about a microsecond:
    a value of one call lasts the 1 ms min_time once, not twice, so more loops are needed."""
    calls = []

    def call() -> None:
        if not calls:
            time.sleep(0.005)
        calls.append(1)

    loops = timer.calibrate(call, 0.001)
    assert loops > 1


def test_a_call_that_always_lasts_min_time_is_one_loop():
    assert timer.calibrate(lambda: time.sleep(0.002), 0.001) == 1
