"""The global layout plan: one variant per conv of a network, chosen for the whole network at
once (NeoCPU, seed 002, section 3.3.2, Algorithm 2).

Each conv can run any measured *candidate* of its layer: a variant with the activation
layout it reads, the layout it writes and its time.  Where a tensor's consumer needs
another layout than the one its producer wrote, that edge pays a transform.  Glue ops
(relu, pools) run in whatever layout their input arrives in and keep it; an ``add`` needs
its inputs in one layout, so it takes one input's layout and the others are transformed to
it (the paper's rule).  The network input arrives in NCHW and the output is delivered in
NCHW.  A tensor whose two layouts hold the same bytes (NCHW[C]c and NHWC, NCHW[1]c and
NCHW: :func:`convbench.kernels.transforms.same_memory`) moves between them for free.  The
plan minimises the sum of conv times, glue times and transform times.  A glue op
the network pass runs in the stores of the conv before it costs nothing: a relu or relu6
right after a conv (or after an add run that way), an add right after one of its convs
(the fusion sites, ``sites``: :func:`convbench.network.executor.fusion_sites`), where the
chosen candidate fuses that kind (:attr:`Candidate.fuses`) and the op runs in the layout
the conv writes.  So a plan is charged what its pass runs, and a candidate that fuses its
relu is not judged by a relu it never pays.

The search is exact: a dynamic program over the ops in execution order whose state is the
layout of every *live* tensor (produced and still awaiting a consumer).  Which tensors are
live after each op does not depend on the choices, so two partial plans with the same live
layouts are interchangeable from there on and only the cheaper one is kept.  With V
candidates per conv (V <= the number of (in, out) layout pairs after pruning) and L
layouts, an op costs at most L^live x V steps; a chain network has one live tensor and a
residual network at most two, so a ResNet-50 plans in milliseconds.  A graph with many
concurrently live tensors (concatenations) would grow as L^live: the paper's register
allocation heuristic is the answer there, not needed for the suites we ship.

Also computed, for comparison: the best plan with every tensor the network computes in one
layout (all-NCHW, all-NHWC, and all-NCHW[x]c with one block x for the whole network: the
paper's section 3.2 and Table 3's "transform elimination" row, which its global search
beat by 1.1-1.5x; transforms at the network's edges only); the *local* plans, NeoCPU's
local search without its global step (each conv keeps its own fastest candidate, as tuned
in isolation, and the tensors between pay what those choices force: ``local-best`` with the
glue ops free to run in their input's layout, ``local-best-nchw-glue`` with every glue op in
NCHW as in a framework whose relu, pooling and add know only NCHW -- the paper's Table 3
compares these steps, 1.1-1.5x each); and the per-layer bound (each conv's fastest
candidate, transforms ignored): no plan can beat it, and no real plan reaches it when the
fastest candidates disagree on layouts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from convbench.errors import ConvbenchError
from convbench.kernels.layouts import block_size
from convbench.kernels.transforms import same_memory

Shape = tuple[int, int, int, int]
TransformSeconds = Callable[[Shape, str, str], float]
# a glue op's seconds when run in a layout (convbench.plan.costs.GlueTable)
GlueSeconds = Callable[["OpLike", str], float]
NETWORK_INPUT = "input"
PLAIN = "nchw"


class PlanError(ConvbenchError):
    """No plan can be made: a conv layer without costs, a graph the planner cannot read."""


class OpLike(Protocol):
    """What the planner reads of an op (convbench.spec.network.Op)."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def inputs(self) -> tuple[str, ...]: ...
    @property
    def layer(self) -> str | None: ...


class GraphLike(Protocol):
    """What the planner reads of a network (convbench.spec.network.Network)."""

    @property
    def ops(self) -> tuple[OpLike, ...]: ...
    @property
    def output(self) -> str: ...
    def shape(self, tensor: str) -> Shape: ...


@dataclass(frozen=True)
class Candidate:
    """One way to run a conv layer: a variant, the layouts it reads and writes, its time."""

    variant_id: str
    in_layout: str
    out_layout: str
    seconds: float
    fuses: frozenset[str] = frozenset()   # glue op kinds it runs in its stores


