"""Layout transforms: exact data movement between NCHW, NHWC and NCHW[x]c, and their
measurement into transforms.parquet."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from convbench.kernels import layouts, transforms

LAYOUTS = ("nchw", "nhwc", "nchw1c", "nchw3c", "nchw8c", "nchw16c", "nchw32c", "nchw64c")
# odd channel counts leave the last block part padding (and a 3-channel block's runs cross
# the 8- and 16-channel blocks); 1 x 1 and a single channel too; 64 channels fill every
# block, so equal blocks are one flat copy (NHWC and NCHW64c)
SHAPES = [(1, 3, 5, 7), (2, 17, 4, 3), (1, 1, 1, 1), (1, 33, 2, 2), (2, 64, 3, 19)]


@pytest.fixture(scope="module")
def tensors() -> dict[tuple[int, ...], np.ndarray]:
    rng = np.random.default_rng(0)
    return {shape: rng.standard_normal(shape, dtype=np.float32) for shape in SHAPES}


@pytest.mark.parametrize("shape", SHAPES)
def test_every_pair_equals_the_numpy_reference(tensors, shape):
    x = tensors[shape]
    for src, dst in itertools.product(LAYOUTS, LAYOUTS):
        held = layouts.to_layout(x, src)
        got = transforms.convert(held, shape, src, dst)
        np.testing.assert_array_equal(got, transforms.reference(held, shape, src, dst),
                                      err_msg=f"{src} -> {dst}")


@pytest.mark.parametrize("shape", SHAPES)
def test_round_trips_are_the_identity(tensors, shape):
    x = tensors[shape]
    for path in [("nchw", "nchw16c", "nhwc", "nchw"), ("nchw", "nchw8c", "nchw32c", "nchw"),
                 ("nchw", "nhwc", "nchw16c", "nchw8c", "nhwc", "nchw")]:
        held = x
        for src, dst in itertools.pairwise(path):
            held = transforms.convert(held, shape, src, dst)
        np.testing.assert_array_equal(held, x, err_msg=" -> ".join(path))


def test_block_padding_is_written_as_zeros():
    """A reused destination buffer holds no stale values in its padding channels."""
    shape = (1, 3, 2, 2)
    t = transforms.Transform(shape, "nchw", "nchw8c")
    y = np.full(transforms.stored_shape(shape, "nchw8c"), np.nan, np.float32)
    t(np.ones(shape, np.float32), y)
    assert np.all(y[..., :3] == 1) and np.all(y[..., 3:] == 0)


def test_layouts_of_adds_the_plain_layouts_in_order():
    assert transforms.layouts_of({("nchw16c", "nchw32c")}) == (
        "nchw", "nhwc", "nchw16c", "nchw32c")


TINY_SUITE = """\
name: tiny
description: one small layer with an odd channel count, for the transforms measurement
layers:
  - {name: c1, shape: mb1ic3ih6oc17oh6kh3ph1}
sweep:
  algorithms: [nchwc]
  threads: [1]
  params: {nchwc: {ic_bn: [8], oc_bn: [16], reg_n: [4]}}
  timing: {min_time: 0.0002, values: 3, warmups: 0, timeout: 60, processes: 1}
