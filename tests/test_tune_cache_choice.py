"""``convbench tune --cache auto``: cold-weights, with a network's conv weights per pass as the
pile (convbench/tune/cache_choice.py)."""

from __future__ import annotations

import pytest

from convbench.spec.suite import load_suite
from convbench.tune import cache_choice, records
from tests.conftest import DATA, ROOT

MIB = 1 << 20
NETWORKS = ("mobilenet_v1", "mobilenet_v2", "resnet18", "resnet50", "vgg16")


@pytest.mark.parametrize("name", NETWORKS)
def test_weight_bytes_count_every_conv_of_the_network_order(name):
    # the layers' counts against the graph's conv ops: two ways to one pass's weights
    suite = load_suite(ROOT / "suites" / f"{name}.yaml")
    by_graph = sum(suite.graph.problem(op).weight_bytes for op in suite.graph.convs)
    assert suite.pass_weight_bytes == by_graph > 0


def test_every_suite_tunes_cold_weights_and_a_network_says_its_pile():
    """cold-weights with the network's weights as the pile and the twin predicted MobileNet
    V1's pass within 3% at 2 threads, where a warm tune under-predicted by 24-32% (the
    module docstring): every thread count, small networks too."""
    for name in NETWORKS:
        suite = load_suite(ROOT / "suites" / f"{name}.yaml")
        for threads in (1, 2):
            choice = cache_choice.choose(suite, threads)
            assert choice.mode == "cold-weights", choice
            assert f"{suite.pass_weight_bytes / MIB:.1f} MiB" in choice.reason
    layers_only = cache_choice.choose(load_suite(DATA / "tune_suite.yaml"), 1)
    assert layers_only.mode == "cold-weights" and "names no network" in layers_only.reason


def test_auto_beside_another_mode_is_refused(cli, tmp_path):
    code, _, err = cli("tune", DATA / "net_suite.yaml", "--cache", "auto,warm",
                       "--records", tmp_path / "r.jsonl")
    assert code == 2 and "auto chooses one mode per thread count" in err
    assert not (tmp_path / "r.jsonl").exists()


def test_a_real_auto_tune_of_a_network_is_cold_weights_with_its_pile(cli, tmp_path):
    path = tmp_path / "records.jsonl"
    code, _, err = cli("tune", DATA / "net_suite.yaml", "--records", path,
                       "--only", "layer=c1x1,algorithm=direct")
    assert code == 0, err
    assert "cache mode at 1 thread(s): cold-weights" in err and "per pass" in err
    written = records.read(path)
    assert written and {r["cache"] for r in written} == {"cold-weights"}


def test_a_thread_count_past_the_cpus_is_refused_before_any_machine_measuring(cli, tmp_path,
                                                                              monkeypatch):
    """The limits (and `auto`'s curve) are measured for the plan's thread counts: a count
    the plan refuses must never reach the machine measurement."""
    monkeypatch.setenv("CONVBENCH_MEASURE_MACHINE", "1")
    monkeypatch.setenv("CONVBENCH_MACHINE_DIR", str(tmp_path / "machine"))
    code, _, err = cli("tune", DATA / "net_suite.yaml", "--threads", "99",
                       "--records", tmp_path / "r.jsonl")
    assert code == 2 and "exceed" in err, err
    assert "measuring" not in err and not (tmp_path / "machine").exists()