@dataclass(frozen=True)
class EdgeTransform:
    """``tensor`` converted from ``src`` to ``dst`` for ``consumer`` (an op, or "output")."""

    tensor: str
    consumer: str
    shape: Shape
    src: str
    dst: str
    seconds: float


@dataclass(frozen=True)
class Step:
    """What one op does in a plan: its candidate (convs), the layout it writes, what it
    costs and the transforms on its inputs, with why they are paid."""

    op: str
    kind: str
    layer: str | None
    candidate: Candidate | None
    layout: str
    seconds: float
    transforms: tuple[EdgeTransform, ...] = ()
    why: str = ""
    fused_into: str | None = None   # the conv whose stores run this glue op (seconds: as glue)

    @property
    def transform_seconds(self) -> float:
        return sum(t.seconds for t in self.transforms)

    @property
    def charged_seconds(self) -> float:
        """What the op costs in the plan: nothing when it runs in a conv's stores."""
        return 0.0 if self.fused_into else self.seconds


@dataclass(frozen=True)
class Plan:
    """A complete assignment; ``bound`` marks the per-layer bound, which is no real plan."""

    label: str
    steps: tuple[Step, ...]
    output_transform: EdgeTransform | None = None
    bound: bool = False

    @property
    def op_seconds(self) -> float:
        return sum(s.charged_seconds for s in self.steps)

    @property
    def transform_seconds(self) -> float:
        tail = self.output_transform.seconds if self.output_transform else 0.0
        return sum(s.transform_seconds for s in self.steps) + tail

    @property
    def total_seconds(self) -> float:
        return self.op_seconds + self.transform_seconds

    @property
    def transforms(self) -> tuple[EdgeTransform, ...]:
        tail = (self.output_transform,) if self.output_transform else ()
        return tuple(t for s in self.steps for t in s.transforms) + tail


@dataclass(frozen=True)
class _Choice:
    """One option of one op from one state: the candidate or layout taken, its own time,
    whether it runs in the previous conv's stores (then it is charged nothing) and the
    epilogues the next op could still fuse into (:attr:`Candidate.fuses`)."""

    candidate: Candidate | None
    layout: str
    seconds: float
    transforms: tuple[EdgeTransform, ...]
    fused: bool = False
    after: frozenset[str] = frozenset()

    @property
    def charged(self) -> float:
        return (0.0 if self.fused else self.seconds) + sum(e.seconds for e in self.transforms)


@dataclass
class _Problem:
    graph: GraphLike
    costs: Mapping[str, Sequence[Candidate]]
    transform_seconds: TransformSeconds
    glue_seconds: GlueSeconds | None = None   # None: glue counted as free
    glue_layout: str | None = None            # every glue op runs in it (None: DP's choice)
    sites: Mapping[str, str] = field(default_factory=dict)   # glue op -> kind it fuses as

    def edge(self, tensor: str, consumer: str, src: str, dst: str) -> tuple[EdgeTransform, ...]:
        shape = self.graph.shape(tensor)
        if src == dst or same_memory(shape[1], src, dst):   # (a view: nothing to pay)
            return ()
        return (EdgeTransform(tensor, consumer, shape, src, dst,
                              float(self.transform_seconds(shape, src, dst))),)

    def glue(self, op: OpLike, layout: str) -> float:
        return 0.0 if self.glue_seconds is None else float(self.glue_seconds(op, layout))

    def candidates(self, op: OpLike) -> list[Candidate]:
        """The layer's candidates, only the fastest of each (in, out) layout pair and
        epilogues: the others can never be in an optimal plan (same transforms, same glue
        fused, more time)."""
        if op.layer is None or not self.costs.get(op.layer):
            raise PlanError(f"conv {op.name}: no costs for layer {op.layer!r}")
        best: dict[tuple[str, str, frozenset[str]], Candidate] = {}
        for c in self.costs[op.layer]:
            key = (c.in_layout, c.out_layout, c.fuses)
            if key not in best or c.seconds < best[key].seconds:
                best[key] = c
        return list(best.values())

    def choices(self, op: OpLike, live: Mapping[str, str], before: str | None,
                epilogues: frozenset[str]) -> list[_Choice]:
        """``op``'s options where ``before`` ran just before it and its kernel can still
        run ``epilogues`` in its stores."""
        if op.kind == "conv":
            (tensor,) = op.inputs
            return [_Choice(c, c.out_layout, c.seconds,
                            self.edge(tensor, op.name, live[tensor], c.in_layout),
                            after=c.fuses)
                    for c in self.candidates(op)]
        # one input's layout for all (a single-input op keeps its input's layout)
        targets = ((self.glue_layout,) if self.glue_layout
                   else dict.fromkeys(live[t] for t in op.inputs))
        kind = self.sites.get(op.name)
        out = []
        for target in targets:
            # in the layout the conv (or the add it ran) wrote: no transform of its output
            fused = kind in epilogues and live.get(before) == target
            out.append(_Choice(None, target, self.glue(op, target),
                               tuple(e for t in op.inputs
                                     for e in self.edge(t, op.name, live[t], target)),
                               fused, epilogues - {"add"} if fused and kind == "add"
                               else frozenset()))
        return out