"""


def test_the_layouts_measured_are_those_the_sweep_uses(tmp_path):
    from convbench.harness import transform_run
    from convbench.spec.suite import load_suite

    path = tmp_path / "tiny.yaml"
    path.write_text(TINY_SUITE)
    suite = load_suite(path)
    assert transform_run.sweep_layouts(suite) == ("nchw", "nhwc", "nchw8c", "nchw16c")
    assert transform_run.tensor_shapes(suite) == [(1, 3, 6, 6), (1, 17, 6, 6)]


def test_a_tiny_measurement_writes_finite_medians(tmp_path, cli):
    import pandas as pd

    path = tmp_path / "tiny.yaml"
    path.write_text(TINY_SUITE)
    code, _out, err = cli("transforms", path, "--layouts", "nchw,nchw16c", "-o",
                         tmp_path / "out")
    assert code == 0, err
    assert "2/2" in err   # the progress bar: one tick per tensor shape, from the worker
    frame = pd.read_parquet(tmp_path / "out" / "transforms.parquet")
    assert sorted(zip(frame.c, frame.from_layout, frame.to_layout, frame.cache,
                      strict=True)) == [
        (c, a, b, cache) for c in (3, 17) for a, b in (("nchw", "nchw16c"), ("nchw16c", "nchw"))
        for cache in ("cold-weights", "warm")]
    assert (frame.status == "ok").all() and (frame.n_values == 3).all()
    assert np.isfinite(frame.median_s).all() and (frame.median_s > 0).all()
    assert frame.host.nunique() == 1 and (frame.threads == 1).all()
    # cold-weights: single calls after an eviction and the twin; warm: a calibrated loop
    assert (frame[frame.cache == "cold-weights"].loops == 1).all()
    assert (frame[frame.cache == "warm"].loops > 1).all()


def test_the_plan_takes_the_transform_timings_of_its_cache_mode():
    """TransformTable: cold-weights costs plan with the cold-weights transforms, warm costs
    with the warm ones; a transforms.parquet from before the column held warm ones only."""
    import pandas as pd

    from convbench.plan.costs import TransformTable

    row = dict(mb=1, c=16, h=4, w=4, from_layout="nchw", to_layout="nchw16c", threads=1,
               status="ok")
    frame = pd.DataFrame([{**row, "cache": "cold-weights", "median_s": 3e-6},
                          {**row, "cache": "warm", "median_s": 1e-6}])
    shape = (1, 16, 4, 4)
    assert TransformTable.from_frame(frame, 1)(shape, "nchw", "nchw16c") == 3e-6
    assert TransformTable.from_frame(frame, 1, "cold-weights")(shape, "nchw", "nchw16c") == 3e-6
    assert TransformTable.from_frame(frame, 1, "warm")(shape, "nchw", "nchw16c") == 1e-6
    old = frame[frame.cache == "warm"].drop(columns="cache")
    assert TransformTable.from_frame(old, 1, "cold-weights")(shape, "nchw", "nchw16c") == 1e-6


TINY_NETWORK_SUITE = TINY_SUITE + """\
network:
  title: one conv, its relu added to it, a max pool
  input: {c: 3, h: 6, w: 6}
  ops:
    - {name: c1, op: conv, layer: c1}
    - {name: c1_relu, op: relu}
    - {name: sum, op: add, from: [c1_relu, c1]}
    - {name: pool, op: maxpool, k: 3, s: 2, p: 1}
