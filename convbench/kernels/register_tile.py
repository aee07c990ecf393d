"""Register tiles as explicit LLVM vectors: the accumulators of a rows x width tile (the
GEMM's MR x NR, BLIS; NCHW[x]c's reg_n x oc_bn, NeoCPU) updated by broadcast-input-times-
operand-row FMAs, and written back once.

Why intrinsics: with width a compile-time 16, 32 or 64, LLVM fully unrolls a numba lane
loop before its loop vectoriser sees it and left scalar FMAs, gathers or narrow vectors
(2.6-7 GFLOP/s on the Zen 4 host; on the AVX2 host the numba-loop GEMM's 6 x 16 compiled to
xmm FMAs and its 2 x 48 kept accumulators on the stack).  Here every access to the tile is a
whole vector at a constant offset of an entry-block ``alloca``, which LLVM's SROA promotes
to registers.

A row is split into vectors of the register file's lanes (:data:`REGISTERS`), then one
narrower power-of-two vector for a remainder: a 48-lane row is three zmm (as one
``<48 x float>`` it compiled to a loop of 758 stack accesses), 24 lanes on AVX2 three ymm.
Offsets are in elements of the arrays' data; nothing is bounds checked (the callers keep
every access in range).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from convbench import host
from convbench.kernels import epilogue
from convbench.kernels._numba_support import stable_identity

REGISTERS = host.register_file()
# Independent accumulators that keep two FMA pipes busy: FMA latency 4 x 2 pipes (the
# machine-peak kernel needs eight chains for the same reason; Intel's 512-bit and Zen 3's
# 256-bit cores both have two).  A tile with fewer waits on its own FMAs.
MIN_CHAINS = 8


def row_vectors(width: int, lanes: int = REGISTERS.lanes) -> list[tuple[int, int]]:
    """(offset, lanes) of the vectors one row of ``width`` floats is held in: whole
    registers first, then power-of-two vectors for the rest."""
    out, offset = [], 0
    while offset < width:
        n = min(lanes, width - offset)
        n = 1 << (n.bit_length() - 1)
        out.append((offset, n))
        offset += n
    return out


def _vec(lanes: int) -> ir.VectorType:
    return ir.VectorType(ir.FloatType(), lanes)


def _literal_ints(*values: object) -> bool:
    return all(isinstance(v, types.IntegerLiteral) for v in values)


def _f32_array(*values: object) -> bool:
    return all(isinstance(v, types.Array) and v.dtype == types.float32 for v in values)


def _at(builder, base, offset, lanes: int):
    """Pointer to ``lanes`` floats at element ``offset`` of ``base`` (a float pointer)."""
    return builder.bitcast(builder.gep(base, [offset]), _vec(lanes).as_pointer())


def _intp(context, builder, value, typ):
    return context.cast(builder, value, typ, types.intp)


def _row_fma(builder, acc, start: int, value, parts, operand, intp) -> None:
    """The accumulator row at element ``start`` += ``value`` broadcast times ``operand``
    (one loaded vector per part of :func:`row_vectors`)."""
    for (offset, lanes), wv in zip(parts, operand, strict=True):
        vec = _vec(lanes)
        fma = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vec, [vec] * 3), f"llvm.fma.v{lanes}f32")
        xs = builder.shuffle_vector(
            builder.insert_element(vec(ir.Undefined), value, ir.Constant(ir.IntType(32), 0)),
            vec(ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))
        slot = _at(builder, acc, ir.Constant(intp, start + offset), lanes)
        builder.store(builder.call(fma, [xs, wv, builder.load(slot)]), slot)


@intrinsic
def tile_zero(typingctx, rows, width):  # pragma: no cover - typing/codegen hook
    """Pointer to rows x width zeroed float32 accumulators on the caller's stack."""
    if not _literal_ints(rows, width):
        return None
    n_rows, n = rows.literal_value, width.literal_value

    def codegen(context, builder, signature, args):
        with builder.goto_entry_block():
            acc = builder.alloca(ir.ArrayType(ir.FloatType(), n_rows * n))
            acc.align = 64
        acc = builder.bitcast(acc, ir.FloatType().as_pointer())
        intp = context.get_value_type(types.intp)
        for r in range(n_rows):
            for offset, lanes in row_vectors(n):
                builder.store(_vec(lanes)(None),
                              _at(builder, acc, ir.Constant(intp, r * n + offset), lanes))
        return acc

    return types.CPointer(types.float32)(rows, width), codegen


