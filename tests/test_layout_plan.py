"""The global layout plan: the dynamic program against brute force on small random
networks, and the alternatives it is compared with."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convbench.kernels.transforms import same_memory
from convbench.network import executor
from convbench.plan import layouts as plan
from convbench.plan.layouts import Candidate


@dataclass(frozen=True)
class Op:
    """Stand-in for convbench.spec.network.Op (same attributes)."""

    name: str
    kind: str
    inputs: tuple[str, ...]
    layer: str | None = None


@dataclass(frozen=True)
class Net:
    """Stand-in for convbench.spec.network.Network: what the planner reads."""

    ops: tuple[Op, ...]
    shapes: dict[str, tuple[int, int, int, int]]

    def shape(self, tensor: str) -> tuple[int, int, int, int]:
        return self.shapes[tensor]

    def consumers(self, tensor: str) -> tuple[Op, ...]:
        return tuple(op for op in self.ops if tensor in op.inputs)

    def problem(self, op: Op) -> SimpleNamespace:
        return SimpleNamespace(g=1)   # what Algorithm.fused_ops reads of a layer

    @property
    def output(self) -> str:
        return self.ops[-1].name


LAYOUTS = ("nchw", "nhwc", "nchw8c", "nchw16c")


@st.composite
def networks(draw) -> tuple[Net, dict[str, list[Candidate]], dict]:
    """Chains of convs and relus with a residual add or two (with or without a
    projection conv), shared layers, 2-4 layouts, random costs, candidates that fuse a
    relu, a relu and an add, or nothing."""
    layouts = LAYOUTS[:draw(st.integers(2, 4))]
    layer_names = [f"L{i}" for i in range(draw(st.integers(1, 3)))]
    ops: list[Op] = []
    shapes = {"input": (1, draw(st.integers(1, 40)), 4, 4)}
    current = "input"

    def add(kind: str, inputs: tuple[str, ...], layer: str | None = None) -> str:
        name = f"op{len(ops)}"
        ops.append(Op(name, kind, inputs, layer))
        shapes[name] = (1, draw(st.integers(1, 40)), 4, 4)
        return name

    blocks = draw(st.lists(st.sampled_from(["conv", "relu", "residual", "projection"]),
                           min_size=1, max_size=4))
    for block in blocks:
        if block in ("conv", "relu"):
            layer = draw(st.sampled_from(layer_names)) if block == "conv" else None
            current = add(block, (current,), layer)
            continue
        skip = current
        main = add("conv", (current,), draw(st.sampled_from(layer_names)))
        if block == "projection":
            skip = add("conv", (skip,), draw(st.sampled_from(layer_names)))
        current = add("add", (main, skip))
    if sum(op.kind == "conv" for op in ops) > 6:   # brute force stays small
        ops = ops[:1]
    net = Net(tuple(ops), shapes)
    seconds = st.integers(1, 100).map(float)
    epilogues = st.sampled_from([frozenset(), frozenset({"relu"}), frozenset({"relu", "add"})])
    costs = {name: [Candidate(f"{name}/v{i}", draw(st.sampled_from(layouts)),
                              draw(st.sampled_from(layouts)), draw(seconds), draw(epilogues))
                    for i in range(draw(st.integers(1, 3)))]
             for name in layer_names}
    per_pair = {(a, b): draw(st.integers(0, 60)) / 10 for a in layouts for b in layouts
                if a != b}
    # glue seconds per (op, layout): the layout a relu or add runs in changes its cost
    per_glue = {(op.name, layout): draw(st.integers(0, 30)) / 10
                for op in net.ops if op.kind != "conv" for layout in LAYOUTS}
    return net, costs, per_pair, per_glue


def glue_cost(per_glue: dict):
    def seconds(op, layout: str) -> float:
        return per_glue[op.name, layout]
    return seconds


def transform_cost(per_pair: dict):
    def seconds(shape, src, dst) -> float:
        return per_pair[src, dst] * shape[1] / 8
    return seconds


def brute_force(net: Net, costs, transform_seconds, glue_seconds=lambda op, layout: 0.0,
                glue_layout: str | None = None, accept=lambda chosen: True,
                sites: dict[str, str] | None = None) -> float:
    """Every candidate of every conv and every layout choice of every add, simulated
    (``glue_layout``: every glue op runs in it instead; ``accept``: only the choices of
    candidates per conv op it accepts; ``sites``: glue ops free where the op before them
    -- a conv, or an add its conv ran -- can still fuse their kind and wrote the layout
    they run in)."""
    sites = sites or {}
    convs = [op for op in net.ops if op.kind == "conv"]
    adds = [op for op in net.ops if op.kind == "add"]
    best = float("inf")
    for picks in itertools.product(*(costs[op.layer] for op in convs)):
        chosen = dict(zip((op.name for op in convs), picks, strict=True))
        if not accept(chosen):
            continue
        for add_sides in itertools.product(*([0, 1] for _ in adds)):
            side = dict(zip((op.name for op in adds), add_sides, strict=True))
            layout = {"input": "nchw"}
            total = 0.0

            def move(tensor: str, dst: str, layout: dict[str, str] = layout) -> float:
                src, shape = layout[tensor], net.shape(tensor)
                free = src == dst or same_memory(shape[1], src, dst)   # (a view)
                return 0.0 if free else transform_seconds(shape, src, dst)

            can: frozenset[str] = frozenset()   # what the last op's kernel can still fuse
            for i, op in enumerate(net.ops):
                if op.kind == "conv":
                    c = chosen[op.name]
                    total += c.seconds + move(op.inputs[0], c.in_layout)
                    layout[op.name] = c.out_layout
                    can = c.fuses
                    continue
                if op.kind == "add" or glue_layout:
                    target = glue_layout or layout[op.inputs[side[op.name]]]
                    total += sum(move(t, target) for t in op.inputs)
                else:
                    target = layout[op.inputs[0]]
                kind = sites.get(op.name)
                fused = kind in can and layout[net.ops[i - 1].name] == target
                if not fused:
                    total += glue_seconds(op, target)
                layout[op.name] = target
                can = can - {"add"} if fused and kind == "add" else frozenset()
            total += move(net.output, "nchw")
            best = min(best, total)
    return best


@settings(max_examples=150, deadline=None)
@given(networks())
def test_dp_finds_the_brute_force_optimum(case):
    net, costs, per_pair, per_glue = case
    cost = transform_cost(per_pair)
    best = plan.optimal(net, costs, cost)
    assert best.total_seconds == pytest.approx(brute_force(net, costs, cost))
    # with glue costs that depend on the layout the glue runs in
    glue = glue_cost(per_glue)
    with_glue = plan.optimal(net, costs, cost, glue)
    assert with_glue.total_seconds == pytest.approx(brute_force(net, costs, cost, glue))
    assert sum(s.seconds for s in with_glue.steps if s.kind != "conv") == pytest.approx(
        sum(per_glue[s.op, s.layout] for s in with_glue.steps if s.kind != "conv"))
    # the plan's steps add up and each conv runs one of its layer's candidates
    for step in best.steps:
        if step.kind == "conv":
            assert step.candidate in costs[step.layer]
    # glue a conv's stores may run costs nothing where the candidate fuses it
    sites = executor.fusion_sites(net)
    fused = plan.optimal(net, costs, cost, glue, sites=sites)
    assert fused.total_seconds == pytest.approx(brute_force(net, costs, cost, glue,
                                                            sites=sites))
    assert fused.total_seconds <= with_glue.total_seconds + 1e-9
    for i, step in enumerate(fused.steps):
        if step.fused_into:
            assert step.op in sites and step.layout == fused.steps[i - 1].layout
            assert step.charged_seconds == 0 and step.seconds == per_glue[step.op, step.layout]


@settings(max_examples=100, deadline=None)
@given(networks())
def test_alternatives_bracket_the_optimum(case):
    net, costs, per_pair, per_glue = case
    cost, glue = transform_cost(per_pair), glue_cost(per_glue)
    sites = executor.fusion_sites(net)
    best = plan.optimal(net, costs, cost, glue, sites=sites).total_seconds
    assert plan.per_layer_bound(net, costs, glue, sites).total_seconds <= best + 1e-9
    for layout in ("nchw", "nhwc"):
        alternative = plan.one_layout(net, costs, cost, layout, glue, sites=sites)
        if isinstance(alternative, plan.Plan):
            assert alternative.total_seconds >= best - 1e-9
            assert all(s.candidate.in_layout == s.candidate.out_layout == layout
                       for s in alternative.steps if s.kind == "conv")


def _one_block_everywhere(net: Net, layout: str):
    """Whether a choice of candidates keeps every tensor the network computes in
    ``layout``: every conv writes it and reads it, but a conv on the network input may read
    any blocked layout, if its layer runs no other conv (one filter per layer)."""
    convs = [op for op in net.ops if op.kind == "conv"]
    later = {op.layer for op in convs if "input" not in op.inputs}

    def accept(chosen) -> bool:
        for op in convs:
            c = chosen[op.name]
            stem = "input" in op.inputs and op.layer not in later
            if c.out_layout != layout or not (
                    c.in_layout == layout or (stem and c.in_layout in ("nchw8c", "nchw16c"))):
                return False
        return True
    return accept


@settings(max_examples=100, deadline=None)
@given(networks())
def test_the_one_block_plan_is_the_brute_force_best_with_one_block_everywhere(case):
    """NeoCPU's section 3.2 plan (one block x for the whole network): for each x, the
    cheapest choice with every computed tensor in NCHW[x]c, and the best over x."""
    net, costs, per_pair, per_glue = case
    cost, glue = transform_cost(per_pair), glue_cost(per_glue)
    best, each = plan.one_block(net, costs, cost, glue)
    written = {c.out_layout for cands in costs.values() for c in cands}
    assert sorted(each) == sorted(lay for lay in written if lay in ("nchw8c", "nchw16c"))
    totals = {}
    for layout, one in each.items():
        truth = brute_force(net, costs, cost, glue, accept=_one_block_everywhere(net, layout))
        if math.isinf(truth):
            assert isinstance(one, str) and "no measured" in one
            continue
        assert one.total_seconds == pytest.approx(truth)
        assert one.total_seconds >= plan.optimal(net, costs, cost, glue).total_seconds - 1e-9
        totals[layout] = truth
    if totals:
        assert best.total_seconds == pytest.approx(min(totals.values()))
    else:
        assert isinstance(best, str)


@settings(max_examples=100, deadline=None)
@given(networks())
def test_local_plans_keep_each_layers_fastest_candidate_and_cost_what_brute_force_says(case):
    """The local plans (NeoCPU's local search without the global step): every conv runs
    its layer's fastest candidate, the transforms and glue between cost the cheapest that
    allows, and the optimum is never slower than the one whose glue may run in its inputs'
    layouts (glue forced into NCHW is outside the optimum's space: an add there may run in
    a layout neither input has, which the paper's rule never picks)."""
    net, costs, per_pair, per_glue = case
    cost, glue = transform_cost(per_pair), glue_cost(per_glue)
    best = plan.optimal(net, costs, cost, glue).total_seconds
    fastest = {layer: [min(cands, key=lambda c: c.seconds)] for layer, cands in costs.items()}
    for glue_layout in (None, "nchw"):
        local = plan.local_best(net, costs, cost, glue, glue_layout)
        if glue_layout is None:
            assert local.total_seconds >= best - 1e-9
        assert local.total_seconds == pytest.approx(
            brute_force(net, fastest, cost, glue, glue_layout))
        for step in local.steps:
            if step.kind == "conv":
                assert step.candidate.seconds == min(c.seconds for c in costs[step.layer])
            elif glue_layout:
                assert step.layout == glue_layout


def _residual(channels: int = 16) -> Net:
    ops = (Op("c1", "conv", ("input",), "A"), Op("r1", "relu", ("c1",)),
           Op("c2", "conv", ("r1",), "B"), Op("sum", "add", ("c2", "r1")),
           Op("c3", "conv", ("sum",), "A"))
    return Net(ops, {name: (1, channels, 4, 4)
                     for name in ("input", "c1", "r1", "c2", "sum", "c3")})


def test_a_blocked_region_pays_its_edge_transforms_once_each():
    """Blocked convs win by more than the two transforms at the network's edges, and the
    residual add needs none because both its inputs are blocked."""
    costs = {"A": [Candidate("A/nchw", "nchw", "nchw", 10.0),
                   Candidate("A/blocked", "nchw16c", "nchw16c", 4.0)],
             "B": [Candidate("B/nchw", "nchw", "nchw", 10.0),
                   Candidate("B/blocked", "nchw16c", "nchw16c", 4.0)]}
    best = plan.optimal(_residual(), costs, lambda shape, src, dst: 1.0)
    assert [s.candidate.variant_id for s in best.steps if s.candidate] == [
        "A/blocked", "B/blocked", "A/blocked"]
    assert [(t.tensor, t.src, t.dst) for t in best.transforms] == [
        ("input", "nchw", "nchw16c"), ("c3", "nchw16c", "nchw")]
    assert best.total_seconds == 14.0
    assert "pays nchw->nchw16c" in best.steps[0].why
    assert plan.one_layout(_residual(), costs, lambda *a: 1.0, "nchw").total_seconds == 30.0
    assert plan.one_layout(_residual(), costs, lambda *a: 1.0, "nhwc") == (
        "layer A has no measured nhwc candidate")
    assert plan.per_layer_bound(_residual(), costs).total_seconds == 12.0
    blocked, each = plan.one_block(_residual(), costs, lambda *a: 1.0)
    assert blocked.total_seconds == 14.0 and list(each) == ["nchw16c"]


def test_one_block_lets_the_stem_read_any_block_and_says_which_block_fails():
    """The stem reads the 3-channel input in NCHW3c (no larger block divides it); with
    NCHW16c everywhere else that is still the one-block plan.  A block some conv cannot
    write is named with the conv's layer."""
    costs = {"A": [Candidate("A/3c", "nchw3c", "nchw16c", 4.0),
                   Candidate("A/8c", "nchw3c", "nchw8c", 3.0)],
             "B": [Candidate("B/16c", "nchw16c", "nchw16c", 4.0)]}
    ops = (Op("c1", "conv", ("input",), "A"), Op("r1", "relu", ("c1",)),
           Op("c2", "conv", ("r1",), "B"))
    net = Net(ops, {"input": (1, 3, 4, 4), "c1": (1, 16, 4, 4), "r1": (1, 16, 4, 4),
                    "c2": (1, 16, 4, 4)})
    blocked, each = plan.one_block(net, costs, lambda *a: 1.0)
    assert list(each) == ["nchw8c", "nchw16c"]
    assert each["nchw8c"] == "layer B has no measured nchw8c candidate"
    assert blocked is each["nchw16c"] and blocked.total_seconds == 10.0
    assert [(t.src, t.dst) for t in blocked.transforms] == [("nchw", "nchw3c"),
                                                             ("nchw16c", "nchw")]
    # all-NHWC and all-NCHW keep their rule: the stem reads the layout itself
    assert plan.one_layout(net, costs, lambda *a: 1.0, "nchw16c") == (
        "layer A has no measured nchw16c candidate")
    only_plain = {"A": [Candidate("A/nchw", "nchw", "nchw", 1.0)],
                  "B": [Candidate("B/nchw", "nchw", "nchw", 1.0)]}
    assert plan.one_block(net, only_plain, lambda *a: 1.0) == (
        "no measured candidate writes a blocked layout", {})


def test_the_global_step_beats_the_local_plan_when_fastest_layouts_alternate():
    """A is fastest blocked and B fastest in NHWC, by less than the transforms between
    them cost: the local plan pays them, the optimum runs B blocked too (NeoCPU's case
    for the global search); with the glue in NCHW the local plan pays more again.  (32
    channels: NCHW16c is not NHWC's memory.)"""
    costs = {"A": [Candidate("A/nhwc", "nhwc", "nhwc", 4.5),
                   Candidate("A/blocked", "nchw16c", "nchw16c", 4.0)],
             "B": [Candidate("B/nhwc", "nhwc", "nhwc", 4.0),
                   Candidate("B/blocked", "nchw16c", "nchw16c", 4.5)]}
    one = lambda shape, src, dst: 1.0   # noqa: E731 - every transform costs 1
    best = plan.optimal(_residual(32), costs, one)
    local = plan.local_best(_residual(32), costs, one)
    assert [s.candidate.variant_id for s in local.steps if s.candidate] == [
        "A/blocked", "B/nhwc", "A/blocked"]
    assert best.total_seconds == 14.5          # all blocked: 4 + 4.5 + 4, 2 edge transforms
    # the input to blocked, r1 to nhwc for B, B's output to blocked for the add, the
    # output to nchw: 12 of convs + 4 transforms
    assert local.total_seconds == 16.0 and len(local.transforms) == 4
    nchw_glue = plan.local_best(_residual(32), costs, one, glue_layout="nchw")
    assert [s.layout for s in nchw_glue.steps if s.kind != "conv"] == ["nchw", "nchw"]
    # and c1 -> nchw for the relu, the add's output back to blocked for c3
    assert nchw_glue.total_seconds == 18.0 and len(nchw_glue.transforms) == 6


def test_a_tensor_moves_free_between_layouts_that_hold_the_same_bytes():
    """With 16 channels NCHW16c is NHWC's memory (and NCHW1c NCHW's): B's NHWC candidate
    reads A's blocked output as it is, so the optimum is each layer's fastest with only the
    network's edges paid, and so is the local plan."""
    costs = {"A": [Candidate("A/nhwc", "nhwc", "nhwc", 4.5),
                   Candidate("A/blocked", "nchw16c", "nchw16c", 4.0)],
             "B": [Candidate("B/nhwc", "nhwc", "nhwc", 4.0),
                   Candidate("B/blocked", "nchw16c", "nchw16c", 4.5)],
             "S": [Candidate("S/nchw1c", "nchw1c", "nhwc", 4.0)]}
    one = lambda shape, src, dst: 1.0   # noqa: E731 - every transform costs 1
    best = plan.optimal(_residual(16), costs, one)
    assert [s.candidate.variant_id for s in best.steps if s.candidate] == [
        "A/blocked", "B/nhwc", "A/blocked"]
    assert [(t.tensor, t.src, t.dst) for t in best.transforms] == [
        ("input", "nchw", "nchw16c"), ("c3", "nchw16c", "nchw")]
    assert best.total_seconds == 14.0
    assert plan.local_best(_residual(16), costs, one).total_seconds == 14.0
    # a stem reading NCHW1c reads the NCHW input as it is
    stem = Net((Op("c1", "conv", ("input",), "S"),), {"input": (1, 16, 4, 4),
                                                    "c1": (1, 16, 4, 4)})
    assert plan.optimal(stem, costs, one).total_seconds == 4.0 + 1.0   # the output's edge


def test_a_layer_without_costs_is_named():
    with pytest.raises(plan.PlanError, match="layer 'B'"):
        plan.optimal(_residual(), {"A": [Candidate("A", "nchw", "nchw", 1.0)]},
                     lambda *a: 0.0)


def _record(layer: str, algorithm: str, layout: str, params: dict, seconds: float,
            round_: int = 1) -> str:
    import json

    return json.dumps({"host": "h", "layer": layer, "descriptor": "", "algorithm": algorithm,
                       "layout": layout, "params": params, "threads": 1,
                       "vector_width": "auto", "cache": "warm", "round": round_,
                       "median_s": seconds, "status": "ok"})


def _toy_suite(tmp_path, monkeypatch, pairs: list[tuple[str, str]]) -> None:
    """The toy residual network as the suite ``convbench plan`` loads, and
    transforms.parquet timing each (from, to) pair at 1 ms on its 16-channel tensors."""


    import pandas as pd

    from convbench.spec import suite as suite_module

    pd.DataFrame([{"mb": 1, "c": 16, "h": 4, "w": 4, "from_layout": a, "to_layout": b,
                   "threads": 1, "median_s": 1e-3, "status": "ok"} for a, b in pairs]
                 ).to_parquet(tmp_path / "transforms.parquet")
    monkeypatch.setattr(suite_module, "load_suite",
                        lambda path: SimpleNamespace(name="toy", graph=_residual()))


def test_plan_command_from_records_and_transforms(tmp_path, cli, monkeypatch):
    """Records (the last round counts) and transforms.parquet in, table and plan.json out."""
    import json


    blocked = {"ic_bn": 16, "oc_bn": 16, "reg_n": 7, "unroll_ker": False}
    (tmp_path / "records.jsonl").write_text("\n".join([
        _record("A", "direct", "nchw", {}, 10e-3),
        _record("A", "nchwc", "nchwxc", blocked, 9e-3, round_=1),
        _record("A", "nchwc", "nchwxc", blocked, 4e-3, round_=2),   # the last round counts
        _record("B", "direct", "nchw", {}, 10e-3),
        _record("B", "nchwc", "nchwxc", blocked, 4e-3)]) + "\n")
    _toy_suite(tmp_path, monkeypatch, [("nchw", "nchw16c"), ("nchw16c", "nchw")])
    code, out, err = cli("plan", "toy", "--records", tmp_path / "records.jsonl",
                         "--transforms", tmp_path, "-o", tmp_path / "plan.json", "-v")
    assert code == 0, err
    assert "per-layer bound" in out and "pays nchw->nchw16c" in out
    document = json.loads((tmp_path / "plan.json").read_text())
    assert document["format_version"] == 1 and document["host"] == "h"
    assert document["left_out_candidates"] == {"candidates": 0, "layouts": []}
    assert [op["variant"] for op in document["ops"] if op["kind"] == "conv"] == [
        "nchwc/nchwxc/ic_bn=16/oc_bn=16/reg_n=7/unroll_ker=False"] * 3
    assert document["predicted"]["total_s"] == pytest.approx(14e-3)
    assert document["alternatives"]["all-nchw"]["total_s"] == pytest.approx(30e-3)
    assert "unavailable" in document["alternatives"]["all-nhwc"]
    # one block for the whole network is the plan here (NeoCPU's section 3.2 plan)
    blocked = document["alternatives"]["all-nchwxc"]
    assert blocked["total_s"] == pytest.approx(14e-3) and len(blocked["ops"]) == 5
    assert blocked["blocks"] == {"nchw16c": {"total_s": pytest.approx(14e-3)}}
    assert blocked["layout"] == "nchw16c"
    assert "all-nchwxc (nchw16c, the best block)" in out
    assert "all-nchwxc per block: nchw16c 14.000 ms" in out
    # every conv's fastest candidate is blocked, so the local plan is the plan here, and
    # with the glue in NCHW it pays a transform on each side of the relu and the add
    local = document["alternatives"]["local-best"]
    assert local["total_s"] == pytest.approx(14e-3) and len(local["ops"]) == 5
    assert document["alternatives"]["local-best-nchw-glue"]["total_s"] == pytest.approx(18e-3)
    assert "local best" in out


def test_plan_leaves_out_candidates_whose_layouts_have_no_transform_timings(
        tmp_path, cli, monkeypatch):
    """transforms.parquet from ``convbench transforms --within`` lacks the layouts of slow
    variants: the plan is made from the others and says which it left out."""
    import json


    # (NCHW8c: on the toy's 16 channels NCHW16c is NHWC's memory, as good as timed)
    blocked = {"ic_bn": 8, "oc_bn": 8, "reg_n": 7, "unroll_ker": False}
    (tmp_path / "records.jsonl").write_text("\n".join([
        _record(layer, algorithm, layout, params, seconds)
        for layer in ("A", "B")
        for algorithm, layout, params, seconds in [("direct", "nchw", {}, 10e-3),
                                                   ("direct", "nhwc", {}, 9e-3),
                                                   ("nchwc", "nchwxc", blocked, 4e-3)]])
        + "\n")
    _toy_suite(tmp_path, monkeypatch, [("nchw", "nhwc"), ("nhwc", "nchw")])
    code, out, err = cli("plan", "toy", "--records", tmp_path / "records.jsonl",
                         "--transforms", tmp_path, "-o", tmp_path / "plan.json")
    assert code == 0, err
    assert "2 candidate(s) left out: they read or write nchw8c" in out
    document = json.loads((tmp_path / "plan.json").read_text())
    assert document["left_out_candidates"] == {"candidates": 2, "layouts": ["nchw8c"]}
    assert [op["variant"] for op in document["ops"] if op["kind"] == "conv"] == [
        "direct/nhwc"] * 3
    assert document["predicted"]["total_s"] == pytest.approx(29e-3)   # 3 x 9 + 2 x 1


def test_plan_command_says_when_the_suite_has_no_graph(tmp_path, cli):
    (tmp_path / "records.jsonl").write_text(_record("c", "direct", "nchw", {}, 1.0) + "\n")
    code, _out, err = cli("plan", "smoke", "--records", tmp_path / "records.jsonl",
                          "--transforms", tmp_path)
    assert code == 2 and "has no network graph" in err


def test_plan_command_adds_the_measured_glue_in_the_layout_it_runs(tmp_path, cli,
                                                                   monkeypatch):
    """With glue.parquet beside transforms.parquet the relu and the add cost what they
    were measured to cost in the layout the plan runs them in: the blocked plan's in
    nchw16c, the all-NCHW plan's in nchw; the relu after a blocked conv costs the plan
    nothing (it runs in the conv's stores)."""
    import json

    import pandas as pd


    blocked = {"ic_bn": 16, "oc_bn": 16, "reg_n": 7, "unroll_ker": False}
    (tmp_path / "records.jsonl").write_text("\n".join([
        _record(layer, algorithm, layout, params, seconds)
        for layer in ("A", "B")
        for algorithm, layout, params, seconds in [("direct", "nchw", {}, 10e-3),
                                                   ("nchwc", "nchwxc", blocked, 4e-3)]]) + "\n")
    _toy_suite(tmp_path, monkeypatch, [("nchw", "nchw16c"), ("nchw16c", "nchw")])
    pd.DataFrame([{"kind": kind, "mb": 1, "c": 16, "h": 4, "w": 4, "inputs": inputs, "k": 0,
                   "s": 1, "p": 0, "in_place": True, "layout": layout, "threads": 1,
                   "median_s": seconds, "status": "ok"}
                  for kind, inputs in (("relu", 1), ("add", 2))
                  for layout, seconds in (("nchw", 2e-3), ("nchw16c", 0.5e-3))]
                 ).to_parquet(tmp_path / "glue.parquet")
    code, out, err = cli("plan", "toy", "--records", tmp_path / "records.jsonl",
                         "--transforms", tmp_path, "-o", tmp_path / "plan.json")
    assert code == 0, err
    assert "counted as free" not in out
    document = json.loads((tmp_path / "plan.json").read_text())
    assert {op["op"]: op["seconds"] for op in document["ops"] if op["kind"] != "conv"} == {
        "r1": pytest.approx(0.5e-3), "sum": pytest.approx(0.5e-3)}
    # r1 runs in c1's stores (nchwc fuses a relu): charged nothing; direct fuses none
    assert {op["op"]: op["fused_into"] for op in document["ops"] if op["fused_into"]} == {
        "r1": "c1"}
    assert document["predicted"]["total_s"] == pytest.approx(14.5e-3)
    assert document["alternatives"]["all-nchw"]["total_s"] == pytest.approx(34e-3)
    # without glue.parquet the same plan says that glue is counted as free
    (tmp_path / "glue.parquet").unlink()
    code, out, err = cli("plan", "toy", "--records", tmp_path / "records.jsonl",
                         "--transforms", tmp_path)
    assert code == 0 and "glue ops (relu, pools, add) counted as free" in out


def test_the_costs_reference_is_the_final_rounds():
    """CostTable.reference_s: the median in-run reference of the final rounds (a tune's
    short early rounds read it higher), of every row where none is final."""
    from convbench.plan import costs

    def measured(variant: str, reference_s: float, final: bool) -> costs.Measured:
        return costs.Measured("A", variant, "direct", "nchw", {}, 1, "auto", "cold-weights",
                              1e-3, "h", reference_s, final)

    rows = [measured("v1", 1e-3, True), measured("v2", 1e-3, True),
            *(measured(f"early{i}", 3e-3, False) for i in range(3))]
    assert costs.cost_table(rows).reference_s == pytest.approx(1e-3)
    early = [measured(f"early{i}", 3e-3, False) for i in range(3)]
    assert costs.cost_table(early).reference_s == pytest.approx(3e-3)
    assert math.isnan(costs.cost_table([measured("v", math.nan, True)]).reference_s)


def test_each_thread_count_plans_in_its_own_cache_mode():
    """`tune --cache auto` may tune 1 thread warm and 2 threads cold-weights into one file:
    --threads alone picks the mode; a mode the count lacks is named."""
    from convbench.plan import costs

    def measured(threads: int, cache: str) -> costs.Measured:
        return costs.Measured("A", "v", "direct", "nchw", {}, threads, "auto", cache, 1e-3)

    rows = [measured(1, "warm"), measured(2, "cold-weights")]
    assert costs.cost_table(rows, threads=1).cache == "warm"
    assert costs.cost_table(rows, threads=2).cache == "cold-weights"
    with pytest.raises(costs.PlanError, match="have warm"):
        costs.cost_table(rows, threads=1, cache="cold-weights")


def test_glue_costs_come_from_the_cache_mode_of_the_conv_costs():
    """glue.parquet holds each glue op warm and cold-weights: a warm plan adds the warm
    timing, a cold-weights or cold one the cold-weights timing; a file from before the
    column has cold-weights timings only and serves every mode."""
    import pandas as pd

    from convbench.plan import costs

    row = {"kind": "relu", "mb": 1, "c": 16, "h": 4, "w": 4, "inputs": 1, "k": 0, "s": 1,
           "p": 0, "in_place": True, "layout": "nchw", "threads": 1, "status": "ok"}
    both = pd.DataFrame([{**row, "cache": "cold-weights", "median_s": 3e-3},
                         {**row, "cache": "warm", "median_s": 1e-3}])
    r1 = _residual().ops[1]
    for mode, seconds in (("warm", 1e-3), ("cold-weights", 3e-3), ("cold", 3e-3)):
        assert costs.GlueTable.from_frame(both, _residual(), 1, mode)(r1, "nchw") == seconds
    old = pd.DataFrame([{**row, "median_s": 3e-3}])
    assert costs.GlueTable.from_frame(old, _residual(), 1, "warm")(r1, "nchw") == 3e-3


def test_a_missing_transform_or_glue_timing_says_how_to_measure_it():
    import pandas as pd

    from convbench.plan import costs

    table = costs.TransformTable.from_frame(pd.DataFrame([
        {"mb": 1, "c": 16, "h": 4, "w": 4, "from_layout": "nchw", "to_layout": "nhwc",
         "threads": 1, "median_s": 1e-3, "status": "ok"}]), threads=1)
    with pytest.raises(plan.PlanError, match=r"nchw -> nchw8c .*--records RECORDS"):
        table((1, 3, 8, 8), "nchw", "nchw8c")
    # NCHW16c of a 16-channel tensor is NHWC's memory: it costs what NHWC's transform does
    assert table((1, 16, 4, 4), "nchw", "nchw16c") == table((1, 16, 4, 4), "nchw", "nhwc")
    glue = costs.GlueTable.from_frame(pd.DataFrame([
        {"kind": "relu", "mb": 1, "c": 16, "h": 4, "w": 4, "inputs": 1, "k": 0, "s": 1,
         "p": 0, "in_place": True, "layout": "nchw", "threads": 1, "median_s": 1e-3,
         "status": "ok"}]), _residual(), threads=1)
    r1 = _residual().ops[1]
    assert glue(r1, "nchw") == 1e-3
    with pytest.raises(plan.PlanError, match=r"glue op r1 \(relu on 1x16x4x4\) in nhwc"):
        glue(r1, "nhwc")
    # NCHW1c is NCHW's memory, as NCHW16c of this 16-channel tensor is NHWC's: a plan whose
    # conv writes one runs the relu on the bytes timed in the other (NCHW16c stays untimed)
    assert glue(r1, "nchw1c") == 1e-3
    with pytest.raises(plan.PlanError, match=r"in nchw16c"):
        glue(r1, "nchw16c")