"""


def test_the_glue_ops_of_the_network_are_timed_in_each_layout(tmp_path, cli):
    """glue.parquet: each distinct glue op of the graph in each measured layout, checked
    against the float64 reference before it is timed."""
    import pandas as pd

    path = tmp_path / "tinynet.yaml"
    path.write_text(TINY_NETWORK_SUITE)
    code, out, err = cli("transforms", path, "--layouts", "nchw,nchw16c", "-o",
                         tmp_path / "out")
    assert code == 0, err
    assert "5/5" in err   # 2 tensor shapes and 3 glue ops
    assert ("12 glue ops timed (3 distinct ops of the network x 2 layouts x 2 cache modes; "
            "0 not timed)") in out
    glue = pd.read_parquet(tmp_path / "out" / "glue.parquet")
    assert sorted(zip(glue.kind, glue.c, glue.h, glue.k, glue.s, glue.p, glue.layout,
                      glue.cache, strict=True)) == [
        (kind, 17, 6, k, s, p, layout, cache)
        for kind, k, s, p in (("add", 0, 1, 0), ("maxpool", 3, 2, 1), ("relu", 0, 1, 0))
        for layout in ("nchw", "nchw16c") for cache in ("cold-weights", "warm")]
    assert (glue.status == "ok").all() and (glue.n_values == 3).all()
    # cold-weights: single calls after an eviction; warm: a calibrated loop (a few-KiB op
    # lasts far less than min_time)
    assert (glue[glue.cache == "cold-weights"].loops == 1).all()
    assert (glue[glue.cache == "warm"].loops > 1).all()
    assert np.isfinite(glue.median_s).all() and (glue.median_s > 0).all()
    # the add runs over the relu's output, as the network pass runs it (checked in each
    # layout on its own copy of the inputs); the relu's input c1 is read by the add too,
    # and a pool cannot run in place
    assert dict(zip(glue.kind, glue.in_place, strict=True)) == {
        "relu": False, "add": True, "maxpool": False}


def _nchwc_record(params: dict, status: str = "ok", **fields) -> str:
    """One tuning record line (format 1) of an nchwc variant."""
    from convbench.tune import records

    base = {name: 0 for name in records.FIELDS}
    base.update({name: "" for name, types in records.FIELDS.items() if str in types})
    base.update(format_version=records.FORMAT_VERSION, algorithm="nchwc",
                layout="nchwxc", params=params, final=True, median_s=1e-3,
                ci_low_s=1e-3, ci_high_s=1e-3, min_time=0.01, status=status)
    base.update(fields)
    return json.dumps(base) + "\n"


def test_records_name_the_layouts_their_variants_use(tmp_path, cli):
    """--records: the tuner's layouts (here ic_bn=3 / oc_bn=32, off the sweep's grid), plus
    nchw and nhwc; a failed record adds none; --layouts beside it is refused."""
    from convbench.harness import transform_run

    path = tmp_path / "records.jsonl"
    path.write_text(_nchwc_record({"ic_bn": 3, "oc_bn": 32, "reg_n": 8, "unroll_ker": True})
                    + _nchwc_record({"ic_bn": 64, "oc_bn": 64, "reg_n": 8,
                                     "unroll_ker": True}, "fail"))
    assert transform_run.record_layouts(path) == ("nchw", "nhwc", "nchw3c", "nchw32c")
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY_SUITE)
    code, _out, err = cli("transforms", suite, "--records", path, "--layouts", "nchw,nhwc")
    assert code == 2 and "not both" in err
    code, _out, err = cli("transforms", suite, "--within", "1.1", "--layouts", "nchw,nhwc")
    assert code == 2 and "give --records" in err


def test_within_keeps_the_layouts_of_the_variants_near_their_layers_fastest(tmp_path):
    """--within F: a variant's layouts count when its last round's median is within F x of
    its layer's fastest; each layer is judged on its own, a round that ran longer replaces
    an earlier one."""
    from convbench.harness import transform_run

    def record(layer: str, ic_bn: int, oc_bn: int, seconds: float, round_: int = 0) -> str:
        return _nchwc_record({"ic_bn": ic_bn, "oc_bn": oc_bn, "reg_n": 4,
                              "unroll_ker": False}, layer=layer, round=round_, threads=1,
                             median_s=seconds)

    path = tmp_path / "records.jsonl"
    path.write_text("".join([
        record("a", 8, 8, 1.0e-3), record("a", 4, 4, 1.05e-3), record("a", 2, 2, 2e-3),
        record("b", 16, 16, 10e-3),                    # b's fastest
        record("b", 32, 32, 30e-3), record("b", 32, 32, 10.5e-3, round_=1),
        # fastest in round 0, but its last round is what counts
        record("b", 3, 3, 0.9e-3, round_=0), record("b", 3, 3, 12e-3, round_=1)]))
    everything = transform_run.record_layouts(path)
    assert {"nchw2c", "nchw3c", "nchw4c", "nchw8c", "nchw16c", "nchw32c"} <= set(everything)
    near = transform_run.record_layouts(path, within=1.1)
    assert near == ("nchw", "nhwc", "nchw4c", "nchw8c", "nchw16c", "nchw32c")
    assert set(transform_run.record_layouts(path, within=1.2)) == {
        "nchw", "nhwc", "nchw3c", "nchw4c", "nchw8c", "nchw16c", "nchw32c"}


def test_a_torn_last_line_is_skipped_by_every_reader_of_the_records(tmp_path):
    """A tune killed mid-line leaves a torn last line: the planner's reader and both ways
    of --records skip it as ``tune --resume`` does; a bad line before the last is an
    error naming file:line."""
    from convbench.errors import ConvbenchError
    from convbench.harness import transform_run
    from convbench.plan import costs

    whole = _nchwc_record({"ic_bn": 3, "oc_bn": 32, "reg_n": 8, "unroll_ker": True})
    path = tmp_path / "records.jsonl"
    path.write_text(whole + whole[:40])
    assert [(m.algorithm, m.params) for m in costs.read_records(path)] == [
        ("nchwc", json.loads(whole)["params"])]
    for within in (None, 1.1):
        assert transform_run.record_layouts(path, within) == ("nchw", "nhwc", "nchw3c",
                                                              "nchw32c")
    path.write_text(whole + whole[:40] + "\n" + whole)
    with pytest.raises(ConvbenchError, match=rf"{path}:2: not a tuning record"):
        costs.read_records(path)


NET_SUITE = Path(__file__).parent / "data" / "net_suite.yaml"


def _net_record(layer: str, seconds: float, params: dict | None = None,
                layout: str = "nhwc") -> str:
    """A record of net_suite's ``layer``: nchwc with ``params``, else direct in ``layout``."""
    if params is None:
        return _nchwc_record({}, algorithm="direct", layout=layout, layer=layer, threads=1,
                             median_s=seconds)
    return _nchwc_record({"reg_n": 4, "unroll_ker": False, **params}, layer=layer,
                         threads=1, median_s=seconds)


