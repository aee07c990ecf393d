"""oneDNN through PyTorch, two library baselines: ``torch_eager`` and prepacked ``onednn``.

Source: oneDNN (v3.x, the copy inside the PyTorch CPU wheel), called through
``torch.nn.functional.conv2d`` (eager) and through ``torch.ops.mkldnn._convolution_pointwise``
with weights from ``torch.ops.mkldnn._reorder_convolution_weight`` (what
``torch.compile``'s CPU freezing pass emits for inference).

``torch_eager`` is what a user's eager model runs.  torch picks a backend per call: oneDNN
(``Mkldnn``), which reorders the plain OIHW weights into its blocked format on *every* call
(``ONEDNN_VERBOSE=1`` shows a weight ``reorder`` before each ``convolution``), or, for small
inputs (batch 1, 3x3 or smaller kernels, under 20480 input elements, one group) and for 1x1
convolutions on one thread, its own im2col + MKL GEMM (``Slow2d``), which is not oneDNN at
all.  ``info()`` records the backend torch chose.

``onednn`` is oneDNN as inference uses it: ``build`` reorders the weights once into the
blocked format oneDNN picks for this problem's input shape, and ``run`` calls the
convolution primitive with them; the verbose log shows one ``convolution`` and no
``reorder`` per call (``tests/kernels/test_onednn.py`` checks it).  That path computes in
channels_last: with ``nhwc`` activations nothing is converted; with ``nchw`` torch
transposes the input to channels_last inside the op and ``run`` transposes the output back
(both timed, both part of what an NCHW caller of this path pays).  Two other ways torch
offers still reorder the weights on every call (verbose log, torch 2.13): a module frozen by
``torch.jit.freeze`` + ``torch.jit.optimize_for_inference``, and
``torch.utils.mkldnn.to_mkldnn(module)``; both run the training-kind kernel, which wants
another blocked weight format than the one they prepacked.

Neither replaces the other (rough, 1 thread, one process interleaving both, machine shared,
2026-11-23): on res5b_branch2b (``mb1ic512ih7oc512oh7kh3ph1``, 9.4 MB of weights) eager took
1.85x (nchw) and 2.16x (nhwc) the prepacked time; on small 1x1 layers eager runs ``Slow2d``
and was faster (``mb1ic96ih14oc24oh14kh1``: 0.45x nchw, 0.64x nhwc), the prepacked call
costing 20-40 us more per call; ``mb1ic64ih56oc64oh56kh1`` nhwc was even (1.04), nchw 0.60x
(the transposes).  So both are swept, and a layer's best library time is the faster one.

Both variants let torch allocate the output, so ``run`` copies it into the harness's
buffer: one output-sized copy, part of the measured time.  The one op that writes into a
given tensor (``_convolution_pointwise_``) only fuses a binary ``add`` into it, which would
need the buffer zeroed on each call: a memset plus a read of the output in place of a copy
(measured: no faster than the copy, which cost 1-5% of the prepacked call on the layers above).
Layouts: NCHW, and NHWC as torch's ``channels_last`` (the NHWC buffer viewed as an NCHW
tensor with channels innermost).  Threads follow numba's setting, which the harness controls.

torch is an optional extra (``pip install convbench[onednn]``): without it every variant is
skipped with the reason "torch not installed", and nothing here imports it until a build.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

import numpy as np

from convbench.kernels.base import Algorithm, ParamValue, Prepared
from convbench.spec.problem import ConvProblem

_MEMORY_FORMAT = {"nchw": "contiguous_format", "nhwc": "channels_last"}


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


class _TorchConv(Prepared):
    """What both torch paths share: threads, views of the harness's buffers, info."""

    def __init__(self, problem: ConvProblem, layout: str):
        import numba
        import torch

        self.torch = torch
        self.p = problem
        self.in_layout = self.out_layout = layout
        self.memory_format = getattr(torch, _MEMORY_FORMAT[layout])
        self._threads(numba.get_num_threads())

    def _threads(self, n: int) -> None:
        if self.torch.get_num_threads() != n:
            self.torch.set_num_threads(n)

    def _as_nchw(self, a: np.ndarray) -> Any:
        """A torch NCHW-shaped view of a numpy buffer in this variant's layout (no copy)."""
        t = self.torch.from_numpy(a)
        return t.permute(0, 3, 1, 2) if self.in_layout == "nhwc" else t

    def _conv(self, x: Any) -> Any:
        raise NotImplementedError

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        import numba

        self._threads(numba.get_num_threads())
        with self.torch.no_grad():
            self._as_nchw(y).copy_(self._conv(self._as_nchw(x)))

    def info(self) -> dict[str, ParamValue]:
        return {"torch": self.torch.__version__,
                "mkldnn": bool(self.torch.backends.mkldnn.is_available()),
                "torch_threads": self.torch.get_num_threads(),
                "output_copy": True}


