"""The library baseline of a network pass: oneDNN with prepacked weights over the same graph.

Every conv op is :class:`convbench.kernels.onednn.PrepackedConv` (weights reordered once,
at build, into oneDNN's blocked format for the op's input shape; the same float32 weights
as the plan's pass) and the glue is torch's (relu, clamp, max_pool2d, avg_pool2d with
``count_include_pad=True``, +), all on channels_last tensors: the prepacked convolution
computes in channels_last, so the whole chain stays in it and only the network's input and
output are converted, as a frozen torch model's would be.  relu is not fused into the
convs (``_convolution_pointwise``'s "relu" attribute could): the plan's pass does not fuse
either, so both run the same ops.  relu, relu6 and add run in place where the plan's pass
does (:func:`convbench.network.glue.in_place_input`, torch's ``relu_``, ``clamp_``,
``add_``); the other ops' outputs torch allocates per call, as a torch model does.

torch is optional: :func:`unavailable` says why the pass cannot be built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from convbench.kernels.onednn import PrepackedConv, torch_available
from convbench.network.glue import in_place_first, in_place_input, overwritten
from convbench.spec.network import INPUT, Network


def unavailable() -> str | None:
    """Why the oneDNN pass cannot run here; None when it can."""
    if not torch_available():
        return "torch not installed (pip install convbench[onednn])"
    import torch

    if not torch.backends.mkldnn.is_available():
        return "this torch build has no oneDNN (mkldnn)"
    return None


class OneDNNPass:
    """``network`` with prepacked oneDNN convs and torch glue; call it to run one pass on
    :attr:`input` (NCHW numpy, copied into a channels_last tensor per call: the pass's
    input conversion, which the plan's pass pays too when it transforms its input)."""

    def __init__(self, network: Network, weights: Mapping[str, np.ndarray]):
        import torch

        self.torch = torch
        self.network = network
        # which input each op overwrites: decided once, not in every timed pass
        self._in_place = {op.name: in_place_input(network, op) for op in network.ops}
        self.convs = {op.name: PrepackedConv(network.problem(op), weights[op.name], "nhwc")
                      for op in network.convs}
        self.input = np.zeros(network.input_shape, np.float32)
        self._input_t = torch.from_numpy(self.input)
        self._staged = torch.empty(network.input_shape).to(memory_format=torch.channels_last)
        self.tensors: dict[str, Any] = {}

    def __call__(self) -> None:
        torch, f = self.torch, self.torch.nn.functional
        with torch.no_grad():
            self._staged.copy_(self._input_t)
            t: dict[str, Any] = {INPUT: self._staged}
            for op in self.network.ops:
                i = self._in_place[op.name]
                x, *others = in_place_first([t[name] for name in op.inputs], i)
                if op.kind == "conv":
                    t[op.name] = self.convs[op.name]._conv(x)
                elif op.kind == "relu":
                    t[op.name] = torch.relu(x) if i is None else torch.relu_(x)
                elif op.kind == "relu6":
                    t[op.name] = (torch.clamp(x, 0.0, 6.0) if i is None
                                  else torch.clamp_(x, 0.0, 6.0))
                elif op.kind == "maxpool":
                    t[op.name] = f.max_pool2d(x, op.k, op.s, op.p)
                elif op.kind == "avgpool":
                    t[op.name] = f.avg_pool2d(x, op.k, op.s, op.p, count_include_pad=True)
                elif op.kind == "add":
                    total = x.add_(others[0]) if i is not None else x + others[0]
                    for more in others[1:]:
                        total += more
                    t[op.name] = total
                else:
                    raise ValueError(f"no torch op for {op.kind!r}")
            self.output_t = t[self.network.output].contiguous()
        self.tensors = t

    def output(self) -> np.ndarray:
        return self.output_t.numpy()

    def tensor_nchw(self, name: str) -> np.ndarray:
        return self.tensors[name].contiguous().numpy()


def pass_tensors(p: OneDNNPass) -> dict[str, np.ndarray]:
    """Every op's output of the last call, NCHW, for :func:`convbench.network.executor.check`,
    but those an in-place op overwrote."""
    gone = overwritten(p.network)
    return {op.name: p.tensor_nchw(op.name) for op in p.network.ops if op.name not in gone}
