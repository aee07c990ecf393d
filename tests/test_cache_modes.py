"""Cache modes: warm, cold-weights and cold are a sweep axis, part of the case's identity,
and the eviction really moves the caches (simulated misses) without page faults."""

from __future__ import annotations

import math
import os
import shutil
from types import SimpleNamespace

import pandas as pd
import pytest

from convbench.errors import SuiteError
from convbench.harness import coldcache
from convbench.host import caches
from convbench.results.load import load_results
from convbench.spec.suite import load_suite
from tests.conftest import DATA, convbench_process

TINY = DATA / "tiny_suite.yaml"
NET = DATA / "net_suite.yaml"     # a tiny network: 21 KiB of conv weights per pass
ONE_CASE = ("--only", "layer=conv1x1,variant=direct/nhwc")


def test_suite_cache_axis_is_validated(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(TINY.read_text().replace("vector_widths: [auto]",
                                             "vector_widths: [auto]\n  cache: [warm, cold]"))
    assert load_suite(good).sweep.cache == ("warm", "cold")
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("cache: [warm, cold]", "cache: [tepid]"))
    with pytest.raises(SuiteError, match=r"sweep\.cache.*warm, cold-weights, cold.*tepid"):
        load_suite(bad)


def test_pile_covers_every_cache_level_of_every_thread():
    levels = [c for c in caches() if c.kind in ("Unified", "Data")]
    if not levels:
        pytest.skip("no cache sizes in sysfs here")
    top = max(c.level for c in levels)
    llc = max(c.size_bytes for c in levels if c.level == top)
    assert coldcache.pile_bytes(1) >= 2 * llc
    assert coldcache.pile_bytes(2) > coldcache.pile_bytes(1)
    assert coldcache.pile_bytes(2, override=1 << 24) == 1 << 24


def test_a_networks_cold_weights_pile_is_its_weights_per_pass():
    """cold-weights in a suite that names a network streams that network's conv weights
    (what a pass streams between two runs of a layer) where they are fewer than the full
    pile; cold always streams the full pile; --cold-bytes overrides both."""
    full = coldcache.pile_bytes(1)
    assert coldcache.pile_bytes(1, pass_bytes=3 << 20) == 3 << 20
    assert coldcache.pile_bytes(1, pass_bytes=full + 1) == full
    assert coldcache.pile_bytes(1, override=5 << 20, pass_bytes=3 << 20) == 5 << 20
    assert coldcache.Evictor("cold-weights", 1, pass_bytes=3 << 20).nbytes == 3 << 20
    assert coldcache.Evictor("cold", 1, pass_bytes=3 << 20).nbytes == full
    assert load_suite(TINY).pass_weight_bytes is None     # no network: the full pile


def test_a_network_suites_workers_evict_its_weights_per_pass(tmp_path):
    net = load_suite(NET)
    out = tmp_path / "net"
    run = convbench_process("run", NET, "--only", "layer=c1x1,variant=direct/nchw",
                            "--cache", "cold-weights", "-q", "-o", out)
    assert run.returncode == 0, run.stderr
    workers = load_results(out).environment["workers"]
    piles = [w["cold_pile_bytes"] for w in workers.values() if "cold_pile_bytes" in w]
    assert piles == [net.pass_weight_bytes] and 0 < net.pass_weight_bytes < 1 << 20


def test_cold_cases_are_single_calls_and_never_paired_with_warm(tmp_path, cli):
    both, cold = tmp_path / "both", tmp_path / "cold"
    for out, modes in ((both, "warm,cold-weights"), (cold, "cold")):
        run = convbench_process("run", TINY, *ONE_CASE, "--cache", modes, "--cold-bytes",
                                str(8 << 20), "-q", "-o", out)
        assert run.returncode == 0, run.stderr
    table = load_results(both).table.set_index("cache")
    assert sorted(table.index) == ["cold-weights", "warm"]
    assert (table["status"] == "ok").all()
    assert table.loc["cold-weights", "loops"] == 1 and table.loc["warm", "loops"] > 1
    assert table.loc["cold-weights", "case_id"].endswith("|cold-weights")
    assert 0 < table.loc["cold-weights", "timer_resolution_s"] < 1e-5
    workers = load_results(both).environment["workers"]
    assert workers["t1/vauto/cold-weights"]["cold_pile_bytes"] == 8 << 20
    assert "cold_pile_bytes" not in workers["t1/vauto"]
    # warm is compared with warm and cold with cold; a warm run and a cold run share nothing
    code, out, err = cli("compare", both, both, "--format", "json")
    assert code == 0, err
    code, _, err = cli("compare", both, cold)
    assert code == 2 and "no variant in common" in err