class TorchConv(_TorchConv):
    """Eager ``conv2d`` on the plain OIHW weights (in the activations' memory format)."""

    def __init__(self, problem: ConvProblem, w: np.ndarray, layout: str):
        super().__init__(problem, layout)
        self.weight = self.torch.from_numpy(np.ascontiguousarray(w, np.float32)).to(
            memory_format=self.memory_format)
        self.packed_weight_bytes = self.weight.numel() * 4 if layout == "nhwc" else 0

    def _conv(self, x: Any) -> Any:
        p = self.p
        return self.torch.nn.functional.conv2d(
            x, self.weight, None, stride=(p.sh, p.sw), padding=(p.ph, p.pw),
            dilation=(p.dh + 1, p.dw + 1), groups=p.g)

    def backend(self) -> str:
        """The backend eager torch picks for this problem at the current thread count
        (``Mkldnn``, ``Slow2d``, ...), from torch's private selector; "unknown" if absent."""
        p, torch = self.p, self.torch
        x = torch.empty(p.input_shape).to(memory_format=self.memory_format)
        try:
            chosen = torch._C._select_conv_backend(
                x, self.weight, None, [p.sh, p.sw], [p.ph, p.pw], [p.dh + 1, p.dw + 1],
                False, [0, 0], p.g, None)
        except (AttributeError, RuntimeError, TypeError):
            return "unknown"
        return str(chosen).rpartition(".")[2]

    def info(self) -> dict[str, ParamValue]:
        backend = self.backend()
        weights = ("reordered per call" if backend.startswith("Mkldnn") else
                   "used as is" if backend != "unknown" else "unknown")
        return {**super().info(), "weights": weights, "backend": backend}


class PrepackedConv(_TorchConv):
    """oneDNN's inference convolution on weights reordered once, in ``build``."""

    def __init__(self, problem: ConvProblem, w: np.ndarray, layout: str):
        super().__init__(problem, layout)
        torch, p = self.torch, problem
        self.args = ([p.ph, p.pw], [p.sh, p.sw], [p.dh + 1, p.dw + 1], p.g)
        dense = torch.from_numpy(np.ascontiguousarray(w, np.float32))
        # An opaque oneDNN tensor in the blocked format chosen for this input shape.
        self.weight = torch.ops.mkldnn._reorder_convolution_weight(
            dense, *self.args, list(p.input_shape))
        self.packed_weight_bytes = int(torch.ops.mkldnn._nbytes(self.weight))

    def _conv(self, x: Any) -> Any:
        return self.torch.ops.mkldnn._convolution_pointwise(
            x, self.weight, None, *self.args, "none", [], "")

    def info(self) -> dict[str, ParamValue]:
        return {**super().info(), "weights": "reordered once in build",
                "computes_in": "channels_last"}


def _applies(problem: ConvProblem, layout: str, params: Mapping[str, ParamValue]
             ) -> str | None:
    return None if torch_available() else "torch not installed"


def _build_eager(problem: ConvProblem, w: np.ndarray, layout: str,
                 params: Mapping[str, ParamValue]) -> Prepared:
    return TorchConv(problem, w, layout)


def _build_prepacked(problem: ConvProblem, w: np.ndarray, layout: str,
                     params: Mapping[str, ParamValue]) -> Prepared:
    return PrepackedConv(problem, w, layout)


ALGORITHMS = [
    Algorithm(
        name="torch_eager",
        title="framework eager: reorders weights every call",
        source="oneDNN (or torch's im2col + MKL) via torch.nn.functional.conv2d, PyTorch CPU",
        layouts=("nchw", "nhwc"),
        build=_build_eager,
        applies=_applies,
        baseline=True,
        notes="framework eager: reorders weights every call.  What an eager PyTorch model "
              "runs; torch picks oneDNN or its own im2col + MKL GEMM per problem (info: "
              "backend).  NHWC is torch's channels_last.  Output copied into the harness's "
              "buffer.  Optional: needs torch (pip install convbench[onednn]).",
    ),
    Algorithm(
        name="onednn",
        title="oneDNN, weights prepacked once (PyTorch mkldnn ops)",
        source="oneDNN via torch.ops.mkldnn._convolution_pointwise on weights from "
               "torch.ops.mkldnn._reorder_convolution_weight (PyTorch CPU build)",
        layouts=("nchw", "nhwc"),
        build=_build_prepacked,
        applies=_applies,
        baseline=True,
        notes="oneDNN as inference runs it: weights reordered once in build, no reorder per "
              "call.  Computes in channels_last: nchw pays an input and an output transpose "
              "per call.  Output copied into the harness's buffer.  Optional: needs torch "
              "(pip install convbench[onednn]).",
    ),
]
