"""XNNPACK through LiteRT (the TensorFlow Lite runtime): a library baseline.

Source: XNNPACK (github.com/google/XNNPACK, QNNPACK's successor), run as LiteRT's default
CPU delegate from the ``ai-edge-litert`` package (the x86 torch wheel has XNNPACK disabled).

Each problem becomes a one-operator ``.tflite`` model written here with the flatbuffer
classes LiteRT ships (``ai_edge_litert.schema_py_generated``), so TensorFlow is not needed:
CONV_2D (weights OHWI; grouped when IC/g < IC, which XNNPACK runs natively) or, when every
group has one input channel, DEPTHWISE_CONV_2D (weights 1HWO, depth multiplier OC/IC).
Weights and a zero bias (the XNNPACK delegate rejects an absent one) are constant buffers,
so XNNPACK packs them once when the delegate prepares the graph, inside ``build``.

TFLite knows only SAME and VALID padding.  VALID is our padding 0; SAME pads
``total = max((ceil(I/S) - 1) * S + (K - 1) * D + 1 - I, 0)`` with ``total // 2`` before and
the rest after, so it equals our symmetric padding only where ``total == 2 * p``.  Not for
ResNet's stride-2 3x3 pad-1 layers on even inputs (SAME pads 0 before, 1 after): those
problems are skipped with the reason, never run with other padding.

The Python interpreter owns its input and output tensors, so ``run`` copies ``x`` in
(``set_tensor``, as users of the API do) and the output out into ``y``; both copies are
timed (``io=copy``): measured apart, they were 0.2-8% of ``run`` on ResNet-50's res2 and
res5 layers but 16-24% on MobileNet V2's 56x56 and 7x7 depthwise and pointwise layers
(1 thread, 2026-11-23, a loaded 2-core host: rough).  LiteRT's CompiledModel
can bind host memory instead, but only as a 1-D buffer (the model then needs RESHAPE
operators) and it silently binds a copy of arrays that are not 64-byte aligned, so it
is not offered.  Threads: numba's setting at build.

ai-edge-litert is optional: without it every variant is skipped with the reason
"ai-edge-litert not installed", and nothing here imports it until a build.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping

import numpy as np

from convbench.kernels.base import Algorithm, Param, ParamValue, Prepared
from convbench.spec.problem import ConvProblem

_IO = Param("io", ("copy",), "copy",
            "how the harness's x and y reach the interpreter: copy = set_tensor in and one "
            "copy out, both timed")


def litert_available() -> bool:
    return importlib.util.find_spec("ai_edge_litert") is not None


def _same_padding(i: int, k: int, s: int, d: int) -> tuple[int, int]:
    """(before, after) padding of TFLite's SAME along one axis (d is dilation minus one)."""
    out = -(-i // s)
    total = max((out - 1) * s + (k - 1) * (d + 1) + 1 - i, 0)
    return total // 2, total - total // 2


def tflite_padding(problem: ConvProblem) -> str | None:
    """"VALID" or "SAME" where it pads exactly as ``problem`` does, else None."""
    p = problem
    if p.ph == 0 and p.pw == 0:
        return "VALID"
    if (_same_padding(p.ih, p.kh, p.sh, p.dh) == (p.ph, p.ph)
            and _same_padding(p.iw, p.kw, p.sw, p.dw) == (p.pw, p.pw)):
        return "SAME"
    return None


def _is_depthwise(problem: ConvProblem) -> bool:
    """One input channel per group: TFLite's DEPTHWISE_CONV_2D (multiplier OC/IC)."""
    return problem.g > 1 and problem.g == problem.ic


def one_op_model(problem: ConvProblem, w_oihw: np.ndarray) -> bytes:
    """A ``.tflite`` flatbuffer computing ``problem`` (NHWC float32) with ``w_oihw`` constant."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as tfl

    p = problem
    depthwise = _is_depthwise(p)
    w = np.asarray(w_oihw, np.float32)
    # OIHW -> OHWI (CONV_2D) or, with one input channel per group, -> 1HWO (DEPTHWISE_CONV_2D)
    w_tfl = np.ascontiguousarray(w.transpose(1, 2, 3, 0) if depthwise else w.transpose(0, 2, 3, 1))

    def constant(array: np.ndarray) -> tfl.BufferT:
        buffer = tfl.BufferT()
        buffer.data = np.frombuffer(array.tobytes(), np.uint8)
        return buffer

    def tensor(name: str, shape: tuple[int, ...], buffer: int) -> tfl.TensorT:
        t = tfl.TensorT()
        t.name, t.shape, t.type, t.buffer = name, list(shape), tfl.TensorType.FLOAT32, buffer
        return t

    # buffer 0 is the schema's empty sentinel, used by tensors without constant data
    buffers = [tfl.BufferT(), constant(w_tfl), constant(np.zeros(p.oc, np.float32))]
    tensors = [tensor("x", (p.mb, p.ih, p.iw, p.ic), 0), tensor("w", w_tfl.shape, 1),
               tensor("bias", (p.oc,), 2), tensor("y", (p.mb, p.oh, p.ow, p.oc), 0)]

    if depthwise:
        code = tfl.BuiltinOperator.DEPTHWISE_CONV_2D
        options = tfl.DepthwiseConv2DOptionsT()
        options.depthMultiplier = p.oc // p.ic
        options_type = tfl.BuiltinOptions.DepthwiseConv2DOptions
    else:
        code = tfl.BuiltinOperator.CONV_2D
        options = tfl.Conv2DOptionsT()
        options_type = tfl.BuiltinOptions.Conv2DOptions
    options.padding = getattr(tfl.Padding, tflite_padding(p) or "")
    options.strideH, options.strideW = p.sh, p.sw
    options.dilationHFactor, options.dilationWFactor = p.dh + 1, p.dw + 1
    options.fusedActivationFunction = tfl.ActivationFunctionType.NONE

    op = tfl.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, [0, 1, 2], [3]
    op.builtinOptionsType, op.builtinOptions = options_type, options
    subgraph = tfl.SubGraphT()
    subgraph.tensors, subgraph.inputs, subgraph.outputs = tensors, [0], [3]
    subgraph.operators = [op]
    opcode = tfl.OperatorCodeT()
    opcode.builtinCode = opcode.deprecatedBuiltinCode = code
    opcode.version = 1
    model = tfl.ModelT()
    model.version, model.operatorCodes = 3, [opcode]
    model.subgraphs, model.buffers = [subgraph], buffers

    builder = flatbuffers.Builder(w_tfl.nbytes + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


class LiteRTConv(Prepared):
    """A one-op model in LiteRT's interpreter, its conv node replaced by XNNPACK's."""

    in_layout = out_layout = "nhwc"

    def __init__(self, problem: ConvProblem, w: np.ndarray):
        import numba
        from ai_edge_litert.interpreter import Interpreter

        self.threads = numba.get_num_threads()
        self.interpreter = Interpreter(model_content=one_op_model(problem, w),
                                       num_threads=self.threads)
        self.interpreter.allocate_tensors()
        ops = [op["op_name"] for op in self.interpreter._get_ops_details()]
        # The default delegate replaces the conv node with a DELEGATE node; without one the
        # builtin TFLite kernel would run, mislabelled as XNNPACK.
        if "DELEGATE" not in ops:
            raise RuntimeError(f"the XNNPACK delegate did not take the convolution: {ops}")
        self.input_index = self.interpreter.get_input_details()[0]["index"]
        self.output = self.interpreter.tensor(self.interpreter.get_output_details()[0]["index"])
        self.workspace_bytes = problem.input_bytes + problem.output_bytes  # interpreter's own
        self.packed_weight_bytes = problem.weight_bytes  # the model's OHWI constant

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        self.interpreter.set_tensor(self.input_index, x)
        self.interpreter.invoke()
        # the view must not outlive this call: invoke refuses while one is held
        np.copyto(y, self.output())

    def info(self) -> dict[str, ParamValue]:
        from importlib.metadata import version

        return {"litert": version("ai-edge-litert"), "delegate": "XNNPACK",
                "litert_threads": self.threads, "io": "copy"}


def _applies(problem: ConvProblem, layout: str, params: Mapping[str, ParamValue]
             ) -> str | None:
    if not litert_available():
        return "ai-edge-litert not installed"
    if tflite_padding(problem) is None:
        p = problem
        same_h = _same_padding(p.ih, p.kh, p.sh, p.dh)
        same_w = _same_padding(p.iw, p.kw, p.sw, p.dw)
        return (f"TFLite pads only VALID (0) or SAME (before, after: h={same_h}, w={same_w} "
                f"here), not ph={p.ph} pw={p.pw} on both sides")
    return None


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    return LiteRTConv(problem, w)


ALGORITHMS = [
    Algorithm(
        name="xnnpack",
        title="XNNPACK (LiteRT)",
        source="XNNPACK via LiteRT's default CPU delegate (ai-edge-litert), one-op model",
        layouts=("nhwc",),
        build=_build,
        params=(_IO,),
        applies=_applies,
        baseline=True,
        notes="Library baseline; SAME/VALID padding only.  The interpreter's input and "
              "output copies are timed.  Optional: needs ai-edge-litert.",
    )
]