@intrinsic
def tile_fma(typingctx, acc, x, x_off, x_step, w, w_off, rows, width):  # pragma: no cover
    """acc[r, :] += x[x_off + r * x_step] * w[w_off : w_off + width] for r < rows: one input
    value broadcast to every lane times the operand row, per accumulator row."""
    if not (_literal_ints(rows, width) and _f32_array(x, w)):
        return None
    n_rows, n = rows.literal_value, width.literal_value

    def codegen(context, builder, signature, args):
        acc, x_arr, x_off, x_step, w_arr, w_off = args[:6]
        sig = signature.args
        intp = context.get_value_type(types.intp)
        x_off, x_step, w_off = (_intp(context, builder, v, t) for v, t in
                                ((x_off, sig[2]), (x_step, sig[3]), (w_off, sig[5])))
        x_data = context.make_array(sig[1])(context, builder, value=x_arr).data
        w_data = context.make_array(sig[4])(context, builder, value=w_arr).data
        parts = row_vectors(n)
        operand = [builder.load(_at(builder, w_data, builder.add(w_off, ir.Constant(intp, o)),
                                    lanes), align=4) for o, lanes in parts]
        for r in range(n_rows):
            xi = builder.add(x_off, builder.mul(x_step, ir.Constant(intp, r)))
            value = builder.load(builder.gep(x_data, [xi]), align=4)
            _row_fma(builder, acc, r * n, value, parts, operand, intp)
        return context.get_dummy_value()

    return types.none(acc, x, x_off, x_step, w, w_off, rows, width), codegen


def _store(rows: int, width: int, blocks: int, accumulate: bool, activation: int,
           with_block: bool):
    """Codegen of a tile store, args (acc, y, y_off, y_step[, y_block], valid, ...), the
    y_block argument ``with_block``: each accumulator row in ``blocks`` equal parts, part b
    of row r to ``y_off + b * y_block + r * y_step``."""
    part = width // blocks
    if blocks > 1 and part % REGISTERS.lanes:
        # the parts must be the vectors tile_fma updates, or SROA keeps the tile in memory
        raise ValueError(f"a {width}-lane row in {blocks} parts of {part}: not whole "
                         f"{REGISTERS.lanes}-lane vectors")

    def codegen(context, builder, signature, args):
        intp = context.get_value_type(types.intp)
        sig = signature.args
        y_block = None
        if with_block:
            acc, y_arr, y_off, y_step, y_block, valid = args[:6]
            y_block, valid = (_intp(context, builder, y_block, sig[4]),
                              _intp(context, builder, valid, sig[5]))
        else:
            acc, y_arr, y_off, y_step, valid = args[:5]
            valid = _intp(context, builder, valid, sig[4])
        y_off, y_step = (_intp(context, builder, y_off, sig[2]),
                         _intp(context, builder, y_step, sig[3]))
        y_data = context.make_array(sig[1])(context, builder, value=y_arr).data
        for r in range(rows):
            with cgutils.if_likely(builder, builder.icmp_signed("<", ir.Constant(intp, r), valid)):
                row = builder.add(y_off, builder.mul(y_step, ir.Constant(intp, r)))
                for b in range(blocks):
                    start = row if b == 0 else builder.add(
                        row, builder.mul(y_block, ir.Constant(intp, b)))
                    for offset, lanes in row_vectors(part):
                        value = builder.load(_at(builder, acc, ir.Constant(
                            intp, r * width + b * part + offset), lanes))
                        dst = _at(builder, y_data, builder.add(start, ir.Constant(intp, offset)),
                                  lanes)
                        if accumulate:
                            value = builder.fadd(builder.load(dst, align=4), value)
                        builder.store(epilogue.vector_ir(builder, value, activation), dst,
                                      align=4)
        return context.get_dummy_value()

    return codegen