def test_each_shape_pairs_only_the_layouts_read_or_written_there(tmp_path):
    """net_suite: c3x3 and c1x1 work on 16x8x8, the max pool carries that tensor's layout to
    16x4x4, which c3x3s reads; c3x3s writes 20x4x4, pooled to 20x1x1.  Per shape: nchw,
    nhwc, and the layouts of the variants within F of their layer's fastest."""
    from convbench.harness import transform_run
    from convbench.spec.suite import load_suite

    path = tmp_path / "records.jsonl"
    path.write_text("".join([
        _net_record("c3x3", 1.0e-3, {"ic_bn": 8, "oc_bn": 16}),
        _net_record("c3x3", 1.05e-3),                                   # direct/nhwc
        _net_record("c3x3", 3.0e-3, {"ic_bn": 4, "oc_bn": 4}),           # slow
        _net_record("c1x1", 1.0e-3, {"ic_bn": 16, "oc_bn": 16}),
        _net_record("c3x3s", 1.0e-3, {"ic_bn": 16, "oc_bn": 8})]))
    suite = load_suite(str(NET_SUITE))
    sixteen = ("nchw", "nhwc", "nchw8c", "nchw16c")
    twenty = ("nchw", "nhwc", "nchw8c")
    assert transform_run.shape_layouts(suite, path, within=1.1) == {
        (1, 16, 4, 4): sixteen, (1, 16, 8, 8): sixteen,
        (1, 20, 1, 1): twenty, (1, 20, 4, 4): twenty}
    everything = transform_run.shape_layouts(suite, path)
    assert "nchw4c" in everything[1, 16, 8, 8] and "nchw4c" in everything[1, 16, 4, 4]
    assert "nchw4c" not in everything[1, 20, 4, 4]


