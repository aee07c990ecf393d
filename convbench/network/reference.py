"""The float64 reference execution of a suite's network: every tensor of the graph.

The convs run :func:`convbench.kernels.reference.conv2d_reference`; the glue ops are plain
numpy here.  A network pass checks its own outputs (other layouts, fused ops) against these
tensors.  Weights are per conv *occurrence* (op name), since two occurrences of one layer
shape have different weights; convs have no bias (batch norm's shift, folded, is not
modelled: it does not change what the kernels compute).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from convbench.kernels.reference import conv2d_reference
from convbench.spec.network import Network, Op
from convbench.spec.problem import ConvProblem
from convbench.spec.suite import Suite


def pool2d(x: np.ndarray, kind: str, k: int, s: int, p: int) -> np.ndarray:
    """k x k max or average pool of NCHW ``x`` with stride s and padding p, floor mode.

    Max pool pads with -inf (padding never wins); average pool pads with 0 and divides by
    k * k, padding included (PyTorch's default ``count_include_pad=True``).
    """
    fill = -np.inf if kind == "maxpool" else 0.0
    padded = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    windows = sliding_window_view(padded, (k, k), axis=(2, 3))[:, :, ::s, ::s]
    return windows.max(axis=(4, 5)) if kind == "maxpool" else windows.mean(axis=(4, 5))


def _problem(network: Network, suite: Suite | None, op: Op) -> ConvProblem:
    return suite.layer(op.layer).problem if suite is not None else network.problem(op)


def run_op(op: Op, ins: list[np.ndarray], problem: ConvProblem | None = None,
           weight: np.ndarray | None = None) -> np.ndarray:
    """One op on its float64 NCHW inputs (a conv needs its problem and OIHW weight)."""
    if op.kind == "conv":
        assert problem is not None and weight is not None
        return conv2d_reference(problem, ins[0], weight)
    if op.kind == "relu":
        return np.maximum(ins[0], 0.0)
    if op.kind == "relu6":
        return np.clip(ins[0], 0.0, 6.0)
    if op.kind == "add":
        return np.sum(ins, axis=0)
    return pool2d(ins[0], op.kind, op.k, op.s, op.p)


def run_reference(network: Network, suite: Suite | None, weights: Mapping[str, np.ndarray],
                  x: np.ndarray) -> dict[str, np.ndarray]:
    """Every tensor of ``network`` (``input`` and each op's output, by name) in float64.

    ``weights`` maps each conv op's *name* to its OIHW weights (IC/g input channels);
    ``x`` is the NCHW input of ``network.input_shape``.  ``suite`` supplies the layers
    (None: the network's own ``layers``).
    """
    x = np.asarray(x, dtype=np.float64)
    if x.shape != network.input_shape:
        raise ValueError(f"input has shape {x.shape}, the network takes {network.input_shape}")
    tensors: dict[str, np.ndarray] = {"input": x}
    for op in network.ops:
        problem = weight = None
        if op.kind == "conv":
            problem = _problem(network, suite, op)
            if op.name not in weights:
                raise KeyError(f"no weights for conv op {op.name!r} (layer {op.layer})")
            weight = np.asarray(weights[op.name], dtype=np.float64)
            if weight.shape != problem.weight_shape:
                raise ValueError(f"weights of {op.name!r} have shape {weight.shape}, layer "
                                 f"{op.layer} takes {problem.weight_shape}")
        tensors[op.name] = run_op(op, [tensors[name] for name in op.inputs], problem, weight)
    return tensors


def random_weights(network: Network, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded OIHW weights for every conv op, scaled by 1/sqrt(fan-in) so activations keep
    their magnitude through a deep network (He-style init without the factor 2)."""
    rng = np.random.default_rng(seed)
    out = {}
    for op in network.convs:
        p = network.problem(op)
        out[op.name] = rng.standard_normal(p.weight_shape) / np.sqrt(p.reduction_length)
    return out
