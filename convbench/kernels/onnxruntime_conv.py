"""ONNX Runtime's CPU convolution (MLAS kernels) on a one-node model, a library baseline.

Source: ONNX Runtime, CPUExecutionProvider, whose float32 Conv runs on MLAS.

The model is one ONNX ``Conv`` built in memory (weights as an initializer), run with the
settings users run: graph optimisation ``ORT_ENABLE_ALL``, sequential execution, one
inter-op thread and ``numba.get_num_threads()`` intra-op threads (the harness sets numba's
threads before a build).  ORT's idle intra-op threads spin after a run by default, which
slowed the next kernel of a sweep 14x on the Intel host; a 50 us spin avoided that without
slowing ORT (BRIEF, 2026-11-23), so every session sets ``session.intra_op.spin_duration_us``.
Input and output are bound to the harness's buffers with an IOBinding: ``run`` allocates
and copies nothing beyond ORT's own intermediates.

Layouts:

- ``nchw``: the model as deployed.  ORT's NCHWc transformer rewrites the Conv into
  ReorderInput -> NCHWc Conv -> ReorderOutput where MLAS has an NCHWc kernel (AVX2: 8-wide
  blocks, AVX-512: 16), and the reorders are part of the time.  ``info()["ort_nodes"]``
  names the nodes ORT actually runs.
- ``nchw8c`` / ``nchw16c``: only the NCHWc Conv on blocked buffers, the counterpart of
  convbench's own ``nchwc``.  ORT rewrites a Conv whose channels are padded to whole blocks
  (its own weight reorder, MLAS's OIHWBiBo / OIHWBo), and the ReorderInput/ReorderOutput
  nodes are cut out of the optimised graph, whose NCHWc tensors ((N, C_padded, H, W) to
  ORT, blocked in memory) are then exactly convbench's (N, C/x, H, W, x) buffers.  The
  layout whose block is not MLAS's on this host is skipped with the reason.
- ``nhwc``: skipped.  The CPU provider has no channels-last float32 Conv ("NhwcConv",
  "NhwcFusedConv" and com.ms.internal.nhwc Conv have no CPU kernel in 1.32); an NHWC model's
  Transposes are folded into the NCHWc reorders (ReorderInput/ReorderOutput with
  ``channels_last=1``), so the conv itself still runs NCHWc.

onnxruntime and onnx are optional: without them every variant is skipped with the reason,
and nothing here imports them until a build (or a blocked layout's applicability check).
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections import Counter
from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np

from convbench.kernels import layouts
from convbench.kernels.base import Algorithm, ParamValue, Prepared
from convbench.spec.problem import ConvProblem

# Idle spin of ORT's intra-op threads after a run (see the module docstring).
SPIN_KEY, SPIN_US = "session.intra_op.spin_duration_us", 50
GRAPH_OPTIMISATION = "ORT_ENABLE_ALL"
NCHWC_DOMAIN = "com.microsoft.nchwc"
# Conv's opset and the oldest IR version that holds it (ONNX 1.12's pair): onnx writes its own
# newest IR by default, which an older onnxruntime refuses ("Unsupported model IR version").
OPSET = 17
IR_VERSION = 8
NHWC_REASON = ("ORT's CPU provider has no channels-last float32 Conv; an NHWC model's "
               "Transposes fold into the NCHWc reorders, the conv itself runs NCHWc")


def missing_dependency() -> str | None:
    """The reason every variant is skipped, or None when onnxruntime and onnx import."""
    for name in ("onnxruntime", "onnx"):
        if importlib.util.find_spec(name) is None:
            return f"{name} not installed"
    return None


def _session_options(threads: int, optimised_path: str) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, GRAPH_OPTIMISATION)
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry(SPIN_KEY, str(SPIN_US))
    options.optimized_model_filepath = optimised_path
    options.log_severity_level = 3  # each save warns that the model is hardware specific
    return options


def optimised_session(model: Any, threads: int, profile_prefix: str | None = None
                      ) -> tuple[Any, Any]:
    """An ORT session on ``model`` and the graph ORT optimised from it (what it runs);
    ``profile_prefix``: ORT's profiler on, its JSON written there by ``end_profiling``."""
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "optimised.onnx")
        options = _session_options(threads, path)
        if profile_prefix:
            options.enable_profiling = True
            options.profile_file_prefix = profile_prefix
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        return session, onnx.load(path)


def conv_node(problem: ConvProblem, names: tuple[str, str, str], group: int) -> Any:
    """The ONNX Conv node of ``problem``, ``names`` = (input, weights, output) tensors;
    benchdnn's dh/dw are dilation minus one."""
    from onnx import helper

    p = problem
    return helper.make_node("Conv", list(names[:2]), [names[2]], kernel_shape=[p.kh, p.kw],
                            strides=[p.sh, p.sw], pads=[p.ph, p.pw, p.ph, p.pw],
                            dilations=[p.dh + 1, p.dw + 1], group=group)