@pytest.mark.parametrize("seed", range(4))
def test_the_pairs_per_shape_answer_every_question_the_plan_asks(tmp_path, seed):
    """Transform costs on every pair of every layout on every shape, and the same costs on
    only the pairs shape_layouts names: the plan keeps every candidate, never estimates a
    transform, and every plan it makes costs the same (random costs)."""
    import dataclasses
    import random

    from convbench.harness import transform_run
    from convbench.plan import costs
    from convbench.plan import layouts as plan
    from convbench.spec.suite import load_suite

    rng = random.Random(seed)
    lines = []
    for layer in ("c3x3", "c1x1", "c3x3s"):
        lines += [_net_record(layer, 1e-3, layout=layout) for layout in ("nchw", "nhwc")]
        lines += [_net_record(layer, 1e-3, {"ic_bn": i, "oc_bn": o})
                  for i in (8, 16) for o in (8, 16) if rng.random() < 0.6]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(lines))
    suite = load_suite(str(NET_SUITE))
    graph = suite.graph
    by_shape = transform_run.shape_layouts(suite, path)
    every = transform_run.record_layouts(path)
    full = {(s, a, b): rng.uniform(1e-5, 1e-3)
            for s in by_shape for a in every for b in every if a != b}
    named = {k: v for k, v in full.items() if {k[1], k[2]} <= set(by_shape[k[0]])}
    table = costs.cost_table(costs.read_records(path))
    candidates = {layer: [dataclasses.replace(c, seconds=rng.uniform(1e-4, 2e-3))
                          for c in cands] for layer, cands in table.costs.items()}
    shapes = {op.layer: (graph.shape(op.inputs[0]), graph.shape(op.name))
              for op in graph.ops if op.kind == "conv"}
    everywhere, only_named = costs.TransformTable(full), costs.TransformTable(named)
    kept, left = costs.with_timed_layouts(candidates, only_named, shapes)
    assert not left and kept == candidates
    plans = [
        lambda c, t: plan.optimal(graph, c, t),
        lambda c, t: plan.one_layout(graph, c, t, "nhwc"),
        lambda c, t: plan.local_best(graph, c, t),
        lambda c, t: plan.local_best(graph, c, t, None, "nchw")]
    for make in plans:
        assert (make(kept, only_named).total_seconds
                == pytest.approx(make(candidates, everywhere).total_seconds))
    assert not everywhere.estimated and not only_named.estimated


def test_transforms_from_records_time_each_shapes_pairs_and_the_plan_reads_them(tmp_path,
                                                                                 cli):
    """The command end to end on net_suite: transforms.parquet holds exactly each shape's
    pairs, glue.parquet each glue op in its shape's layouts, and convbench plan plans from
    them without leaving out a kept variant."""
    import pandas as pd

    from convbench.harness import transform_run
    from convbench.spec.suite import load_suite

    path = tmp_path / "records.jsonl"
    path.write_text("".join([
        _net_record("c3x3", 1.0e-3, {"ic_bn": 8, "oc_bn": 16}),
        _net_record("c3x3", 1.0e-3),
        _net_record("c1x1", 1.0e-3, {"ic_bn": 16, "oc_bn": 16}),
        _net_record("c3x3s", 1.0e-3, {"ic_bn": 16, "oc_bn": 8})]))
    by_shape = transform_run.shape_layouts(load_suite(str(NET_SUITE)), path)
    code, out, err = cli("transforms", NET_SUITE, "--records", path, "-o", tmp_path / "tr")
    assert code == 0, err
    assert "layouts: nchw, nhwc, nchw8c, nchw16c; 36 transforms on 4 tensor shapes" in out
    frame = pd.read_parquet(tmp_path / "tr" / "transforms.parquet")
    assert sorted(zip(frame.c, frame.h, frame.from_layout, frame.to_layout, frame.cache,
                      strict=True)) == sorted(
        (s[1], s[2], a, b, cache) for s, here in by_shape.items() for a in here for b in here
        if a != b for cache in ("cold-weights", "warm"))
    assert (frame.status == "ok").all()
    glue = pd.read_parquet(tmp_path / "tr" / "glue.parquet")
    for row in glue.itertuples():
        assert row.layout in by_shape[1, row.c, row.h, row.w], row
    assert set(glue.layout[glue.c == 20]) == {"nchw", "nhwc", "nchw8c"}   # the global pool
    code, out, err = cli("plan", NET_SUITE, "--records", path, "--transforms", tmp_path / "tr")
    assert code == 0, err
    assert "left out" not in out and "scaled from the nearest" not in out