def _last_uses(graph: GraphLike) -> list[set[str]]:
    """After op i, the tensors no later op reads (the network output stays live)."""
    last: dict[str, int] = {}
    for i, op in enumerate(graph.ops):
        for t in op.inputs:
            last[t] = i
    dying: list[set[str]] = [set() for _ in graph.ops]
    for tensor, i in last.items():
        if tensor != graph.output:
            dying[i].add(tensor)
    return dying


# ((tensor, layout) of every live tensor, sorted; the glue op kinds the last op's kernel
# can still run in its stores)
State = tuple[tuple[tuple[str, str], ...], frozenset[str]]


def optimal(graph: GraphLike, costs: Mapping[str, Sequence[Candidate]],
            transform_seconds: TransformSeconds, glue_seconds: GlueSeconds | None = None,
            label: str = "optimal", glue_layout: str | None = None,
            sites: Mapping[str, str] | None = None) -> Plan:
    """The cheapest plan: the dynamic program over live-tensor layouts described above
    (``glue_layout``: every glue op runs in that layout, its inputs transformed to it;
    ``sites``: the glue ops a conv's stores may run, by the kind they fuse as)."""
    problem = _Problem(graph, costs, transform_seconds, glue_seconds, glue_layout,
                       dict(sites or {}))
    dying = _last_uses(graph)
    read = {t for op in graph.ops for t in op.inputs} | {graph.output}
    # a state is the live layouts and what the last op's kernel can still fuse: only where
    # the next op is a fusion site, so states that differ in nothing else still merge
    states: dict[State, float] = {(((NETWORK_INPUT, PLAIN),), frozenset()): 0.0}
    # per op: new state -> (previous state, choice); enough to walk the best plan back
    back: list[dict[State, tuple[State, _Choice]]] = []
    ops = graph.ops
    for i, op in enumerate(ops):
        following: dict[State, float] = {}
        came: dict[State, tuple[State, _Choice]] = {}
        site_next = i + 1 < len(ops) and ops[i + 1].name in problem.sites
        for state, cost in states.items():
            held, epilogues = state
            live = dict(held)
            missing = [t for t in op.inputs if t not in live]
            if missing:
                raise PlanError(f"op {op.name} reads {missing[0]!r}, which no earlier op "
                                "produces")
            before = ops[i - 1].name if i else None
            for choice in problem.choices(op, live, before, epilogues):
                after = {t: layout for t, layout in live.items() if t not in dying[i]}
                if op.name in read:
                    after[op.name] = choice.layout
                key = (tuple(sorted(after.items())), choice.after if site_next else frozenset())
                total = cost + choice.charged
                if key not in following or total < following[key]:
                    following[key], came[key] = total, (state, choice)
        states = following
        back.append(came)
    # deliver the output in NCHW
    best_state, best_total, best_tail = None, float("inf"), ()
    for state, cost in states.items():
        tail = problem.edge(graph.output, "output", dict(state[0])[graph.output], PLAIN)
        total = cost + sum(e.seconds for e in tail)
        if total < best_total:
            best_state, best_total, best_tail = state, total, tail
    if best_state is None:
        raise PlanError("the network has no ops")
    choices: list[_Choice] = []
    state = best_state
    for came in reversed(back):
        state, choice = came[state]
        choices.append(choice)
    choices.reverse()
    steps = _explain(problem, graph, choices)
    return Plan(label, steps, best_tail[0] if best_tail else None)


