"""``convbench tune --confirm PLAN``: the conv variants a plan and its alternatives run whose
records come from short halving rounds are measured for real at the suite's timing and
recorded as their group's final round; then nothing is left to confirm.

Records for tests/data/net_suite.yaml are written by hand as a halving leaves them (each
layer's winner in a final round 1, the other layouts' best only in round 0), with the
descriptors and host of real groups, so the confirming run measures real kernels.  With
them it measures their neighbours one tile, order or bool away, measured before or not."""

from __future__ import annotations

import itertools
import json

import pandas as pd

from convbench.harness.options import RunOptions, make_plan
from convbench.kernels.base import Variant
from convbench.spec.suite import load_suite
from convbench.tune import confirm, records
from convbench.tune.apply import this_host
from tests.conftest import DATA

SUITE = DATA / "net_suite.yaml"
BLOCKED = {"ic_bn": 16, "oc_bn": 8, "reg_n": 4, "unroll_ker": False}


def _recorder(suite_path):
    """A function writing one hand-made record of ``suite_path``'s real layer groups."""
    suite = load_suite(suite_path)
    plan = make_plan(suite, RunOptions(cache=("warm",)))
    descriptor = {c.layer: str(c.problem) for c in plan.cases}
    host = this_host()

    def record(layer, algorithm, layout, params, seconds, round_, final):
        return {"format_version": records.FORMAT_VERSION, "convbench_version": "test",
                "host": host, "suite": suite.name, "layer": layer,
                "descriptor": descriptor[layer],
                "variant": Variant.of(algorithm, layout, params).id, "algorithm": algorithm,
                "layout": layout, "params": params, "threads": 1, "vector_width": "auto",
                "cache": "warm", "round": round_, "final": final, "min_time": 1e-4,
                "n_values": 3, "median_s": seconds, "ci_low_s": seconds, "ci_high_s": seconds,
                "ref_ratio": seconds / 1e-3, "status": "ok", "reason": "",
                "kernel_version": "", "time": "2026-11-29T00:00:00Z"}
    return record


def _halving_records(path) -> None:
    record = _recorder(SUITE)
    lines = []
    for layer in ("c3x3", "c1x1", "c3x3s"):
        # round 0 only: the other layouts' best, dropped by the halving
        lines += [record(layer, "direct", "nchw", {}, 50e-6, 0, False),
                  record(layer, "direct", "nhwc", {}, 40e-6, 0, False)]
        block = BLOCKED if layer != "c3x3s" else {**BLOCKED, "ic_bn": 8}
        lines += [record(layer, "nchwc", "nchwxc", block, 6e-6, 0, False),
                  record(layer, "nchwc", "nchwxc", block, 5e-6, 1, True)]   # the winner
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))


def test_confirm_measures_the_plans_short_round_variants_once(tmp_path, cli):
    path = tmp_path / "records.jsonl"
    _halving_records(path)
    pd.DataFrame([{"mb": 1, "c": 16, "h": 8, "w": 8, "from_layout": a, "to_layout": b,
                   "threads": 1, "median_s": 1e-6, "status": "ok"}
                  for a, b in itertools.permutations(("nchw", "nhwc", "nchw8c", "nchw16c"), 2)]
                 ).to_parquet(tmp_path / "transforms.parquet")
    plan_path = tmp_path / "plan.json"
    code, said, err = cli("plan", SUITE, "--records", path, "--transforms", tmp_path,
                          "-o", plan_path)
    assert code == 0, err
    before = records.read(path)
    threads, cache, wanted = confirm.plan_variants(plan_path)
    assert (threads, cache) == (1, "warm")
    short = {(layer, v) for layer, variants in wanted.items()
             for v in confirm.unconfirmed(before, records.GroupKey.of(
                 next(r for r in before if r["layer"] == layer)), variants)}
    # all-NCHW and all-NHWC run variants the halving dropped after round 0
    assert {("c3x3", "direct/nchw"), ("c3x3", "direct/nhwc")} <= short
    assert f"{len(short)} conv cost(s) of this plan and its alternatives come from short" in said

    code, out, err = cli("tune", SUITE, "--records", path, "--confirm", plan_path, "-q")
    assert code == 0, err
    added = records.read(path)[len(before):]
    assert {(r["layer"], r["variant"]) for r in added} == short
    assert len(added) == len(short)            # each measured once
    for r in added:   # at the suite's timing, recorded as the group's final round
        assert r["status"] == "ok" and r["final"] and r["round"] == 1, r
        assert r["min_time"] == load_suite(SUITE).sweep.timing.min_time
        assert r["median_s"] != 50e-6 and r["median_s"] != 40e-6   # measured, not copied
    # every conv cost the plan compares is now a final-round one, so `plan` reads them
    after = records.read(path)
    for layer, variants in wanted.items():
        key = records.GroupKey.of(next(r for r in after if r["layer"] == layer))
        assert not confirm.unconfirmed(after, key, variants)
    code, said, err = cli("plan", SUITE, "--records", path, "--transforms", tmp_path)
    assert code == 0 and "short tuning rounds" not in said, said
    code, out, err = cli("tune", SUITE, "--records", path, "--confirm", plan_path, "-q")
    assert code == 0 and "nothing to confirm" in err + out
    assert len(records.read(path)) == len(after)


