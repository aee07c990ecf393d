"""Activations fused into a conv's output stores: relu and relu6 applied to the sums in
registers as they are written, instead of a glue op that streams the tensor again.

Inference engines fuse them (ONNX Runtime runs MobileNet V2's conv + relu6 pairs as one
NCHWc node; oneDNN takes them as post-ops).  In convbench's network pass, MobileNet V2 at 2
threads (Zen 5 host), the 35 relu6 ops took 0.21 ms of a 2.66 ms pass beside ONNX
Runtime's 2.07 ms whole pass.  A kernel that fuses takes the activation as a compile-time
code (:data:`CODES`) and applies :func:`vector_ir` (its micro-kernels' LLVM vectors) or
:func:`scalar` (numba loops) before each store; ``Prepared.fuse_activation`` switches a
built kernel to it.

A residual add fuses the same way, before the activation: a kernel switched by
``Prepared.fuse_residual`` adds its sums to what the output buffer already holds (the
shortcut, which the network pass places there), as ONNX Runtime's fused NCHWc Conv takes
a ``Sum`` input.  ResNet-50's 16 adds and the relus after them, run as glue, took 0.46 ms
of an 18 ms pass at 2 threads (Zen 5 host).

NaN stays NaN (a compare that is false for NaN picks the sum), as in the glue's relu: a
kernel that wrote NaN still fails the network pass's check.  Only without LLVM's ``nnan``:
with it (numba's ``fastmath=True`` is LLVM's ``fast``, which holds it) LLVM may take the
sums for never NaN and fold the compare and select into a ``max`` that drops NaN, as it
did in the depthwise NCHW16c kernel on the AVX2 Zen 3 host (not with AVX-512), which now
compiles with :data:`FASTMATH`, every other fast-math flag.  The other fusing kernels still
compile with ``fastmath=True``; all kept NaN in AVX2 code (Zen 3 host), and the NaN test
(tests/kernels/test_epilogue.py) runs every fusing kernel on the host it runs on (before
this it ran three of them).
"""

from __future__ import annotations

import numba
from llvmlite import ir

NONE, RELU, RELU6 = 0, 1, 2
CODES = {"relu": RELU, "relu6": RELU6}   # glue op kind -> code
# numba's fastmath flags for a kernel that fuses an activation: "fast" without nnan (and
# ninf); contract still makes each multiply and add an FMA, reassoc still vectorises sums
FASTMATH = {"contract", "reassoc", "nsz", "arcp", "afn"}   # a set: numba takes no other


class CompiledIn:
    """The ``fuse_activation`` and ``fuse_residual`` of a kernel whose epilogue is compiled
    into its code: each sets ``act`` / ``add`` and recompiles ``kernel`` through the
    kernel's ``_compiled()``, which reads them (plain until switched: the class defaults).
    Listed before ``Prepared`` in the bases."""

    act: int = NONE
    add: bool = False
    kernel: object

    def _compiled(self) -> object:
        raise NotImplementedError

    def fuse_activation(self, kind: str) -> bool:
        self.act = CODES[kind]
        self.kernel = self._compiled()
        return True

    def fuse_residual(self) -> bool:
        self.add = True
        self.kernel = self._compiled()
        return True


def key_suffix(act: int, add: bool = False) -> str:
    """The part of a compiled kernel's cache name that says its epilogue: the residual add,
    then the activation ("" for neither, so plain kernels keep their names)."""
    return ("_add" if add else "") + {NONE: "", RELU: "_relu", RELU6: "_relu6"}[act]


def vector_ir(builder: ir.IRBuilder, value: ir.Value, act: int) -> ir.Value:
    """``value`` (a float vector) with activation ``act`` applied."""
    if act == NONE:
        return value
    lanes = value.type.count

    def splat(c: float) -> ir.Constant:
        return ir.Constant(ir.VectorType(ir.FloatType(), lanes), [c] * lanes)

    zero = splat(0.0)
    value = builder.select(builder.fcmp_ordered("<", value, zero), zero, value)
    if act == RELU6:
        six = splat(6.0)
        value = builder.select(builder.fcmp_ordered(">", value, six), six, value)
    return value


@numba.njit(inline="always")
def scalar(v, act):  # pragma: no cover - jitted
    """``v`` with activation ``act`` applied (a literal at the call site folds the branch)."""
    if act != NONE:
        if v < 0.0:
            v = 0.0
        if act == RELU6 and v > 6.0:
            v = 6.0
    return v
