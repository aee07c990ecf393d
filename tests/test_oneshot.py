"""oneshot workers (transforms, network pass) from the runner's side: answers, progress
ticks, a hang and a failure each told in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from convbench.errors import ConvbenchError
from convbench.harness import oneshot

MODULE = "tests.oneshot_workers"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _tests_importable(monkeypatch):
    """The worker starts in a folder of its own: ``tests`` imports from the checkout root
    only through PYTHONPATH (as a user's own modules would)."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


def test_answers_and_every_tick_reach_the_runner():
    units: list[int] = []
    answers = oneshot.run_worker(MODULE, {"threads": 1, "ticks": 3, "then": "answer"}, 60,
                                 "test", on_progress=units.append)
    (answer,) = answers
    assert answer["answer"] == 42
    assert sum(units) == 3 and all(n > 0 for n in units)


def test_a_worker_starts_in_a_folder_of_its_own_that_goes_with_it(tmp_path, monkeypatch):
    """As the conv workers (harness/supervise.py): not the runner's folder, whose listing
    would reach the worker's heap through sys.path."""
    monkeypatch.chdir(tmp_path)
    (answer,) = oneshot.run_worker(MODULE, {"threads": 1, "ticks": 0, "then": "answer"}, 60,
                                   "test")
    assert Path(answer["cwd"]) != tmp_path
    assert Path(answer["cwd"]).name.startswith("convbench-oneshot-")
    assert not Path(answer["cwd"]).exists()


def test_a_hanging_worker_is_killed_at_its_limit():
    with pytest.raises(ConvbenchError, match=r"test at 1 thread\(s\): the worker took over "
                                             r"2 s \(--timeout\)"):
        oneshot.run_worker(MODULE, {"threads": 1, "ticks": 0, "then": "hang"}, 2, "test",
                           " (--timeout)")


def test_a_failing_worker_is_named_with_its_last_words():
    with pytest.raises(ConvbenchError, match=r"exited with 1: .*RuntimeError: the job said so"):
        oneshot.run_worker(MODULE, {"threads": 1, "ticks": 1, "then": "fail"}, 60, "test")