@intrinsic
def tile_store(typingctx, acc, y, y_off, y_step, valid, rows, width, add,
               act):  # pragma: no cover - typing/codegen hook
    """y[y_off + r * y_step : ... + width] (+)= acc[r, :] for r < min(valid, rows): set,
    or added to what y holds when ``add`` (a compile-time bool) is true; then activation
    ``act`` (a compile-time :mod:`convbench.kernels.epilogue` code) applied."""
    if not (_literal_ints(rows, width, act) and _f32_array(y)
            and isinstance(add, types.BooleanLiteral)):
        return None
    codegen = _store(rows.literal_value, width.literal_value, 1, add.literal_value,
                     act.literal_value, with_block=False)
    return types.none(acc, y, y_off, y_step, valid, rows, width, add, act), codegen


@intrinsic
def tile_store_blocks(typingctx, acc, y, y_off, y_step, y_block, valid, rows, width, blocks,
                      add, act):  # pragma: no cover - typing/codegen hook
    """:func:`tile_store` of a tile whose rows span ``blocks`` channel blocks of an
    NCHW[x]c output, ``y_block`` elements apart: part b (width / blocks lanes, whole
    vectors) of row r to y[y_off + b * y_block + r * y_step ...], as MLAS's NCHWc kernels
    keep up to four filter blocks in one tile."""
    if not (_literal_ints(rows, width, blocks, act) and _f32_array(y)
            and isinstance(add, types.BooleanLiteral)):
        return None
    codegen = _store(rows.literal_value, width.literal_value, blocks.literal_value,
                     add.literal_value, act.literal_value, with_block=True)
    return types.none(acc, y, y_off, y_step, y_block, valid, rows, width, blocks, add,
                      act), codegen


@intrinsic
def tile_fma_rows(typingctx, acc, x, ind, row0, col, q, w, w_off, rows,
                  width):  # pragma: no cover - typing/codegen hook
    """acc[r, :] += x[ind[row0 + r, col] + q] * w[w_off : w_off + width] for r < rows: the
    input of each row read through an indirection buffer (QNNPACK's indirect GEMM), ``ind``
    a C-contiguous int64 matrix of element offsets from ``x``'s data."""
    if not (_literal_ints(rows, width) and _f32_array(x, w) and isinstance(ind, types.Array)
            and ind.dtype == types.int64 and ind.ndim == 2 and ind.layout == "C"):
        return None
    n_rows, n = rows.literal_value, width.literal_value

    def codegen(context, builder, signature, args):
        acc, x_arr, ind_arr, row0, col, q, w_arr, w_off = args[:8]
        sig = signature.args
        intp = context.get_value_type(types.intp)
        row0, col, q, w_off = (_intp(context, builder, v, t) for v, t in
                               ((row0, sig[3]), (col, sig[4]), (q, sig[5]), (w_off, sig[7])))
        x_data = context.make_array(sig[1])(context, builder, value=x_arr).data
        ind_struct = context.make_array(sig[2])(context, builder, value=ind_arr)
        _, n_cols = cgutils.unpack_tuple(builder, ind_struct.shape, 2)
        w_data = context.make_array(sig[6])(context, builder, value=w_arr).data
        parts = row_vectors(n)
        operand = [builder.load(_at(builder, w_data, builder.add(w_off, ir.Constant(intp, o)),
                                    lanes), align=4) for o, lanes in parts]
        for r in range(n_rows):
            at = builder.add(builder.mul(builder.add(row0, ir.Constant(intp, r)), n_cols), col)
            offset = builder.load(builder.gep(ind_struct.data, [at]))
            value = builder.load(builder.gep(x_data, [builder.add(offset, q)]), align=4)
            _row_fma(builder, acc, r * n, value, parts, operand, intp)
        return context.get_dummy_value()

    return types.none(acc, x, ind, row0, col, q, w, w_off, rows, width), codegen


for _name, _fn in (("zero", tile_zero), ("fma", tile_fma), ("fma_rows", tile_fma_rows),
                   ("store", tile_store), ("store_blocks", tile_store_blocks)):
    stable_identity(_fn, f"register_tile.{_name}")
