"""``convbench tune --transfer`` / ``--prior``: the ranking from other layers' round 0s
(convbench/tune/prior.py) and a real tune that measures only the prior's best."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from convbench.harness.options import RunOptions
from convbench.spec.descriptor import parse_descriptor
from convbench.tune import prior, records, schedule, session
from convbench.tune.session import Session, tune_suite
from tests.conftest import DATA

COLD = RunOptions(cache=("cold-weights",))
ONE_BY_ONE = parse_descriptor("mb1ic64ih56oc64oh56kh1ph0")


def _evidence(descriptor: str, times: dict[prior.Config, float]) -> prior.Evidence:
    best = min(times.values())
    return prior.Evidence(parse_descriptor(descriptor), {c: t / best for c, t in times.items()})


A = prior.Config.of("indirect", "nhwc", {"MR": 6, "NR": 16, "KC": 256})
B = prior.Config.of("indirect", "nhwc", {"MR": 4, "NR": 24, "KC": 256})
BLOCKED = prior.Config.of("nchwc", "nchwxc", {"ic_bn": 16, "oc_bn": 16, "reg_n": 8})


def test_the_prior_ranks_by_other_layers_and_explores_an_unseen_family():
    known = [_evidence("mb1ic64ih56oc256oh56kh1ph0", {A: 1.0, B: 2.0}),
             _evidence("mb1ic128ih28oc512oh28kh1ph0", {A: 1.1, B: 1.0})]
    unseen = prior.Config.of("spatial_pack", "nhwc", {"MR": 4})
    also_unseen = prior.Config.of("spatial_pack", "nhwc", {"MR": 8})
    ranked = prior.rank(ONE_BY_ONE, [B, unseen, A, also_unseen], known)
    order, exploring = ranked.order, ranked.exploring
    # A: the nearer layer (2 octaves from ONE_BY_ONE, the other 6) says A wins by 2x, the
    # far one says B by 10%; the unseen family's first candidate is tried as if it tied the best,
    # its second is not
    assert order == [1, 2, 0, 3]
    # only the unseen family's first is there to explore
    assert exploring == {1}
    # no evidence with this kernel size (3x3 layers only): no prior at all
    three = [_evidence("mb1ic64ih56oc64oh56kh3ph1", {A: 1.0, B: 2.0})]
    assert prior.rank(ONE_BY_ONE, [A, B], three) is None


def test_far_evidence_alone_is_no_prior_and_a_far_only_family_is_explored():
    """VGG-16's conv1_2 (64 -> 64) ranked from conv1_1 (3 -> 64) alone never measured
    Winograd: evidence more than 4 octaves away is no prior on its own."""
    wino = prior.Config.of("winograd4x4", "nhwc", {"tile_block": 16})
    conv1_1 = _evidence("mb1ic3ih224oc64oh224kh3ph1", {BLOCKED: 1.0, wino: 3.0})
    conv1_2 = parse_descriptor("mb1ic64ih224oc64oh224kh3ph1")
    assert prior.group_weight(conv1_2, conv1_1.problem) < prior.MIN_WEIGHT
    assert prior.rank(conv1_2, [BLOCKED, wino], [conv1_1]) is None
    # beside near evidence without Winograd, the far group's verdict on it does not count:
    # Winograd is explored (ranked as if it tied the best: after BLOCKED, by candidate
    # order), not ranked last
    near = _evidence("mb1ic64ih112oc64oh112kh3ph1", {BLOCKED: 1.0, A: 2.0})
    assert prior.rank(conv1_2, [A, BLOCKED, wino], [conv1_1, near]).order == [1, 2, 0]


def test_a_family_known_only_from_far_layers_gets_its_best_ranked_measured():
    """ResNet-50's res5b_branch2b (7 x 7) knew Winograd only from res4b_branch2b (14 x 14,
    4 octaves away), where F(2x2) lost 2.6x; at 7 x 7 it wins.  A thinly evidenced family is
    ranked from its evidence but its best-ranked candidate is measured all the same; a
    family with evidence within 2 octaves (here: the stride-2 layer of the same size,
    weighing a quarter) is not checked."""
    def wino(m: int, tile_block: int) -> prior.Config:
        return prior.Config.of(f"winograd{m}x{m}", "nhwc", {"tile_block": tile_block})

    blocked2 = prior.Config.of("nchwc", "nchwxc", {"ic_bn": 32, "oc_bn": 16, "reg_n": 8})
    res4b = _evidence("mb1ic256ih14oc256oh14kh3ph1",
                      {wino(4, 64): 1.0, wino(4, 256): 1.05, wino(2, 64): 2.6, BLOCKED: 1.5})
    res5a = _evidence("mb1ic512ih14oc512oh7kh3sh2ph1", {BLOCKED: 1.0, blocked2: 1.2})
    res5b = parse_descriptor("mb1ic512ih7oc512oh7kh3ph1")
    assert prior.group_weight(res5b, res4b.problem) < prior.SURE_WEIGHT
    assert prior.group_weight(res5b, res5a.problem) == prior.SURE_WEIGHT
    candidates = [BLOCKED, blocked2, wino(4, 64), wino(4, 256), wino(2, 256), wino(2, 64)]
    ranked = prior.rank(res5b, candidates, [res4b, res5a])
    assert ranked.order == [2, 3, 0, 1, 5, 4]
    # each Winograd family's best-ranked: F(2x2) at tile_block 64, the one res4b measured
    assert (ranked.unsure, ranked.exploring) == ({2, 5}, set())
    layouts = [("nchw16c", "nchw16c")] * 2 + [("nhwc", "nhwc")] * 4
    # the top two and F(2x2)'s best, then the blocked cover (no NCHW candidate exists)
    assert prior.layout_cover(ranked.order, layouts, 2, unsure=ranked.unsure) == [2, 3, 5, 0]
    assert prior.layout_cover(ranked.order, layouts, 2) == [2, 3, 0]
    # a thin family predicted far slower than the best is not checked: F(2x2) at 5x
    res4b_slower = _evidence(str(res4b.problem), {**res4b.slowdown, wino(2, 64): 5.0})
    assert prior.rank(res5b, candidates, [res4b_slower, res5a]).unsure == {2}


def test_a_thin_family_gets_each_categorical_value_measured_once():
    """MobileNet V1's conv_dw_12 (7 x 7 outputs, stride 2) knew the depthwise tiles only
    from conv_dw_6 (14 x 14, 3 octaves), whose round 0 had not measured tile 1 x 1; the
    tune picked 2 x 2 (Zen 5 host, 1 thread: 8.35 us), where 1 x 1 was the grid's best
    (6.68 us).  A tile is a name, not a number: the prior cannot say which other tile is
    next best, so where evidence is thin each value a knob of that kind takes is measured
    once, its best-ranked candidate; numeric knobs are graded by octaves and are not."""
    def dw(tile: str, order: str = "tiles", lanes: int = 16) -> prior.Config:
        return prior.Config.of("depthwise3x3", "nhwc",
                               {"tile": tile, "order": order, "lanes": lanes})

    conv_dw_6 = _evidence("g256mb1ic256ih28oc256oh14kh3sh2ph1",
                          {dw("2x2"): 1.0, dw("2x4"): 1.07, dw("1x2"): 1.10,
                           dw("2x2", "blocks"): 1.3})
    conv_dw_12 = parse_descriptor("g512mb1ic512ih14oc512oh7kh3sh2ph1")
    assert prior.group_weight(conv_dw_12, conv_dw_6.problem) < prior.SURE_WEIGHT
    candidates = [dw(t, o) for t in ("2x2", "2x4", "1x2", "1x1", "2x7")
                  for o in ("tiles", "blocks")] + [dw("2x2", lanes=8)]
    ranked = prior.rank(conv_dw_12, candidates, [conv_dw_6])
    checked = [candidates[i] for i in ranked.order if i in ranked.unsure]
    # the best-ranked, then the best-ranked with each tile or order not yet seen
    assert [(dict(c.params)["tile"], dict(c.params)["order"]) for c in checked] == [
        ("2x2", "tiles"), ("2x4", "tiles"), ("1x2", "tiles"), ("2x2", "blocks"),
        ("1x1", "tiles"), ("2x7", "tiles")]
    assert dw("2x2", lanes=8) not in checked        # a numeric knob: graded, not checked
    one_by_one = candidates.index(dw("1x1"))
    assert ranked.order.index(one_by_one) >= 3      # not in the top three ...
    layouts = [("nhwc", "nhwc")] * len(candidates)
    assert one_by_one in prior.layout_cover(ranked.order, layouts, 3,
                                            unsure=ranked.unsure)   # ... measured all the same
    # evidence within 2 octaves is no longer thin: the ranking alone decides
    conv_dw_13 = _evidence("g512mb1ic512ih14oc512oh7kh3sh2ph1", {dw("2x2"): 1.0,
                                                                  dw("1x1"): 1.5})
    assert prior.rank(conv_dw_12, candidates, [conv_dw_6, conv_dw_13]).unsure == set()


def test_a_slowdown_is_taken_net_of_the_padding_it_paid_there_and_pays_here():
    """MobileNet V2's expanded_conv_project (32 -> 16) pads nchwc's oc_bn = 32 to twice its
    outputs, and ran it 1.67x its best; block_1_expand (16 -> 96) pads neither block.  Net
    of the padding, oc_bn = 32 is the better block there, and ranks first here; counted as
    measured, it ranked last.  On a layer where it pads (oc = 48: 64 computed) it pays the
    padding again."""
    def blocks(ic_bn: int, oc_bn: int) -> prior.Config:
        return prior.Config.of("nchwc", "nchwxc", {"ic_bn": ic_bn, "oc_bn": oc_bn, "reg_n": 7})

    project = _evidence("mb1ic32ih112oc16oh112kh1ph0", {blocks(8, 16): 1.0, blocks(16, 32): 1.67})
    expand = parse_descriptor("mb1ic16ih112oc96oh112kh1ph0")
    candidates = [blocks(8, 16), blocks(16, 32)]
    assert session.work_of(blocks(16, 32), project.problem) == 2.0
    assert session.work_of(blocks(16, 32), expand) == 1.0
    assert session.work_of(prior.Config.of("indirect", "nhwc", {"MR": 6}), expand) == 1.0
    assert prior.rank(expand, candidates, [project]).order == [0, 1]
    assert prior.rank(expand, candidates, [project], session.work_of).order == [1, 0]
    padded = parse_descriptor("mb1ic16ih112oc48oh112kh1ph0")
    assert prior.rank(padded, candidates, [project], session.work_of).order == [0, 1]


def test_an_unmeasured_config_takes_its_nearest_neighbours_slowdown_plus_the_distance():
    near = prior.Config.of("nchwc", "nchwxc", {"ic_bn": 32, "oc_bn": 16, "reg_n": 8})
    far = prior.Config.of("nchwc", "nchwxc", {"ic_bn": 2, "oc_bn": 16, "reg_n": 8})
    assert prior.param_distance(near, BLOCKED) == pytest.approx(1.0)
    assert prior.param_distance(far, BLOCKED) == pytest.approx(3.0)
    assert prior.param_distance(A, B) == pytest.approx(math.log2(6 / 4) + math.log2(24 / 16))
    known = [_evidence("mb1ic64ih56oc256oh56kh1ph0", {BLOCKED: 1.0, A: 3.0})]
    # near: 1 octave off a winner (log2 slowdown 1) beats A measured 3x slower (1.58);
    # far: 3 octaves off loses to both
    assert prior.rank(ONE_BY_ONE, [far, A, near], known).order == [2, 1, 0]


def test_another_stride_counts_a_quarter():
    s1 = parse_descriptor("mb1ic64ih56oc64oh56kh3ph1")
    s2 = parse_descriptor("mb1ic64ih56oc64oh28kh3sh2ph1")
    assert prior.group_weight(s1, s1) == 1.0
    assert prior.group_weight(s1, s2) == pytest.approx(0.25 * 2.0 ** -2)
    assert prior.group_weight(s1, ONE_BY_ONE) == 0.0


def test_a_strided_1x1_layer_is_no_evidence_for_a_pointwise_one():
    """A pointwise layer (1 x 1, stride 1, unpadded) runs other code than a strided 1 x 1
    one (nchwc's plane tiles, not row tiles): neither ranks the other."""
    strided = parse_descriptor("mb1ic64ih112oc64oh56kh1sh2ph0")
    padded = parse_descriptor("mb1ic64ih56oc64oh58kh1ph1")
    assert prior.group_weight(ONE_BY_ONE, strided) == prior.group_weight(strided, ONE_BY_ONE) == 0
    assert prior.group_weight(ONE_BY_ONE, padded) == 0
    assert prior.group_weight(strided, padded) > 0     # neither is pointwise: same class
    assert prior.group_weight(ONE_BY_ONE, parse_descriptor("mb1ic64ih28oc64oh28kh1ph0")) > 0
    known = [_evidence("mb1ic64ih112oc64oh56kh1sh2ph0", {A: 1.0, B: 2.0})]
    assert prior.rank(ONE_BY_ONE, [A, B], known) is None


def test_evidence_is_round_0_of_groups_with_a_ranking():
    def record(descriptor, variant_mr, seconds, round_=0, status="ok"):
        return {"descriptor": descriptor, "threads": 1, "vector_width": "auto",
                "cache": "cold-weights", "host": "h", "round": round_, "status": status,
                "algorithm": "indirect", "layout": "nhwc", "params": {"MR": variant_mr},
                "median_s": seconds if status == "ok" else None}

    d1, d2 = "mb1ic64ih56oc256oh56kh1ph0", "mb1ic64ih56oc64oh56kh1ph0"
    found = prior.evidence([record(d1, 4, 2e-3), record(d1, 6, 1e-3),
                            record(d1, 6, 0.1e-3, round_=1),       # not round 0
                            record(d1, 8, 0.0, status="fail"),      # failed
                            record(d2, 4, 1e-3)])                   # one candidate only
    (only,) = found
    assert str(only.problem) == d1
    assert {dict(c.params)["MR"]: s for c, s in only.slowdown.items()} == {4: 2.0, 6: 1.0}


@pytest.mark.parametrize("n", [20, 46, 64, 88, 90, 300])
def test_the_field_keeps_the_whole_halving_within_a_fifth(n):
    m = prior.field_size(n)
    assert schedule.measurements_for(m) * prior.FRACTION <= n
    assert schedule.measurements_for(m + 1) * prior.FRACTION > n   # and takes all it may
    assert prior.field_size(4) == prior.MIN_FIELD and prior.field_size(2) == 2


def test_a_prior_from_another_layer_measures_only_its_best_ranked(tuned, tmp_path):
    """Another 1x1 layer tuned with --prior: round 0 measures the three candidates the
    prior ranks first (field_size(6)) and, where those lack NCHW or NHWC, the best-ranked
    of that layout; then halves them as any field."""
    from convbench.kernels import registry

    suite = tmp_path / "other.yaml"
    suite.write_text((DATA / "tune_suite.yaml").read_text().replace(
        "mb1ic16ih8oc8oh8kh1", "mb1ic16ih8oc16oh8kh1").replace("name: tune", "name: other"))
    path = tmp_path / "transfer.jsonl"
    outcome = tune_suite(suite, COLD, path, quiet=True, prior_paths=[tuned])
    (group,) = outcome.groups
    found = records.read(path)
    first = [r for r in found if r["round"] == 0]
    # the prior's top three and the cover, ranked from the tuned layer's records alone
    known = prior.evidence(records.read(tuned))
    tuned_first = [r for r in records.read(tuned) if r["round"] == 0]
    configs = [prior.Config.of(r["algorithm"], r["layout"], r["params"]) for r in tuned_first]
    layouts = [registry.get(r["algorithm"]).activation_layouts(r["layout"], r["params"])
               for r in tuned_first]
    ranked = prior.rank(parse_descriptor(found[0]["descriptor"]), configs, known)
    field = prior.layout_cover(ranked.order, layouts, 3, ranked.exploring, (), ranked.unsure)
    assert {prior.Config.of(r["algorithm"], r["layout"], r["params"]) for r in first} == \
        {configs[i] for i in field}
    assert {layouts[i] for i in field} >= {("nchw", "nchw"), ("nhwc", "nhwc")}
    assert (group.candidates, group.field) == (6, len(field))
    assert f"the prior's best {len(field)} measured" in group.line()
    # the cover adds up to two to the prior's three (how many, the tuned layer's noisy
    # ranking decides), so the final round is one or two of them
    measured, final = schedule.measurements_for(len(field)), schedule.sizes(len(field))[-1]
    assert group.measured == measured == len(found)
    assert [r["final"] for r in found] == [False] * (measured - final) + [True] * final


def test_the_cover_adds_the_best_ranked_of_each_missing_layout():
    blocked, other_block = ("nchw8c", "nchw8c"), ("nchw16c", "nchw16c")
    layouts = [("nchw8c", "nchw16c"), blocked, ("nhwc", "nhwc"), other_block,
               ("nchw", "nchw"), ("nhwc", "nhwc")]
    # ranked 0, 1 first: the top reads nchw8c and writes nchw16c, so NCHW16c's best (3)
    # comes in beside NCHW8c's (1), for a one-block plan of either; NHWC's best is 2,
    # NCHW's 4; 5 not
    assert prior.layout_cover([0, 1, 3, 2, 5, 4], layouts, 2) == [0, 1, 3, 2, 4]
    # a top without a blocked layout gets one blocked layout's best, not every block's
    assert prior.layout_cover([2, 3, 1, 4], layouts, 1) == [2, 3, 4]
    # a top that covers every kind is the whole field
    assert prior.layout_cover([1, 2, 4, 0, 3, 5], layouts, 3) == [1, 2, 4]
    # a mixed in/out layout covers nothing: its own kind's best still comes in
    assert prior.layout_cover([0, 5, 4, 3], layouts, 1) == [0, 5, 4, 3]
    # an unseen family's first (5, NHWC) is measured, but stands for no layout: NHWC's best
    # ranked candidate with evidence (2) still comes in; without the exploring set it would
    # not (MobileNet V2's block_1_depthwise kept direct/nhwc, 9 ms, as its only NHWC)
    assert prior.layout_cover([5, 1, 4, 2, 0, 3], layouts, 3) == [5, 1, 4]
    assert prior.layout_cover([5, 1, 4, 2, 0, 3], layouts, 3, exploring={5}) == [5, 1, 4, 2]
    # the blocks the network's other tuned layers use come in too: a top in NCHW8c alone
    # (1) gets NCHW16c's best (3) when a neighbour runs nchw16c, so the one-block plan of
    # either block can be made (NCHW, NHWC layouts among the neighbours add nothing new)
    assert prior.layout_cover([1, 2, 4, 3, 0], layouts, 3) == [1, 2, 4]
    assert prior.layout_cover([1, 2, 4, 3, 0], layouts, 3,
                              neighbours={"nchw16c", "nhwc"}) == [1, 2, 4, 3]


def test_the_layers_own_records_are_no_prior(tuned, tmp_path):
    """--prior with the same layer's records: they are the answer, not evidence; the
    layer gets the full halving."""
    path = tmp_path / "again.jsonl"
    outcome = tune_suite(DATA / "tune_suite.yaml", COLD, path, quiet=True,
                         prior_paths=[tuned])
    (group,) = outcome.groups
    assert (group.field, group.measured) == (None, 8)


def test_transfer_is_refused_with_exhaustive(cli, tuned):
    code, _out, err = cli("tune", DATA / "tune_suite.yaml", "--exhaustive", "--prior", tuned)
    assert code == 2 and "not with --transfer" in err


def _record(layer: str, algorithm: str, layout: str, params: dict, median_s: float,
            final: bool = True) -> dict:
    return {"descriptor": f"d-{layer}", "threads": 1, "vector_width": "auto",
            "cache": "cold-weights", "host": "h", "layer": layer, "round": 1,
            "variant": "/".join([algorithm, layout, *(f"{k}={v}" for k, v in params.items())]),
            "algorithm": algorithm, "layout": layout, "params": params, "final": final,
            "status": records.OK, "median_s": median_s}


def test_the_neighbours_are_the_layouts_of_the_other_finished_layers_tuned_variants():
    """Each finished group's tuned variant (its fastest of the furthest round) gives the
    layouts it reads and writes; unfinished groups and groups the filter drops give none."""
    blocks = {"ic_bn": 8, "oc_bn": 16, "reg_n": 4, "unroll_ker": False}
    known = [_record("a", "nchwc", "nchwxc", blocks, 1e-3),
             _record("a", "direct", "nchw", {}, 2e-3),
             _record("b", "direct", "nchw", {}, 1e-3, final=False),
             _record("c", "im2col", "nhwc", {"gemm": "own"}, 1e-3)]
    session = SimpleNamespace(known=known)
    every = Session.neighbour_layouts(session, lambda r: True)
    assert every == {"nchw8c", "nchw16c", "nhwc"}
    assert Session.neighbour_layouts(session, lambda r: r["layer"] != "a") == {"nhwc"}