def _explain(problem: _Problem, graph: GraphLike, choices: list[_Choice]) -> tuple[Step, ...]:
    """The steps of a plan, each transform with the reason it is paid."""
    made: dict[str, str] = {NETWORK_INPUT: "the network input"}
    stores: dict[str, str] = {}   # op -> the conv whose stores wrote its result
    steps = []
    for i, (op, choice) in enumerate(zip(graph.ops, choices, strict=True)):
        into = stores.get(graph.ops[i - 1].name) if choice.fused else None
        if op.kind == "conv" or into:
            stores[op.name] = into or op.name
        reasons = [f"runs in {into}'s stores"] if into else []
        for e in choice.transforms:
            source = made.get(e.tensor, e.tensor)
            if op.kind == "conv" and choice.candidate is not None:
                reasons.append(_conv_reason(problem, op, choice, e, source))
            else:
                reasons.append(f"pays {e.src}->{e.dst} on {e.tensor} because its inputs "
                               f"arrive in different layouts ({source} gives {e.src}) and "
                               f"it runs in {e.dst}")
        made[op.name] = f"{op.name} ({choice.candidate.variant_id})" if choice.candidate \
            else op.name
        steps.append(Step(op.name, op.kind, op.layer, choice.candidate, choice.layout,
                          choice.seconds, choice.transforms, "; ".join(reasons), into))
    return tuple(steps)


def _conv_reason(problem: _Problem, op: OpLike, choice: _Choice, e: EdgeTransform,
                 source: str) -> str:
    chosen = choice.candidate
    assert chosen is not None
    stay = [c for c in problem.candidates(op) if c.in_layout == e.src]
    text = (f"pays {e.src}->{e.dst} ({_us(e.seconds)}) because {source} delivers {e.src} "
            f"and {chosen.variant_id} reads {e.dst}")
    if not stay:
        return text + f"; no measured candidate reads {e.src}"
    best_stay = min(stay, key=lambda c: c.seconds)
    return (text + f"; the fastest {e.src} reader, {best_stay.variant_id}, takes "
            f"{_us(best_stay.seconds)} against {_us(chosen.seconds)} + the transform "
            "(and what it writes suits the ops after it less)")


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us"


def one_layout(graph: GraphLike, costs: Mapping[str, Sequence[Candidate]],
               transform_seconds: TransformSeconds, layout: str,
               glue_seconds: GlueSeconds | None = None,
               input_layouts: frozenset[str] = frozenset(),
               sites: Mapping[str, str] | None = None) -> Plan | str:
    """The best plan with every tensor the network computes in ``layout``: every conv writes
    it and reads it, except that a conv reading the network input may also read one of
    ``input_layouts`` (transformed at the network's edge, as ``layout`` itself would be);
    the reason when some conv has no such candidate."""
    convs = [op for op in graph.ops if op.kind == "conv"]
    # a layer that runs the stem and a later conv too keeps the later conv's rule: one
    # candidate list per layer (no shipped network has such a layer)
    stem = ({op.layer for op in convs if NETWORK_INPUT in op.inputs}
            - {op.layer for op in convs if NETWORK_INPUT not in op.inputs})

    def reads(layer: str, c: Candidate) -> bool:
        return c.in_layout == layout or (layer in stem and c.in_layout in input_layouts)

    kept = {layer: [c for c in cands if c.out_layout == layout and reads(layer, c)]
            for layer, cands in costs.items()}
    for op in graph.ops:
        if op.kind == "conv" and op.layer is not None and not kept.get(op.layer):
            return f"layer {op.layer} has no measured {layout} candidate"
    try:
        return optimal(graph, kept, transform_seconds, glue_seconds, label=f"all-{layout}",
                       sites=sites)
    except PlanError as exc:   # a glue op or a transform not timed in this layout
        return str(exc)