def onnx_model(graph: Any) -> Any:
    """``graph`` as a model of :data:`OPSET` written in IR :data:`IR_VERSION`."""
    from onnx import helper

    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             ir_version=IR_VERSION)


def _conv_model(problem: ConvProblem, w: np.ndarray, channels: tuple[int, int], group: int
                ) -> Any:
    """One ONNX Conv of ``problem`` on ``channels`` = (in, out) channels and OIHW ``w``
    (padded to those channels by the caller)."""
    from onnx import TensorProto, helper, numpy_helper

    p = problem
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [p.mb, channels[0], p.ih, p.iw])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                      [p.mb, channels[1], p.oh, p.ow])
    graph = helper.make_graph([conv_node(p, ("x", "w", "y"), group)], "conv", [x], [y],
                              [numpy_helper.from_array(np.ascontiguousarray(w, np.float32), "w")])
    return onnx_model(graph)


def _node_name(node: Any) -> str:
    """A node's op type, an NCHWc Conv marked "Conv(nchwc)"."""
    return node.op_type + ("(nchwc)" if node.op_type == "Conv" and node.domain == NCHWC_DOMAIN
                           else "")


def _node_names(model: Any) -> str:
    """The optimised graph's nodes in order: "ReorderInput>Conv(nchwc)>..."."""
    return ">".join(_node_name(n) for n in model.graph.node)


def node_counts(model: Any) -> dict[str, int]:
    """How many nodes of each kind the optimised graph runs, most first."""
    return dict(Counter(_node_name(n) for n in model.graph.node).most_common())


def _nchwc_conv(model: Any) -> Any | None:
    """The NCHWc Conv node of an optimised one-conv model, None when ORT did not rewrite."""
    convs = [n for n in model.graph.node if n.op_type == "Conv" and n.domain == NCHWC_DOMAIN]
    return convs[0] if len(convs) == 1 else None


@cache
def load_failure() -> str | None:
    """Why this onnxruntime cannot run a one-Conv model (None when it can): a skip reason
    for every ORT variant instead of a traceback that stops the sweep."""
    try:
        mlas_nchwc_block()
    except Exception as exc:  # any ORT or onnx failure: the reason is what matters
        return f"onnxruntime cannot load a one-Conv model here: {str(exc).splitlines()[0]}"
    return None


@cache
def mlas_nchwc_block() -> int:
    """MLAS's NCHWc block on this host (16 with AVX-512, 8 with AVX2; 1: no NCHWc kernels).

    MLAS does not export ``MlasNchwcGetBlockSize`` to Python; ORT's transformer pads a
    1-output-channel Conv's weights to one block, so the reordered weights' first dimension
    is the block."""
    model = _conv_model(ConvProblem.make(ic=1, oc=1, ih=1, kh=1), np.ones((1, 1, 1, 1)),
                        (1, 1), 1)
    _, optimised = optimised_session(model, 1)
    conv = _nchwc_conv(optimised)
    if conv is None:
        return 1
    weights = {t.name: t for t in optimised.graph.initializer}
    return int(weights[conv.input[1]].dims[0])


