"""The network graph: a suite's conv layers in execution order with the glue between them.

A suite lists each distinct conv shape once with a count; its :class:`Network` says in
which order the occurrences run and what connects them (relu, pooling, residual adds), so
a whole network can be planned (layouts chosen across layers, NeoCPU's global search) and
executed (:mod:`convbench.network.reference`).  Every op outputs one tensor named after the
op; the network's input tensor is named ``input``.  Tensors are NCHW, shapes are
``(mb, c, h, w)``.  Batch norm is folded into the convs (inference), so it has no op.

Construction validates the graph (:func:`check`) so a Network built in code is as sound as
one read from YAML; :mod:`convbench.spec.network_parse` turns the same errors into located
suite errors.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from convbench.errors import ConvbenchError
from convbench.spec.limits import MAX_LAYER_BYTES, MAX_NETWORK_OPS, format_bytes, shown
from convbench.spec.problem import FLOAT32_BYTES, ConvProblem

Shape = tuple[int, int, int, int]

INPUT = "input"
KINDS = ("conv", "relu", "relu6", "maxpool", "avgpool", "add")
POOLS = ("maxpool", "avgpool")
# Ops that map one tensor to one of the same shape.
ELEMENTWISE = ("relu", "relu6")


class NetworkError(ConvbenchError):
    """A graph that cannot run: ``index`` is the offending op (None: the whole network),
    ``field`` the op's field (``from``, ``layer``, ``k``, ...)."""

    def __init__(self, message: str, index: int | None = None, field: str | None = None):
        super().__init__(message)
        self.index = index
        self.field = field


@dataclass(frozen=True)
class Op:
    """One operator; ``name`` is unique and also names the tensor it outputs."""

    name: str
    kind: str                    # one of KINDS
    inputs: tuple[str, ...]      # tensor names: "input" or earlier ops' names
    layer: str | None = None     # kind == "conv": the suite layer's name
    k: int = 0                   # pools: square window k x k (global avgpool: k = input's h)
    s: int = 1                   # pools: stride
    p: int = 0                   # pools: padding (max pool pads with -inf, avg pool with 0)