def one_block(graph: GraphLike, costs: Mapping[str, Sequence[Candidate]],
              transform_seconds: TransformSeconds, glue_seconds: GlueSeconds | None = None,
              sites: Mapping[str, str] | None = None
              ) -> tuple[Plan | str, dict[str, Plan | str]]:
    """NeoCPU's section 3.2 plan: one block x for every tensor the network computes
    (all-NCHW[x]c), the stem reading any blocked layout of the input (3 channels fill no
    block of 8).  The best over every x some candidate writes, and each x's plan or
    reason, smallest x first."""
    written = {c.out_layout for cands in costs.values() for c in cands}
    read = {c.in_layout for cands in costs.values() for c in cands}
    blocks = sorted((lay for lay in written if block_size(lay)), key=block_size)
    stem_reads = frozenset(lay for lay in read if block_size(lay))
    each = {lay: one_layout(graph, costs, transform_seconds, lay, glue_seconds, stem_reads,
                            sites)
            for lay in blocks}
    plans = [p for p in each.values() if isinstance(p, Plan)]
    if not plans:
        return ("no block x serves every conv (each block's reason: all-nchwxc per block)"
                if each else "no measured candidate writes a blocked layout"), each
    return min(plans, key=lambda p: p.total_seconds), each


def local_best(graph: GraphLike, costs: Mapping[str, Sequence[Candidate]],
               transform_seconds: TransformSeconds, glue_seconds: GlueSeconds | None = None,
               glue_layout: str | None = None, sites: Mapping[str, str] | None = None
               ) -> Plan:
    """NeoCPU's local search alone: every conv runs its layer's fastest candidate whatever
    its neighbours read and write, and the tensors between pay the transforms that forces
    (the cheapest such plan: where an add's inputs disagree, the better side).  With
    ``glue_layout`` every glue op runs in that layout, so each conv followed by glue
    transforms its output back (a framework whose glue ops know only NCHW)."""
    fastest = {layer: [min(cands, key=lambda c: c.seconds)]
               for layer, cands in costs.items() if cands}
    label = "local best" + (f", glue in {glue_layout}" if glue_layout else "")
    return optimal(graph, fastest, transform_seconds, glue_seconds, label=label,
                   glue_layout=glue_layout, sites=sites)


def per_layer_bound(graph: GraphLike, costs: Mapping[str, Sequence[Candidate]],
                    glue_seconds: GlueSeconds | None = None,
                    sites: Mapping[str, str] | None = None) -> Plan:
    """Each conv's fastest candidate with transforms ignored, each glue op in its fastest
    layout, or free at a fusion site some candidate of its conv fuses (a plan may run it
    there): a lower bound, not a plan."""
    problem = _Problem(graph, costs, lambda shape, src, dst: 0.0, glue_seconds)
    sites = sites or {}
    held = {PLAIN} | {layout for cands in costs.values() for c in cands
                      for layout in (c.in_layout, c.out_layout)}
    steps: list[Step] = []
    can: frozenset[str] = frozenset()   # what some candidate of the last conv could still fuse
    for op in graph.ops:
        if op.kind == "conv":
            cands = problem.candidates(op)
            best = min(cands, key=lambda c: c.seconds)
            steps.append(Step(op.name, op.kind, op.layer, best, best.out_layout, best.seconds,
                              why="fastest candidate, transforms ignored"))
            can = frozenset().union(*(c.fuses for c in cands))
            continue
        kind = sites.get(op.name)
        into = None
        if kind in can:
            into = next(s.op for s in reversed(steps) if s.kind == "conv")
        steps.append(Step(op.name, op.kind, op.layer, None, "",
                          _fastest_glue(problem, op, held), fused_into=into,
                          why=f"may run in {into}'s stores" if into else ""))
        can = can - {"add"} if into and kind == "add" else frozenset()
    return Plan("per-layer bound (transforms ignored)", tuple(steps), bound=True)


def _fastest_glue(problem: _Problem, op: OpLike, held: set[str]) -> float:
    """The glue op's least time over the layouts it was timed in: ``convbench transforms
    --records`` times a glue op only in the layouts the plan's candidates read or write on
    its tensor's shape, and no plan can hold that tensor in another."""
    timed = []
    for layout in sorted(held):
        try:
            timed.append(problem.glue(op, layout))
        except PlanError:
            continue
    return min(timed) if timed else problem.glue(op, PLAIN)   # none: say what to measure