def _ceil_to(n: int, block: int) -> int:
    return -(-n // block) * block


def _blocked_reason(problem: ConvProblem, layout: str) -> str | None:
    block = layouts.block_size(layout)
    mlas = mlas_nchwc_block()
    if block != mlas:
        return (f"MLAS's NCHWc block here is {mlas} (nchw{mlas}c)" if mlas > 1 else
                "MLAS has no NCHWc kernels on this host")
    if problem.g == 1 or problem.is_depthwise:
        return None
    if problem.icg % mlas or problem.ocg % mlas:
        return (f"ORT's NCHWc Conv takes groups only as depthwise (multiplier 1) or with "
                f"whole {mlas}-channel blocks per group")
    return None


def _applies(problem: ConvProblem, layout: str, params: Mapping[str, ParamValue]
             ) -> str | None:
    missing = missing_dependency()
    if missing is not None:
        return missing
    if layout == "nhwc":
        return NHWC_REASON
    failure = load_failure()
    if failure is not None:
        return failure
    if layouts.block_size(layout) is not None:
        return _blocked_reason(problem, layout)
    return None


class OrtConv(Prepared):
    """A session on one Conv, input and output bound to the harness's buffers.

    ``nchw``: the Conv as users run it.  Blocked layouts: ORT's NCHWc Conv alone, channels
    zero padded to whole blocks (``info()`` records the padded counts)."""

    def __init__(self, problem: ConvProblem, w: np.ndarray, layout: str):
        import numba
        import onnxruntime as ort

        self.version = ort.__version__
        self.p = problem
        self.in_layout = self.out_layout = layout
        self.threads = numba.get_num_threads()
        self.block = layouts.block_size(layout)
        if self.block is None:
            channels = (problem.ic, problem.oc)
            self.session, optimised = optimised_session(
                _conv_model(problem, w, channels, problem.g), self.threads)
        else:
            channels = (_ceil_to(problem.ic, self.block), _ceil_to(problem.oc, self.block))
            self.session, optimised = self._blocked_session(w, channels)
        self.channels = channels
        self.nodes = _node_names(optimised)
        self._weight_and_workspace_bytes(optimised)
        self.shapes = ((problem.mb, channels[0], problem.ih, problem.iw),
                       (problem.mb, channels[1], problem.oh, problem.ow))
        self.binding = self.session.io_binding()
        self._bound: tuple[np.ndarray, np.ndarray] | None = None

    def _blocked_session(self, w: np.ndarray, channels: tuple[int, int]) -> tuple[Any, Any]:
        """A session running only ORT's NCHWc Conv, on blocked input and output."""
        from onnx import TensorProto, helper

        p = self.p
        group = channels[0] if p.is_depthwise else p.g
        padded = np.zeros((channels[1], channels[0] // group, p.kh, p.kw), np.float32)
        padded[:p.oc, :p.icg] = w
        _, optimised = optimised_session(_conv_model(p, padded, channels, group), self.threads)
        conv = _nchwc_conv(optimised)
        if conv is None or len(optimised.graph.node) > 3:
            raise RuntimeError(f"ORT did not rewrite the padded Conv into one NCHWc Conv "
                               f"(ran {_node_names(optimised)})")
        alone = helper.make_node(conv.op_type, ["x", *conv.input[1:]], ["y"],
                                 domain=conv.domain)
        alone.attribute.extend(conv.attribute)
        x, y = (helper.make_tensor_value_info(name, TensorProto.FLOAT, [p.mb, c, h, w])
                for name, c, h, w in (("x", channels[0], p.ih, p.iw),
                                      ("y", channels[1], p.oh, p.ow)))
        graph = helper.make_graph(
            [alone], "nchwc_conv", [x], [y],
            [t for t in optimised.graph.initializer if t.name in conv.input[1:]])
        model = helper.make_model(graph, opset_imports=list(optimised.opset_import),
                                  ir_version=optimised.ir_version)
        session, rerun = optimised_session(model, self.threads)
        if _node_names(rerun) != "Conv(nchwc)":
            raise RuntimeError(f"the NCHWc-only model ran {_node_names(rerun)}")
        return session, rerun

    def _weight_and_workspace_bytes(self, optimised: Any) -> None:
        from onnx import numpy_helper

        conv = _nchwc_conv(optimised)
        if conv is None:
            return
        weights = {t.name: t for t in optimised.graph.initializer}
        self.packed_weight_bytes = numpy_helper.to_array(weights[conv.input[1]]).nbytes
        if self.block is None:  # the reorders' NCHWc tensors between them and the conv
            nodes = _node_names(optimised).split(">")
            p, blk = self.p, mlas_nchwc_block()
            self.workspace_bytes = 4 * p.mb * (
                ("ReorderInput" in nodes) * _ceil_to(p.ic, blk) * p.ih * p.iw
                + _ceil_to(p.oc, blk) * p.oh * p.ow)

    def _bind(self, x: np.ndarray, y: np.ndarray) -> None:
        for name, a in (("x", x), ("y", y)):
            if not (a.flags.c_contiguous and a.dtype == np.float32):
                raise ValueError(f"{name} must be a C-contiguous float32 array")
        self.binding.bind_input("x", "cpu", 0, np.float32, self.shapes[0], x.ctypes.data)
        self.binding.bind_output("y", "cpu", 0, np.float32, self.shapes[1], y.ctypes.data)
        self._bound = (x, y)  # held, so the bound memory stays theirs

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        bound = self._bound
        if bound is None or bound[0] is not x or bound[1] is not y:
            self._bind(x, y)
        self.session.run_with_iobinding(self.binding)

    def info(self) -> dict[str, ParamValue]:
        out: dict[str, ParamValue] = {
            "onnxruntime": self.version, "mlas_nchwc_block": mlas_nchwc_block(),
            "ort_threads": self.threads, "ort_graph_optimization": GRAPH_OPTIMISATION,
            "ort_spin": f"{SPIN_KEY}={SPIN_US}", "ort_nodes": self.nodes}
        if self.block is not None:
            out["ort_in_channels"], out["ort_out_channels"] = self.channels
        return out


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    return OrtConv(problem, w, layout)


ALGORITHMS = [
    Algorithm(
        name="onnxruntime",
        title="ONNX Runtime (CPU provider, MLAS)",
        source="ONNX Runtime CPUExecutionProvider, MLAS kernels (onnxruntime on PyPI)",
        layouts=("nchw", "nhwc", "nchw8c", "nchw16c"),
        build=_build,
        applies=_applies,
        baseline=True,
        notes="Library baseline.  nchw: as deployed, ORT's NCHWc reorders timed; "
              "nchw{x}c: ORT's NCHWc Conv alone on blocked buffers (x = MLAS's block); "
              "nhwc skipped (no channels-last float32 Conv in the CPU provider).  "
              "Optional: needs onnxruntime and onnx.",
    )
]
