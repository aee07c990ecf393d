"""A library baseline of a network pass: ONNX Runtime over the same graph, one session.

The whole graph -- every conv (its float32 weights as initializers, the same as the plan's
pass), relu, relu6 (``Clip``), max and average pooling (``count_include_pad=1``) and the
residual adds -- is one ONNX model run by one ``InferenceSession`` with the settings of
:mod:`convbench.kernels.onnxruntime_conv` (``ORT_ENABLE_ALL``, ``intra_op_num_threads`` =
the pass's threads, the same 50 us idle spin).  So ORT prepacks the weights once at load
and does to the graph what it does in deployment: its NCHWc transformer reorders the
activations once for the chain of convs, and Conv+Relu, Conv+Clip and Conv+Add+Relu fuse.
The plan's pass fuses a relu or relu6, and a residual add, into the conv before it where
its kernel can (:func:`convbench.network.executor.fusible`,
:func:`convbench.network.executor.residual_fusible`), so the comparison is ours against the
library as inference runs it, not op against op (the oneDNN pass is that one).

Why a second library pass: per layer, ONNX Runtime is mostly the fastest library, but at 2
threads its per-layer cold-weights times hold thread-pool wake-ups a pass does not pay (each
session owns its pool, and the cold protocol's twin is another session:
:meth:`convbench.harness.coldcache.Evictor.before_twin`).  One session for the whole graph
runs every conv on one pool, awake from node to node, as a deployed model does: the fair
cold comparison with the fastest library at any thread count.

The input and output are bound to numpy buffers with an IOBinding; the tensors in between
are ORT's own, and with fusion most do not exist, so only the network's output is checked
against the float64 reference.  onnxruntime and onnx are optional: :func:`unavailable` says
why the pass cannot be built.

:meth:`OrtPass.profile` times each node inside the pass with ORT's own profiler, in a
second session (the profiler costs the timed one nothing), and names each node by the op of
ours it computes: ORT names a fused node after its conv or its activation (``conv1_2`` +
``relu1_2`` runs as ``relu1_2_nchwc``), so an activation's name is followed back to its
conv; the reorders ORT inserts count as the transforms of the op after them.  On the Zen 5
host the profiler's kernel times of a one-conv session matched the session's Python-timed
call within ~1 us (it adds 5-20 us to a whole run, outside the kernels).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from convbench.kernels import onnxruntime_conv as ort_conv
from convbench.spec.network import INPUT, Network, Op

# relu6 as ONNX Clip (opset >= 11 takes its bounds as inputs)
RELU6_BOUNDS = ("relu6_min", "relu6_max")


def unavailable() -> str | None:
    """Why the ONNX Runtime pass cannot run here; None when it can."""
    return ort_conv.missing_dependency() or ort_conv.load_failure()


def _node(network: Network, op: Op) -> Any:
    from onnx import helper

    if op.kind == "conv":
        problem = network.problem(op)
        return ort_conv.conv_node(problem, (op.inputs[0], f"{op.name}.w", op.name), problem.g)
    if op.kind == "relu":
        return helper.make_node("Relu", list(op.inputs), [op.name])
    if op.kind == "relu6":
        return helper.make_node("Clip", [op.inputs[0], *RELU6_BOUNDS], [op.name])
    if op.kind in ("maxpool", "avgpool"):
        window = dict(kernel_shape=[op.k, op.k], strides=[op.s, op.s], pads=[op.p] * 4)
        if op.kind == "maxpool":
            return helper.make_node("MaxPool", list(op.inputs), [op.name], **window)
        return helper.make_node("AveragePool", list(op.inputs), [op.name],
                                count_include_pad=1, **window)
    if op.kind == "add":
        return helper.make_node("Add" if len(op.inputs) == 2 else "Sum", list(op.inputs),
                                [op.name])
    raise ValueError(f"no ONNX op for {op.kind!r}")


def network_model(network: Network, weights: Mapping[str, np.ndarray]) -> Any:
    """``network`` as one ONNX model: input ``input`` (NCHW), output the network's output,
    ``weights`` (OIHW per conv op) as initializers."""
    from onnx import TensorProto, helper, numpy_helper

    def value(name: str) -> Any:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                             list(network.shape(name)))

    initializers = [numpy_helper.from_array(np.ascontiguousarray(weights[op.name], np.float32),
                                            f"{op.name}.w") for op in network.convs]
    if any(op.kind == "relu6" for op in network.ops):
        initializers += [numpy_helper.from_array(np.array(bound, np.float32), name)
                         for name, bound in zip(RELU6_BOUNDS, (0.0, 6.0), strict=True)]
    nodes = [_node(network, op) for op in network.ops]
    for node, op in zip(nodes, network.ops, strict=True):
        node.name = op.name   # ORT's rewritten and fused nodes keep one of these names
    graph = helper.make_graph(nodes, "network", [value(INPUT)], [value(network.output)],
                              initializers)
    return ort_conv.onnx_model(graph)


def _our_op(ops: Mapping[str, Op], node_name: str) -> str | None:
    """The op of ours (``ops``: the network's, by name) an ORT node computes: the conv of a
    conv node named after its activation, else the op of that name; None for nodes ORT
    added (reorders)."""
    op = ops.get(node_name.removesuffix("_nchwc"))
    while op is not None and op.kind in ("relu", "relu6") and op.inputs[0] in ops:
        producer = ops[op.inputs[0]]
        if producer.kind not in ("conv", "relu", "relu6", "add"):
            break
        op = producer
    return op.name if op is not None else None


def _interquartile_mean(values: list[float]) -> float:
    """The mean of the middle half: ORT's profiler counts whole microseconds, so a median
    of a 3 us node is a whole number; the mean of the middle half is finer and as robust."""
    ordered = sorted(values)
    quarter = len(ordered) // 4
    middle = ordered[quarter:len(ordered) - quarter] or ordered
    return sum(middle) / len(middle)


class OrtPass:
    """``network`` in one ONNX Runtime session; call it to run one pass on :attr:`input`
    (NCHW numpy) into :meth:`output`."""

    def __init__(self, network: Network, weights: Mapping[str, np.ndarray], threads: int):
        self.network = network
        self.threads = threads
        self.model = network_model(network, weights)
        self.session, optimised = ort_conv.optimised_session(self.model, threads)
        # what ORT runs after its rewrites, e.g. {"Conv(nchwc)": 53, "ReorderInput": 1}
        self.nodes = ort_conv.node_counts(optimised)
        self.input = np.zeros(network.input_shape, np.float32)
        self._output = np.zeros(network.shape(network.output), np.float32)
        self.binding = self._bind(self.session)

    def _bind(self, session: Any) -> Any:
        binding = session.io_binding()
        binding.bind_input(INPUT, "cpu", 0, np.float32, self.input.shape,
                           self.input.ctypes.data)
        binding.bind_output(self.network.output, "cpu", 0, np.float32, self._output.shape,
                            self._output.ctypes.data)
        return binding

    def __call__(self) -> None:
        self.session.run_with_iobinding(self.binding)

    def profile(self, repeats: int) -> dict[tuple[str, str], float]:
        """Seconds per (op, part) inside the pass, as the plan's pass profiles itself
        (:meth:`convbench.network.executor.NetworkPass.profile`): ORT's kernel time of each
        node over ``repeats`` passes (after one untimed), the interquartile mean per node,
        summed per (op of ours, part); part "op", or "transforms" for ORT's reorders
        (op "output" for those after the last op)."""
        from convbench.network.executor import OP, OUTPUT, TRANSFORMS

        with tempfile.TemporaryDirectory() as tmp:
            session, _ = ort_conv.optimised_session(self.model, self.threads,
                                                    os.path.join(tmp, "profile"))
            binding = self._bind(session)
            for _ in range(repeats + 1):
                session.run_with_iobinding(binding)
            with open(session.end_profiling()) as f:
                events = json.load(f)
        per_node: dict[str, list[float]] = {}
        for e in events:   # in execution order, one event per node and run
            if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
                per_node.setdefault(e["name"].removesuffix("_kernel_time"), []).append(
                    e["dur"] * 1e-6)
        ops = {op.name: op for op in self.network.ops}
        total: dict[tuple[str, str], float] = {}
        waiting: list[float] = []   # reorders: charged to the next op of ours
        for node, seconds in per_node.items():
            value = _interquartile_mean(seconds[1:] or seconds)
            op = _our_op(ops, node)
            if op is None:
                waiting.append(value)
                continue
            total[op, OP] = total.get((op, OP), 0.0) + value
            if waiting:
                total[op, TRANSFORMS] = total.get((op, TRANSFORMS), 0.0) + sum(waiting)
                waiting = []
        if waiting:
            total[OUTPUT, TRANSFORMS] = sum(waiting)
        return total

    def output(self) -> np.ndarray:
        return self._output


def pass_tensors(p: OrtPass) -> dict[str, np.ndarray]:
    """The network's output of the last call (the only tensor the session gives back)."""
    return {p.network.output: p.output()}
