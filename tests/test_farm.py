"""The benchmark farm on a real loopback dask cluster (issue 20): `dask scheduler` and two
`dask worker --resources bench=1` processes, `convbench run --scheduler` as a user runs it.

Two layers of the smoke suite, one direct convolution each (two worker groups, two cases),
keep it short; the local run it is held against uses the same restriction.
"""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

import pytest

from convbench.farm import layout
from convbench.harness.runner import KILL_AFTER_ENV
from convbench.history.runs import find_runs
from convbench.results import store
from tests.conftest import ROOT, convbench_process

pytest.importorskip("distributed", reason="the farm needs dask.distributed "
                                          "(pip install 'convbench[farm]')")

from tests.farm_cluster import LoopbackCluster

ONLY = ("--only", "layer=conv1x1,variant=direct/nchw",
        "--only", "layer=dwconv3x3,variant=direct/nchw")


def _outcome(path: Path) -> dict[str, str]:
    table = store.load(path).table
    return dict(zip(table["case_id"], table["status"], strict=True))


def _farm_outcome(path: Path) -> dict[str, str]:
    merged: dict[str, str] = {}
    for host in layout.host_dirs(path).values():
        merged.update(_outcome(host))
    return merged


def _run(*args: object) -> tuple[int, str]:
    done = convbench_process("run", "smoke", *ONLY, "-q", *args)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("local") / "run"
    rc, text = _run("-o", out)
    assert rc == 0, text
    return _outcome(out)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    farm = LoopbackCluster(tmp_path_factory.mktemp("cluster"))
    try:
        farm.start_worker("hostA")
        # two threads: only the bench resource keeps its tasks one at a time
        farm.start_worker("hostB", nthreads=2)
        farm.wait_ready()
        yield farm
    finally:
        farm.close()


def _assert_one_task_at_a_time(path: Path) -> None:
    by_worker: dict[str, list[tuple[float, float]]] = {}
    for task in layout.read(path)["tasks"]:
        by_worker.setdefault(task["worker"]["address"], []).append(
            (task["started"], task["ended"]))
    for spans in by_worker.values():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end, spans


def test_shard_and_every_host_give_the_rows_of_a_local_run(cluster, local, tmp_path, cli):
    shard, every = tmp_path / "shard", tmp_path / "every"
    rc, text = _run("--scheduler", cluster.address, "--shard", "--label", "nightly-1",
                    "-o", shard)
    assert rc == 0, text
    assert _farm_outcome(shard) == local
    assert layout.read(shard)["status"] == "complete"
    # convbench history reads a farm's hosts: labelled by --label, else the git commit
    assert {r.label for r in find_runs(shard)} == {"nightly-1"}
    rc, text = _run("--scheduler", cluster.address, "--every-host", "-o", every)
    assert rc == 0, text
    assert sorted(layout.host_dirs(every)) == ["hostA", "hostB"]
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    assert {r.label for r in find_runs(every)} == {commit or "hostA", commit or "hostB"}
    for host in layout.host_dirs(every).values():
        assert _outcome(host) == local
        assert store.load(host).environment["farm_host"] == host.name
    # hostB's two pinned groups were queued on a two-thread worker at once
    _assert_one_task_at_a_time(every)
    _assert_one_task_at_a_time(shard)
    # compare and report read the hosts side by side
    code, out, _ = cli("compare", every, every)
    assert code == 0
    assert "== host hostA ==" in out and "== host hostB ==" in out
    code, out, _ = cli("report", every, "--format", "csv", "-o", tmp_path / "report")
    assert code == 0
    from convbench.report.build import load_runs

    assert load_runs([every]).names == ["every/hostA", "every/hostB"]


def test_a_killed_worker_costs_only_its_group(local, tmp_path):
    farm = LoopbackCluster(tmp_path)
    doomed = {KILL_AFTER_ENV: "1"}   # the worker SIGKILLs itself inside its first group
    try:
        farm.start_worker("hostA", env=doomed)
        farm.start_worker("hostB")
        farm.wait_ready()
        # --shard: the killed group is retried on hostB, nothing is lost
        rc, text = _run("--scheduler", farm.address, "--shard", "-o", tmp_path / "shard")
        assert rc == 0, text
        assert not farm.alive("hostA")
        assert _farm_outcome(tmp_path / "shard") == local
        meta = layout.read(tmp_path / "shard")
        assert {t["worker"]["name"] for t in meta["tasks"]} == {"hostB"}
        assert len(meta["tasks"]) == 2 and not meta["lost"]
        assert [d["host"] for d in meta["departed"]] == ["hostA"]

        # --every-host (one group, to save time): the dead host's group is lost, hostB's
        # runs; --resume finishes it on a healthy hostA
        farm.start_worker("hostA", env=doomed)
        farm.wait_ready()
        every = tmp_path / "every"
        done = convbench_process("run", "smoke", *ONLY[:2], "-q", "--scheduler",
                                 farm.address, "--every-host", "--lost-after", "1", "-o", every)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "finish with: convbench run --resume" in done.stderr
        meta = layout.read(every)
        assert meta["status"] == "incomplete"
        one = {cid: status for cid, status in local.items() if cid.startswith("conv1x1|")}
        assert [(lost["host"], lost["cases"]) for lost in meta["lost"]] == [("hostA",
                                                                              list(one))]
        assert _outcome(every / "hosts" / "hostB") == one
        assert not (every / "hosts" / "hostA").exists()
        farm.start_worker("hostA")
        farm.wait_ready()
        done = convbench_process("run", "--resume", every, "--scheduler", farm.address, "-q")
        assert done.returncode == 0, done.stdout + done.stderr
        assert _outcome(every / "hosts" / "hostA") == one
        assert layout.read(every)["status"] == "complete"
    finally:
        farm.close()


def test_farm_user_errors(cli, tmp_path):
    code, _, err = cli("run", "smoke", "--shard")
    assert code == 2 and "--shard needs --scheduler" in err
    code, _, err = cli("run", "smoke", "--scheduler", "tcp://127.0.0.1:1")
    assert code == 2 and "--every-host" in err
    code, _, err = cli("run", "smoke", "--scheduler", "nonsense://127.0.0.1:1", "--shard")
    assert code == 2 and "cannot connect" in err
