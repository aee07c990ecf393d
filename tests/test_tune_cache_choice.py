"""``convbench tune --cache auto``: a network tuned cold-weights at 1 thread; at more threads
warm where its conv weights fit in what the caches serve (the measured bandwidth curve),
cold-weights where they do not (convbench/tune/cache_choice.py)."""

from __future__ import annotations

import pytest

from convbench.machine import store
from convbench.spec.suite import load_suite
from convbench.tune import cache_choice, records
from tests.conftest import DATA, ROOT

MIB = 1 << 20
# the AMD EPYC Zen 3 host's 1-thread triad curve (quick profile), bytes per thread and GB/s
ZEN3_1T = [[1 * MIB, 73.2], [4 * MIB, 68.2], [10 * MIB, 62.8], [16 * MIB, 43.7],
           [25 * MIB, 26.1], [64 * MIB, 17.0], [161 * MIB, 15.5]]
NETWORKS = ("mobilenet_v1", "mobilenet_v2", "resnet18", "resnet50", "vgg16")


def _limits(curves: dict[int, list]) -> dict:
    return {"bandwidth_curve": {str(t): c for t, c in curves.items()}}


def test_the_caches_serve_the_largest_working_set_at_twice_dram_or_more():
    assert cache_choice.cached_bytes(ZEN3_1T, 1) == 16 * MIB     # 43.7 >= 31; 26.1 < 31
    assert cache_choice.cached_bytes(ZEN3_1T, 2) == 32 * MIB     # per thread, times threads
    flat = [[1 * MIB, 20.0], [64 * MIB, 15.0]]                   # no cache above DRAM speed
    assert cache_choice.cached_bytes(flat, 1) == 0
    assert cache_choice.cached_bytes([[1 * MIB, 70.0]], 1) is None   # no DRAM end


@pytest.mark.parametrize("name", NETWORKS)
def test_weight_bytes_count_every_conv_of_the_network_order(name):
    # the layers' counts against the graph's conv ops: two ways to one pass's weights
    suite = load_suite(ROOT / "suites" / f"{name}.yaml")
    by_graph = sum(suite.graph.problem(op).weight_bytes for op in suite.graph.convs)
    assert suite.pass_weight_bytes == by_graph > 0


def test_small_networks_tune_warm_large_ones_cold_weights_at_two_threads():
    # the Zen 3 host's 1-thread curve stood in for 2 threads: 2 x 16 MiB served
    limits = _limits({2: ZEN3_1T})
    chosen = {name: cache_choice.choose(load_suite(ROOT / "suites" / f"{name}.yaml"), 2,
                                        limits)
              for name in NETWORKS}
    # 12.2 and 8.4 MiB of conv weights fit in 32 MiB; 42.6, 89.5 and 56.1 MiB do not
    assert {n: c.mode for n, c in chosen.items()} == {
        "mobilenet_v1": "warm", "mobilenet_v2": "warm", "resnet18": "cold-weights",
        "resnet50": "cold-weights", "vgg16": "cold-weights"}
    assert "8.4 MiB" in chosen["mobilenet_v2"].reason
    assert "32.0 MiB" in chosen["resnet50"].reason


def test_every_network_tunes_cold_weights_at_one_thread():
    """At 1 thread cold-weights, its pile a network's weights per pass, predicted the pass
    best whether or not the weights fit (the module docstring): the curve is not asked."""
    for name in NETWORKS:
        choice = cache_choice.choose(load_suite(ROOT / "suites" / f"{name}.yaml"), 1,
                                     _limits({1: ZEN3_1T}))
        assert choice.mode == "cold-weights" and "per pass" in choice.reason, choice


def test_no_curve_or_no_network_means_cold_weights_and_says_why():
    net = load_suite(DATA / "net_suite.yaml")
    no_curve = cache_choice.choose(net, 2, _limits({1: ZEN3_1T}))
    assert no_curve.mode == "cold-weights" and "no measured bandwidth curve" in no_curve.reason
    assert cache_choice.choose(net, 1, None).mode == "cold-weights"
    layers_only = cache_choice.choose(load_suite(DATA / "tune_suite.yaml"), 1,
                                      _limits({1: ZEN3_1T}))
    assert layers_only.mode == "cold-weights" and "names no network" in layers_only.reason


def test_auto_beside_another_mode_is_refused(cli, tmp_path):
    code, _, err = cli("tune", DATA / "net_suite.yaml", "--cache", "auto,warm",
                       "--records", tmp_path / "r.jsonl")
    assert code == 2 and "auto chooses one mode per thread count" in err
    assert not (tmp_path / "r.jsonl").exists()


def test_a_real_auto_tune_of_a_small_network_at_two_threads_is_warm(cli, tmp_path,
                                                                    monkeypatch):
    # a stored curve (the format `convbench machine` writes) whose caches hold the tiny
    # network's 21 KiB of weights; no peak figures, so the compile width is the default one
    monkeypatch.setenv("CONVBENCH_MACHINE_DIR", str(tmp_path / "machine"))
    identity = store.host_identity()
    store.save({"format_version": store.FORMAT_VERSION, "host": identity,
                "bandwidth_curve": {"2": [[16 << 10, 100.0], [1 * MIB, 80.0],
                                          [64 * MIB, 15.0]]}})
    path = tmp_path / "records.jsonl"
    code, _, err = cli("tune", DATA / "net_suite.yaml", "--records", path, "--threads", "2",
                       "--only", "layer=c1x1,algorithm=direct")
    assert code == 0, err
    assert "cache mode at 2 thread(s): warm" in err and "fit in the 2.0 MiB" in err
    written = records.read(path)
    assert written and {r["cache"] for r in written} == {"warm"}


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