def test_confirm_needs_the_plans_records(tmp_path, cli):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"threads": 1, "cache": "warm", "ops": []}))
    code, _, err = cli("tune", SUITE, "--confirm", plan, "-q")
    assert code == 2 and "give them with --records" in err
    code, _, err = cli("tune", SUITE, "--records", tmp_path / "r.jsonl", "--confirm", plan,
                       "--exhaustive")
    assert code == 2 and "not with --exhaustive" in err
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    (tmp_path / "r.jsonl").write_text("")
    code, _, err = cli("tune", SUITE, "--records", tmp_path / "r.jsonl", "--confirm", bad)
    assert code == 2 and "not a plan of convbench plan" in err


DEPTHWISE = """\
name: dw
description: One small depthwise layer, three tiles in two layouts (shapes made up).
layers:
  - {name: dw, shape: g16mb1ic16ih8oc16oh8kh3ph1, count: 1}
sweep:
  algorithms: [depthwise3x3]
  layouts: [nhwc, nchw16c]
  threads: [1]
  params: {depthwise3x3: {tile: [1x1, 1x2, 2x2], order: [tiles]}}
  timing: {min_time: 0.001, values: 3, warmups: 1, timeout: 120, processes: 1}
"""


def test_confirm_measures_the_other_tiles_of_a_plans_layout(tmp_path, cli):
    suite = tmp_path / "dw.yaml"
    suite.write_text(DEPTHWISE)
    record = _recorder(suite)

    def tile(t):
        return {"order": "tiles", "tile": t}

    # NHWC 2 x 2 won the halving; NCHW16c was covered by its 1 x 1 tile alone (round 0),
    # its 2 x 2 reached round 0 only too, 1 x 2 was never measured
    path = tmp_path / "records.jsonl"
    lines = [record("dw", "depthwise3x3", "nhwc", tile("1x1"), 9e-6, 0, False),
             record("dw", "depthwise3x3", "nhwc", tile("2x2"), 5e-6, 0, False),
             record("dw", "depthwise3x3", "nchw16c", tile("1x1"), 6e-6, 0, False),
             record("dw", "depthwise3x3", "nchw16c", tile("2x2"), 7e-6, 0, False),
             record("dw", "depthwise3x3", "nhwc", tile("2x2"), 5e-6, 1, True)]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    plan = tmp_path / "plan.json"   # a plan running the layer in NCHW16c, 1 x 1
    plan.write_text(json.dumps({"threads": 1, "cache": "warm", "ops": [
        {"op": "dw", "kind": "conv", "layer": "dw",
         "variant": "depthwise3x3/nchw16c/order=tiles/tile=1x1"}]}))

    code, out, err = cli("tune", suite, "--records", path, "--confirm", plan, "-q")
    assert code == 0, err
    added = records.read(path)[len(lines):]
    # the plan's variant and its layout's other tiles; not NHWC's (another layout), not
    # a variant with a final record
    assert sorted(r["variant"] for r in added) == [
        f"depthwise3x3/nchw16c/order=tiles/tile={t}" for t in ("1x1", "1x2", "2x2")]
    assert all(r["status"] == "ok" and r["final"] and r["round"] == 1 for r in added), added
    code, out, err = cli("tune", suite, "--records", path, "--confirm", plan, "-q")
    assert code == 0 and "nothing to confirm" in err + out


def test_neighbours_differ_in_one_knob_the_prior_cannot_grade():
    def v(text):
        return Variant.parse(text)

    space = [v("depthwise3x3/nchw16c/order=tiles/tile=2x4"),
             v("depthwise3x3/nchw32c/order=tiles/tile=2x4"),          # another layout
             v("depthwise3x3/nhwc/order=blocks/tile=1x1"),
             v("depthwise3x3/nhwc/order=blocks/tile=2x4"),            # two knobs away
             v("nchwc/nchwxc/ic_bn=16/oc_bn=16/reg_n=8/unroll_ker=True"),
             v("nchwc/nchwxc/ic_bn=16/oc_bn=32/reg_n=8/unroll_ker=False"),   # numeric
             v("nchwc/nchwxc/ic_bn=16/oc_blocks=2/oc_bn=16/reg_n=8/unroll_ker=False")]
    plan = ["depthwise3x3/nchw16c/order=tiles/tile=1x1", "depthwise3x3/nhwc/order=tiles/tile=1x1",
            "nchwc/nchwxc/ic_bn=16/oc_bn=16/reg_n=8/unroll_ker=False"]
    assert confirm.neighbours(plan, space) == {
        "depthwise3x3/nchw16c/order=tiles/tile=2x4", "depthwise3x3/nhwc/order=blocks/tile=1x1",
        "nchwc/nchwxc/ic_bn=16/oc_bn=16/reg_n=8/unroll_ker=True"}
