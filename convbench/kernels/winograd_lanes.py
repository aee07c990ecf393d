"""A Winograd transform matrix applied across channels in registers: the 1-D step of the
input and output transforms (B^T d, A^T m) on a run of channel lanes, compiled with the
matrix's entries as constants (Lavin & Gray 2015, section 5: the transforms are
vectorised over channels; seed 004).

One call loads the ``cols`` input vectors of a run of lanes (one per matrix column, at a
runtime stride), forms every output row as a sum over the row's non-zero entries only (a
1 or -1 is an add or a subtraction, anything else one FMA), and stores the ``rows``
outputs: each input and output touches memory once.  The numba loops this replaces
accumulated row by row through memory (a load, an FMA and a store per non-zero entry) and
kept the zero entries' tests at run time.

Why an intrinsic: the entries must be compile-time constants for the zeros and ones to
fold, and a numba loop over a run of lanes is fully unrolled before LLVM's vectoriser sees
it (see :mod:`convbench.kernels.register_tile`, whose vector helpers this reuses).  Each
matrix gets an intrinsic of its own, named by a digest of its entries, so a perturbed
matrix (the tests' broken transforms) compiles its own code instead of reusing another's.
"""

from __future__ import annotations

import hashlib
from functools import cache

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from convbench.kernels import epilogue
from convbench.kernels._numba_support import stable_identity
from convbench.kernels.register_tile import _at, _f32_array, _intp, _literal_ints, _vec, row_vectors


def digest(*parts: bytes) -> str:
    """Eight hex digits naming matrices given as their float32 bytes (a compiled kernel's key)."""
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:8]


def _row_sum(builder, entries, inputs, lanes: int):
    """sum_k entries[k] * inputs[k] over the non-zero entries, as one lanes-wide vector."""
    vec = _vec(lanes)
    fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec] * 3),
                                         f"llvm.fma.v{lanes}f32")
    total = None
    for coef, x in zip(entries, inputs, strict=True):
        if coef == 0.0:
            continue
        if total is None:
            total = (x if coef == 1.0 else builder.fneg(x) if coef == -1.0
                     else builder.fmul(vec([float(coef)] * lanes), x))
        elif coef == 1.0:
            total = builder.fadd(total, x)
        elif coef == -1.0:
            total = builder.fsub(total, x)
        else:
            total = builder.call(fma, [vec([float(coef)] * lanes), x, total])
    return total if total is not None else vec([0.0] * lanes)


@cache
def lane_transform(matrix_bytes: bytes, rows: int, cols: int):
    """The intrinsic ``apply(src, s_off, s_step, dst, d_off, d_step, valid, lanes, act)`` of
    the rows x cols float32 matrix M given as bytes: for each run of ``lanes`` (a
    compile-time int) channels, dst[d_off + r * d_step + l] = act(sum_k M[r, k] *
    src[s_off + k * s_step + l]) for r < min(rows, valid), ``act`` a compile-time
    :mod:`convbench.kernels.epilogue` code (the output transform's last step fuses a relu).
    All loads come before any store, so src and dst may be one array.  Offsets and steps
    are in elements; nothing is bounds checked."""
    matrix = np.frombuffer(matrix_bytes, np.float32).reshape(rows, cols)

    @intrinsic
    def apply(typingctx, src, s_off, s_step, dst, d_off, d_step, valid, lanes,
              act):  # pragma: no cover - typing/codegen hook
        if not (_literal_ints(lanes, act) and _f32_array(src, dst)):
            return None
        n, activation = lanes.literal_value, act.literal_value

        def codegen(context, builder, signature, args):
            src_arr, s_off, s_step, dst_arr, d_off, d_step, valid = args[:7]
            sig = signature.args
            intp = context.get_value_type(types.intp)
            s_off, s_step, d_off, d_step, valid = (
                _intp(context, builder, v, t) for v, t in
                ((s_off, sig[1]), (s_step, sig[2]), (d_off, sig[4]), (d_step, sig[5]),
                 (valid, sig[6])))
            s_data = context.make_array(sig[0])(context, builder, value=src_arr).data
            d_data = context.make_array(sig[3])(context, builder, value=dst_arr).data
            def element(off, step, i, offset):
                return builder.add(builder.add(off, builder.mul(step, ir.Constant(intp, i))),
                                   ir.Constant(intp, offset))

            for offset, width in row_vectors(n):
                inputs = [builder.load(_at(builder, s_data, element(s_off, s_step, k, offset),
                                           width), align=4) for k in range(cols)]
                outputs = [_row_sum(builder, matrix[r], inputs, width) for r in range(rows)]
                for r, value in enumerate(outputs):
                    with cgutils.if_likely(builder, builder.icmp_signed(
                            "<", ir.Constant(intp, r), valid)):
                        builder.store(epilogue.vector_ir(builder, value, activation),
                                      _at(builder, d_data, element(d_off, d_step, r, offset),
                                          width), align=4)
            return context.get_dummy_value()

        return types.none(src, s_off, s_step, dst, d_off, d_step, valid, lanes, act), codegen

    return stable_identity(apply, f"winograd_lanes.m{rows}x{cols}_{digest(matrix_bytes)}")