def pool_output(size: int, k: int, s: int, p: int) -> int:
    """Output extent of a k-window pool with stride s and padding p (floor mode: PyTorch's
    default ``ceil_mode=False``)."""
    return (size + 2 * p - k) // s + 1


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _op_shape(op: Op, index: int, ins: list[Shape], problems: dict[str, ConvProblem]) -> Shape:
    """Output shape of ``op`` from its input shapes, or a NetworkError saying why not."""
    if op.kind == "conv":
        problem = problems.get(op.layer or "")
        if problem is None:
            raise NetworkError(f"unknown layer {shown(op.layer)}", index, "layer")
        if ins[0] != problem.input_shape:
            raise NetworkError(
                f"input {shown(op.inputs[0])} has shape {ins[0]} (mb, c, h, w) but layer "
                f"{shown(problem.name)} takes {problem.input_shape}", index, "from")
        return problem.output_shape
    if op.kind in ELEMENTWISE:
        return ins[0]
    if op.kind == "add":
        for name, shape in zip(op.inputs[1:], ins[1:], strict=True):
            if shape != ins[0]:
                raise NetworkError(
                    f"adds tensors of different shapes: {shown(op.inputs[0])} is {ins[0]}, "
                    f"{shown(name)} is {shape} (mb, c, h, w)", index, "from")
        return ins[0]
    # a pool
    for fld, value, least in (("k", op.k, 1), ("s", op.s, 1), ("p", op.p, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise NetworkError(f"expected an integer >= {least}, got {shown(value)}", index, fld)
    mb, c, h, w = ins[0]
    oh, ow = pool_output(h, op.k, op.s, op.p), pool_output(w, op.k, op.s, op.p)
    if oh <= 0 or ow <= 0:
        raise NetworkError(f"a {op.k}x{op.k} window with stride {op.s} and padding {op.p} "
                           f"does not fit the {h}x{w} input {shown(op.inputs[0])} (output "
                           f"{oh}x{ow})", index, "k")
    if op.p * 2 > op.k:   # PyTorch's rule; p >= k would leave windows of padding only
        raise NetworkError(f"padding {op.p} is more than half the window {op.k} (PyTorch's "
                           f"limit: a window must hold input, not only padding)", index, "p")
    return (mb, c, oh, ow)


def check(input_shape: Shape, ops: Iterable[Op],
          layers: Iterable[ConvProblem]) -> dict[str, Shape]:
    """Validate a graph and return every tensor's shape (``input`` included).

    Raises :class:`NetworkError` naming the op and field for: an unknown kind, a duplicate or
    reserved name, an unknown or not yet defined input, the wrong number of inputs, an
    unknown layer, a conv input that is not its layer's input shape, an add of different
    shapes, a pool window that does not fit, a tensor past the size limit, an op whose output
    nobody uses (the last op's excepted).
    """
    ops = tuple(ops)
    if not ops:
        raise NetworkError("a network needs at least one op")
    if len(ops) > MAX_NETWORK_OPS:
        raise NetworkError(f"{len(ops)} ops, more than the limit of {MAX_NETWORK_OPS} "
                           f"(convbench.spec.limits.MAX_NETWORK_OPS)")
    if len(input_shape) != 4 or not all(_positive_int(n) for n in input_shape):
        raise NetworkError(f"input shape must be 4 positive integers (mb, c, h, w), got "
                           f"{shown(input_shape)}")
    problems: dict[str, ConvProblem] = {p.name: p for p in layers}
    shapes: dict[str, Shape] = {INPUT: tuple(input_shape)}
    position = {op.name: i for i, op in reversed(list(enumerate(ops)))}
    for i, op in enumerate(ops):
        if op.kind not in KINDS:
            raise NetworkError(f"unknown op {shown(op.kind)}; expected one of "
                               f"{', '.join(KINDS)}", i, "op")
        if op.name == INPUT:
            raise NetworkError(f"the name {INPUT!r} is the network's input", i, "name")
        if op.name in shapes:
            raise NetworkError(f"duplicate op name {shown(op.name)} (first at ops"
                               f"[{position[op.name]}])", i, "name")
        arity = "at least 2" if op.kind == "add" else "exactly 1"
        if len(op.inputs) < 2 if op.kind == "add" else len(op.inputs) != 1:
            raise NetworkError(f"{op.kind} takes {arity} input(s), got {len(op.inputs)}",
                               i, "from")
        for name in op.inputs:
            if name not in shapes:
                later = position.get(name)
                why = ("no such tensor" if later is None else "an op cannot read its own "
                       "output" if later == i else f"it is defined later (ops[{later}]): "
                       "ops run in the order listed")
                raise NetworkError(f"unknown input {shown(name)}: {why}", i, "from")
        if op.kind != "conv" and op.layer is not None:
            raise NetworkError(f"only a conv names a layer, not a {op.kind}", i, "layer")
        shape = _op_shape(op, i, [shapes[name] for name in op.inputs], problems)
        size = FLOAT32_BYTES * shape[0] * shape[1] * shape[2] * shape[3]
        if size > MAX_LAYER_BYTES:
            raise NetworkError(f"output {shape} needs {format_bytes(size)}, more than the "
                               f"limit of {format_bytes(MAX_LAYER_BYTES)} "
                               f"(convbench.spec.limits.MAX_LAYER_BYTES)", i)
        shapes[op.name] = shape
    used = {name for op in ops for name in op.inputs}
    if INPUT not in used:
        raise NetworkError(f"no op reads the network's input {INPUT!r}", 0, "from")
    for i, op in enumerate(ops[:-1]):
        if op.name not in used:
            raise NetworkError(f"the output of {shown(op.name)} is never used (only the last "
                               f"op's output may be unused)", i, "name")
    return shapes


@dataclass(frozen=True)
class Network:
    """A suite's network: ops in execution order (topological), validated on construction.

    ``layers`` holds the conv layers the ops name (a suite's problems), so shapes can be
    inferred; it is an addition to the agreed interface, given by the suite loader.
    """

    title: str
    input_shape: Shape                          # (mb, c, h, w)
    ops: tuple[Op, ...]                         # execution order (topological)
    layers: tuple[ConvProblem, ...] = ()
    _shapes: dict[str, Shape] = field(init=False, repr=False, compare=False, hash=False)
    _consumers: dict[str, tuple[Op, ...]] = field(init=False, repr=False, compare=False,
                                                 hash=False)
    _ops: dict[str, Op] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "layers", tuple(self.layers))
        object.__setattr__(self, "input_shape", tuple(self.input_shape))
        object.__setattr__(self, "_shapes", check(self.input_shape, self.ops, self.layers))
        consumers: dict[str, list[Op]] = {name: [] for name in self._shapes}
        for op in self.ops:
            for name in dict.fromkeys(op.inputs):   # an op reading a tensor twice counts once
                consumers[name].append(op)
        object.__setattr__(self, "_consumers", {k: tuple(v) for k, v in consumers.items()})
        object.__setattr__(self, "_ops", {op.name: op for op in self.ops})

    def shape(self, tensor: str) -> Shape:
        """``(mb, c, h, w)`` of ``tensor`` (``input`` or an op's name); KeyError if none."""
        return self._shapes[tensor]

    def consumers(self, tensor: str) -> tuple[Op, ...]:
        """The ops reading ``tensor``, in execution order."""
        return self._consumers[tensor]

    def op(self, name: str) -> Op:
        return self._ops[name]

    @property
    def output(self) -> str:
        """The network's output tensor: the last op's."""
        return self.ops[-1].name

    @property
    def convs(self) -> tuple[Op, ...]:
        return tuple(op for op in self.ops if op.kind == "conv")

    def problem(self, op: str | Op) -> ConvProblem:
        """The conv layer (problem) a conv op runs."""
        layer = (self.op(op) if isinstance(op, str) else op).layer
        return next(p for p in self.layers if p.name == layer)

    def occurrences(self) -> Counter[str]:
        """Layer name -> number of conv ops running it."""
        return Counter(op.layer for op in self.convs if op.layer is not None)

    def kinds(self) -> Counter[str]:
        """Op kind -> number of ops, in :data:`KINDS` order."""
        counts = Counter(op.kind for op in self.ops)
        return Counter({kind: counts[kind] for kind in KINDS if counts[kind]})