def test_within_keeps_the_layouts_of_a_block_every_layer_writes(tmp_path):
    """A block every layer has a record writing stays timed however slow its variants ran
    (the one-block plan, NeoCPU section 3.2, needs its layouts on every shape: VGG-16's
    blocked variants ran over 1.1x its NHWC Winograd and no one-block plan could be made);
    a block one layer lacks does not, and a layer's record reading another block is not
    added where it has one reading the block itself."""
    from convbench.harness import transform_run
    from convbench.spec.suite import load_suite

    path = tmp_path / "records.jsonl"
    path.write_text("".join([
        *(_net_record(layer, 1.0e-3) for layer in ("c3x3", "c1x1", "c3x3s")),   # nhwc
        *(_net_record(layer, 2.0e-3, {"ic_bn": 8, "oc_bn": 8})
          for layer in ("c3x3", "c1x1", "c3x3s")),
        _net_record("c3x3", 3.0e-3, {"ic_bn": 16, "oc_bn": 8}),
        _net_record("c1x1", 3.0e-3, {"ic_bn": 4, "oc_bn": 4})]))     # 4: c1x1's alone
    suite = load_suite(str(NET_SUITE))
    held = ("nchw", "nhwc", "nchw8c")
    assert transform_run.shape_layouts(suite, path, within=1.1) == {
        (1, 16, 4, 4): held, (1, 16, 8, 8): held, (1, 20, 1, 1): held, (1, 20, 4, 4): held}
    assert transform_run.record_layouts(path, within=1.1) == held


@pytest.mark.parametrize("in_place", [False, True])
def test_a_glue_ops_cold_weights_twin_reads_the_real_input_and_leaves_the_rest_cold(in_place):
    """The twin runs the op on the real first input (the op before it just wrote it) and on
    its own copies of the shortcut and the output, so a cold-weights call finds the first
    input warm and its output and shortcut untouched; in place, the output is that input."""
    from convbench.harness.transform_worker import glue_twin
    from convbench.network import glue

    key = glue.GlueKey("add", (1, 16, 4, 4), inputs=2, in_place=in_place)
    rng = np.random.default_rng(0)
    first, shortcut = (rng.standard_normal(key.shape).astype(np.float32) for _ in range(2))
    out = first if in_place else np.full(key.shape, 7.0, np.float32)
    ins = [first, shortcut]
    before = [a.copy() for a in (first, shortcut, out)]
    glue_twin(key, ins, out, "nchw", 16)(first, out)
    assert np.array_equal(shortcut, before[1])          # the real shortcut: not the twin's
    if in_place:   # the add over its first input, as the pass runs it: first += shortcut
        np.testing.assert_allclose(first, before[0] + before[1], rtol=1e-6)
    else:          # the real first input read, the real output untouched
        assert np.array_equal(first, before[0]) and np.array_equal(out, before[2])


def test_same_memory_is_the_same_block():
    """NCHW[C]c is NHWC and NCHW[1]c NCHW byte for byte; a block that pads (x > C) or cuts
    (x < C) is not."""
    assert transforms.same_memory(64, "nchw64c", "nhwc")
    assert transforms.same_memory(16, "nchw1c", "nchw")
    assert transforms.same_memory(3, "nchw3c", "nhwc")
    assert not transforms.same_memory(3, "nchw64c", "nhwc")
    assert not transforms.same_memory(64, "nchw16c", "nhwc")
    assert transforms.same_memory(1, "nchw", "nhwc")   # one channel: every layout alike
    x = np.arange(2 * 64 * 3 * 5, dtype=np.float32).reshape(2, 64, 3, 5)
    np.testing.assert_array_equal(layouts.to_layout(x, "nchw64c").reshape(-1),
                                  layouts.to_layout(x, "nhwc").reshape(-1))
