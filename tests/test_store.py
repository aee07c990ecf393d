"""The results writer (issue 16, items 5, 8, 12, 14): a commit is one journal line, a torn
tail is dropped, one writer per directory, a half-built directory never blocks the path, and
storage errors are one line with exit 2 (a real tmpfs, full or read-only)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from convbench.errors import ConvbenchError
from convbench.harness import scratch
from convbench.results import journal, schema, store
from convbench.results.store import ResultsStore
from tests.conftest import DATA, convbench_process

TINY = DATA / "tiny_suite.yaml"


def _row(i: int) -> dict:
    return {"case_id": f"layer|alg/nchw/i={i}|t1|vauto", "suite": "s", "layer": "layer",
            "variant": f"alg/nchw/i={i}", "algorithm": "alg", "layout": "nchw",
            "params": "{}", "threads": 1, "vector_width": "auto", "cache": "warm",
            "descriptor": "mb1ic1ih1oc1oh1kh1", "status": "ok", "reason": "",
            "median_s": 1e-3 * (i + 1), "n_values": 3, "loops": 10, "flops": 2}


def _values(i: int) -> list[dict]:
    return [{"case_id": _row(i)["case_id"], "process": 0, "round": k,
             "value": 1e-3 * (i + 1) + k * 1e-6, "ref_value": 1e-3, "loops": 10}
            for k in range(3)]


def _create(path: Path, planned: int = 3) -> ResultsStore:
    return ResultsStore.create(path, "s", "name: s\n", [_row(i)["case_id"]
                                                        for i in range(planned)],
                               {"cpu_model": "test"}, {})


def test_a_commit_appends_one_line_and_rewrites_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    st = _create(out)
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.name != journal.JOURNAL}
    sizes = []
    for i in range(3):
        st.add(_row(i), _values(i))
        sizes.append((out / journal.JOURNAL).stat().st_size)
    after = {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.name != journal.JOURNAL}
    assert after == before                       # no file but the journal was touched
    assert not (out / schema.RESULTS_PARQUET).exists()
    lines = (out / journal.JOURNAL).read_bytes().splitlines()
    assert len(lines) == 3
    steps = [sizes[0]] + [b - a for a, b in itertools.pairwise(sizes)]
    assert max(steps) - min(steps) <= 8          # each commit writes its own line only
    # a reader of the running directory replays the journal
    partial = store.load(out)
    assert list(partial.table["case_id"]) == [_row(i)["case_id"] for i in range(3)]
    assert len(partial.values) == 9
    st.set_status(store.STATUS_COMPLETE)
    st.close()
    done = store.load(out)
    assert done.complete and list(done.table["median_s"]) == [1e-3, 2e-3, 3e-3]


def test_a_counting_pass_keeps_its_words_in_the_table(tmp_path: Path) -> None:
    """A separate counting pass merges ``ctr_source`` (text) with its counts; the table
    keeps the text, running (journal replayed) and complete alike, where a numeric
    conversion of every counter column once turned it into NaN."""
    out = tmp_path / "run"
    st = _create(out, planned=1)
    st.add(_row(0), _values(0))
    st.update(_row(0)["case_id"], {"ctr_source": "simulated (callgrind cache-sim)",
                                   "sim_ir": 48989399.0, "l1d_miss_rate_reason": None})
    tables = [store.load(out).table]
    st.set_status(store.STATUS_COMPLETE)
    st.close()
    tables.append(store.load(out).table)
    for table in tables:
        assert table["ctr_source"].tolist() == ["simulated (callgrind cache-sim)"]
        assert table["sim_ir"].dtype == "float64"
        assert table["sim_ir"].tolist() == [48989399.0]


def test_a_torn_last_line_is_dropped_and_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "run"
    st = _create(out)
    st.add(_row(0), _values(0))
    st.close()
    whole = (out / journal.JOURNAL).stat().st_size
    with open(out / journal.JOURNAL, "ab") as f:      # a writer killed mid-line
        f.write(journal.encode({"case": _row(1), "values": _values(1)})[:40])
    assert [r["case_id"] for r in journal.read(out / journal.JOURNAL).rows] == \
        [_row(0)["case_id"]]
    again = ResultsStore.reopen(out)
    assert again.done == {_row(0)["case_id"]}
    assert (out / journal.JOURNAL).stat().st_size == whole   # the torn tail went first
    again.add(_row(1), _values(1))
    again.close()
    assert [r["case_id"] for r in journal.read(out / journal.JOURNAL).rows] == \
        [_row(0)["case_id"], _row(1)["case_id"]]


def test_one_writer_per_directory(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = _create(out)
    with pytest.raises(ConvbenchError, match=rf"pid {os.getpid()}\b.*writing"):
        ResultsStore.reopen(out)
    first.close()
    ResultsStore.reopen(out).close()                 # released: a resume may take it


def test_a_second_process_cannot_resume_a_directory_being_written(tmp_path: Path) -> None:
    out = tmp_path / "run"
    holder = _create(out)
    try:
        done = convbench_process("run", "--resume", out, "-q")
    finally:
        holder.close()
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "writing this results directory" in done.stderr


def test_a_half_built_directory_of_a_dead_run_frees_the_path(tmp_path: Path) -> None:
    """Killed before the rename: only a hidden sibling is left, and the next run at that
    path removes it and starts (issue 16, item 5)."""
    out = tmp_path / "run"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f".run{store.STAGING_MARK}{dead}"
    stale.mkdir()
    (stale / schema.SUITE_COPY).write_text("partial")
    st = _create(out)
    st.close()
    assert not stale.exists() and (out / schema.MANIFEST).is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_an_empty_output_directory_is_used(tmp_path: Path) -> None:
    out = tmp_path / "made-by-the-user"
    out.mkdir()
    _create(out).close()
    assert (out / schema.MANIFEST).is_file()


def test_stale_scratch_folders_of_dead_runs_are_removed(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale, live = tmp_path / f"{scratch.PREFIX}old", tmp_path / f"{scratch.PREFIX}live"
    for folder, pid in ((stale, dead), (live, str(os.getpid()))):
        (folder / "convbench-worker-x").mkdir(parents=True)
        (folder / scratch.OWNER).write_text(pid)
    assert scratch.remove_stale(tmp_path) == [stale]
    assert live.exists() and not stale.exists()


@pytest.fixture
def tmpfs(tmp_path: Path):
    """A real tmpfs mounted for the test (needs root, as in CI); skipped where mounting is
    not allowed."""
    mounts = []

    def mount(name: str, options: str) -> Path:
        point = tmp_path / name
        point.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounts.append(point)
        return point

    yield mount
    for point in mounts:
        subprocess.run(["umount", "-l", str(point)], capture_output=True)


def _one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [x for x in done.stderr.splitlines() if not x.startswith("convbench: warning")]
    assert len(lines) == 1 and lines[0].startswith("convbench: error:"), done.stderr
    return lines[0]


def test_a_full_disk_stops_the_run_with_one_line_and_it_resumes(tmp_path: Path,
                                                                tmpfs) -> None:
    """A 48 KiB tmpfs fills up during the run (the journal, or the files written when it
    stops): one line, exit 2, and the journal's cases survive a resume elsewhere."""
    disk = tmpfs("full", "size=48k")
    out = disk / "run"
    line = _one_error_line(convbench_process("run", TINY, "-o", out, "-q"))
    assert "No space left on device" in line and "--resume" in line
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)
    kept = len(journal.read(moved / journal.JOURNAL).rows)
    resumed = convbench_process("run", "--resume", moved, "-q")
    assert resumed.returncode == 0, resumed.stderr
    table = store.load(moved).table
    planned = json.loads((moved / schema.MANIFEST).read_text())["planned"]
    assert sorted(table["case_id"]) == sorted(planned) and 0 < kept <= len(planned)


def test_a_read_only_file_system_is_one_line(tmpfs) -> None:
    disk = tmpfs("ro", "size=1m,ro")
    line = _one_error_line(convbench_process("run", TINY, "-o", disk / "run", "-q"))
    assert "Read-only file system" in line
