"""oneDNN through PyTorch: ``torch.nn.functional.conv2d`` on CPU, a library baseline.

PyTorch's CPU convolution dispatches to oneDNN (mkldnn) for float32.  Layouts: NCHW, and
NHWC as torch's ``channels_last`` (the NHWC buffer viewed as an NCHW tensor with channels
innermost, weights converted likewise), which oneDNN usually runs best.  torch allocates
its output, so ``run`` copies it into the harness's buffer (one output-sized memcpy, part
of the measured time).  Threads follow numba's setting, which the harness controls.

torch is an optional extra (``pip install convbench[onednn]``): without it every variant is
skipped with the reason "torch not installed", and nothing here imports it until a build.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping

import numpy as np

from convbench.kernels.base import Algorithm, ParamValue, Prepared
from convbench.spec.problem import ConvProblem

_MEMORY_FORMAT = {"nchw": "contiguous_format", "nhwc": "channels_last"}


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


class TorchConv(Prepared):
    def __init__(self, problem: ConvProblem, w: np.ndarray, layout: str):
        import numba
        import torch

        self.torch = torch
        self.p = problem
        self.in_layout = self.out_layout = layout
        self.memory_format = getattr(torch, _MEMORY_FORMAT[layout])
        self.weight = torch.from_numpy(np.ascontiguousarray(w, np.float32)).to(
            memory_format=self.memory_format)
        self.packed_weight_bytes = self.weight.numel() * 4 if layout == "nhwc" else 0
        self._threads(numba.get_num_threads())

    def _threads(self, n: int) -> None:
        if self.torch.get_num_threads() != n:
            self.torch.set_num_threads(n)

    def _as_nchw(self, a: np.ndarray):
        """A torch NCHW-shaped view of a numpy buffer in this variant's layout (no copy)."""
        t = self.torch.from_numpy(a)
        return t.permute(0, 3, 1, 2) if self.in_layout == "nhwc" else t

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        import numba

        p = self.p
        self._threads(numba.get_num_threads())
        with self.torch.no_grad():
            out = self.torch.nn.functional.conv2d(
                self._as_nchw(x), self.weight, None, stride=(p.sh, p.sw),
                padding=(p.ph, p.pw), dilation=(p.dh + 1, p.dw + 1), groups=p.g)
            self._as_nchw(y).copy_(out)

    def info(self) -> dict[str, ParamValue]:
        return {"torch": self.torch.__version__,
                "mkldnn": bool(self.torch.backends.mkldnn.is_available()),
                "torch_threads": self.torch.get_num_threads()}


def _applies(problem: ConvProblem, layout: str, params: Mapping[str, ParamValue]
             ) -> str | None:
    return None if torch_available() else "torch not installed"


def _build(problem: ConvProblem, w: np.ndarray, layout: str,
           params: Mapping[str, ParamValue]) -> Prepared:
    return TorchConv(problem, w, layout)


ALGORITHMS = [
    Algorithm(
        name="onednn",
        title="oneDNN (PyTorch conv2d)",
        source="oneDNN via torch.nn.functional.conv2d (PyTorch CPU build)",
        layouts=("nchw", "nhwc"),
        build=_build,
        applies=_applies,
        baseline=True,
        notes="Library baseline; NHWC is torch's channels_last.  Optional: needs torch "
              "(pip install convbench[onednn]).",
    )
]