DEPTHWISE = """name: depthwise
description: one small depthwise layer; its weights (1.2 KiB) fit every simulated cache
layers:
  - {name: dw, shape: mb1g32ic32ih8oc32oh8kh3ph1, count: 1}
sweep: {timing: {processes: 1}}   # the counts are the point here, not the times
"""


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_cold_modes_miss_more_than_warm_in_the_simulated_caches(tmp_path):
    """The mechanism itself, under callgrind's cache simulation (the eviction runs simulated
    but uncounted): after it the weights miss the last level, and in `cold` the
    activations too.  Counts are deterministic, so the comparisons are exact.

    D1 misses are not asserted: one Python call into a numba kernel touches ~80 KiB of the
    interpreter's own data (~1300 D1 misses per call here), more than D1 holds, so even a
    warm call finds little of its own in D1 and the D1 counts of the modes differed by
    -6..+114 misses between environments (checkout path, preceding tests)."""
    suite = tmp_path / "dw.yaml"
    suite.write_text(DEPTHWISE)
    out = tmp_path / "sim"
    run = convbench_process("run", suite, "--only",
                            "variant=depthwise3x3/nhwc/order=tiles/tile=2x4",
                            "--cache", "warm,cold-weights,cold", "--counters", "sim",
                            "--values", "3", "--min-time", "0.001", "-q", "-o", out)
    assert run.returncode == 0, run.stderr
    table = load_results(out).table.set_index("cache")
    d1 = table["sim_d1mr"] + table["sim_d1mw"]
    ll = table["sim_dlmr"] + table["sim_dlmw"]
    weight_lines = 32 * 9 * 4 // 64
    assert ll["cold-weights"] >= ll["warm"] + weight_lines, (ll.to_dict(), d1.to_dict())
    assert ll["cold"] > ll["cold-weights"], ll.to_dict()


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
def test_no_page_fault_lands_in_a_cold_call(tmp_path):
    out = tmp_path / "perf"
    run = convbench_process("run", TINY, *ONE_CASE, "--cache", "cold", "--counters", "perf",
                            "--cold-bytes", str(64 << 20), "-q", "-o", out,
                            env={**os.environ})
    assert run.returncode == 0, run.stderr
    row = load_results(out).table.iloc[0]
    faults = row.get("ctr_page_faults", math.nan)
    if pd.isna(faults):
        pytest.skip(f"perf cannot count page faults here: {row.get('ctr_page_faults_reason')}")
    assert faults < 0.5      # per call: the pile and the buffers were touched beforehand


def test_a_cold_weights_call_follows_its_twin_on_the_calls_input(monkeypatch):
    """cold-weights: after the eviction the case's twin -- its kernel built again on its own
    copy of the weights -- computes the layer from the call's input into the call's output
    (so the input, the output buffer, code and thread pool are as a pass leaves them -- it
    hands a layer the buffer its previous layer read; the weights not); cold: the eviction
    and nothing of the layer's."""
    import numpy as np

    from convbench.harness import worker
    from convbench.harness.inputs import make_inputs
    from convbench.harness.verify import verify
    from convbench.kernels import registry
    from convbench.kernels.base import Variant
    from convbench.kernels.reference import Reference
    from convbench.spec.problem import ConvProblem

    problem = ConvProblem.make(ic=8, ih=6, oc=8, oh=6, kh=1)
    x, w = make_inputs(problem, 0)
    variant = Variant.of("direct", "nchw")
    _, ex = verify(problem, variant, Reference(problem, x, w), x, w)
    alive = [("case", ex, {})]
    built = []
    real_get = registry.get

    class Counting:
        def __init__(self, algorithm):
            self.algorithm = algorithm

        def build(self, problem, weights, layout, params):
            built.append(weights)
            twin = self.algorithm.build(problem, weights, layout, params)
            return SimpleNamespace(run=lambda x, y: (wrote.append((x, y)), twin.run(x, y)))

    monkeypatch.setattr(registry, "get", lambda name: Counting(real_get(name)))
    events = []
    wrote: list = []   # (input, output) of each twin call
    want = ex.y.copy()   # the layer, as verify computed it
    for mode in ("cold-weights", "cold"):
        evictor = coldcache.Evictor(mode, 1, override=1 << 20)
        monkeypatch.setattr(evictor, "evict", lambda mode=mode: events.append(mode))
        entered: list = []
        channel = SimpleNamespace(enter=lambda *where, seen=entered: seen.append(where))
        before = worker._befores(evictor, alive, {"case": variant}, problem, w,
                                 channel)["case"]
        ex.y[...] = 0.0
        before(ex.x, ex.y)
        before(ex.x, ex.y)
        # cold-weights: the twin wrote the layer into the call's output; cold: untouched
        assert np.array_equal(ex.y, want if mode == "cold-weights" else 0 * want), mode
        # a twin's build is entered as its case's: a crash in it is charged to the case
        assert entered == ([("case", "prepare its twin")] if mode == "cold-weights" else [])
    assert events == ["cold-weights"] * 2 + ["cold"] * 2
    (twin_weights,) = built   # one twin, for cold-weights only, on weights of its own
    assert np.array_equal(twin_weights, w) and not np.shares_memory(twin_weights, w)
    # it ran twice, on the call's input, into the call's output
    assert len(wrote) == 2 and all(x is ex.x and y is ex.y for x, y in wrote)
