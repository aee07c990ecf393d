"""numba helpers the kernel modules share: compiled-code identity and two intrinsics.

Nothing here is an algorithm (the leading underscore keeps the registry from looking for
one); each helper exists because plain numba got something wrong on these hosts:

- :func:`stable_identity` and :func:`cached_closure`: ``cache=True`` on closures.  A
  closure compiled per tile captures numba functions whose pickled identity is a random
  per-process uuid, so every process missed the cache and recompiled; and cached code
  keeps numba's per-process symbol names, so closures of one function cached by different
  processes could clash once loaded together (the first answered for both: wrong sums).
- :func:`stack_f32`: accumulators in an entry-block stack buffer, which LLVM promotes to
  (zmm) registers; a heap ``np.empty`` accumulator kept loads and stores in the inner loop.
- :func:`data_ptr`: a pointer into an array's data, for micro-kernels written as IR.
- :func:`launched_build`: a parallel kernel's serial build where numba runs one thread,
  whose parallel launch costs about a microsecond a call even then.
- :data:`U`: unsigned indices for copy loops.  numba wraps negative indices around, and the
  sign test on each signed index kept LLVM from vectorising the layout transforms' runs
  and im2col's unfolds (NCHW16c -> NHWC, 64 x 56 x 56, 1 thread, Zen 3 host: 386 us
  signed, 58 us unsigned).

The figures behind each are in the docstrings, and the kernels' vectorisation is checked
by counting packed FMAs in their assembly (tests/kernels/test_vectorised.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numba
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

Compiled = TypeVar("Compiled")
U = numba.uint64   # cast an index known to be >= 0: no wraparound test (above)


def stable_identity(dispatcher: Compiled, name: str) -> Compiled:
    """Give a numba function or intrinsic a fixed identity so ``cache=True`` works.

    numba keys a closure's cache entry on its pickled free variables; a captured numba
    function (and each intrinsic it uses) pickles with a random per-process uuid, so every
    process missed the cache and recompiled (~1.5 s a kernel).  A uuid made of the name
    (and tile) is stable.  ``_set_uuid`` is numba's private hook for exactly this state."""
    dispatcher._set_uuid(f"convbench.kernels.{name}")
    return dispatcher


def cached_closure(key: str, **options: object) -> Callable[[Callable], Callable]:
    """Decorator: ``numba.njit(cache=True, **options)`` for a closure compiled per ``key``
    (its compile-time constants, e.g. the tile), under a name and identity of its own.

    numba names compiled code after the function's qualified name plus a per-process
    counter, and cached code keeps those (weak) symbols: closures of one function compiled
    in different processes can carry the same symbol, and once both are loaded into one
    process the first answers for both.  Seen here: a stride-2 NCHW[x]c kernel ran on
    stride-1 layers, and MR = 6 GEMMs ran MR = 4 code (wrong sums) once the harness's
    workers had filled the cache.  Putting ``key`` in the name keeps every symbol apart."""
    def wrap(fn):
        fn.__qualname__ = f"{fn.__qualname__}_{key}"
        module = fn.__module__.rsplit(".", 1)[-1]
        return stable_identity(numba.njit(cache=True, **options)(fn),
                               f"{module}.{fn.__qualname__}")
    return wrap


def launched_build(build: Callable[[bool], Compiled]) -> Compiled:
    """``build(parallel)`` for the thread count numba runs now: the serial build (``prange``
    compiled as ``range``) on one thread, the parallel one otherwise.

    A parallel loop pays its threading layer's launch on one thread too.  Zen 5 host,
    in-process, back to back: an empty ``prange`` function took 1.18 us a call on one
    thread (1.44 on two), a serial function with the same arguments 0.26; built serial,
    nchwc ran MobileNet V2's block_6_project and block_14_project (22 and 67 us) 1.1 and 1.5
    us a call faster, gemm1x1 its block_1_project (74 us) 1.5.  Chosen once, when the
    kernel is built -- a harness worker builds under the threads it times -- because
    asking numba its thread count costs ~0.5 us a call
    (:class:`convbench.kernels.depthwise.DepthwiseNHWC`, where this was first measured).
    A kernel built on one thread stays serial if the count is raised later; one built on
    more runs on any count."""
    return build(numba.get_num_threads() > 1)


def closure_mode(key: str, parallel: bool) -> str:
    """``key`` naming a closure's serial build apart from its parallel one: numba's cache
    index does not tell the two apart by their flags (:func:`cached_closure`)."""
    return key if parallel else f"{key}_serial"


@intrinsic
def stack_f32(typingctx, n):  # pragma: no cover - typing/codegen hook
    """Pointer to ``n`` (a compile-time constant) float32 slots on the caller's stack.

    An ``alloca`` in the entry block, which LLVM's SROA promotes to registers when every
    access is at a constant offset: the packed GEMM's MR x NR accumulators ran at 95-105
    GFLOP/s on the Zen 4 host (~117 peak) this way and ~40 as a heap ``np.empty``."""
    if not isinstance(n, types.IntegerLiteral):
        return None
    count = n.literal_value

    def codegen(context, builder, signature, args):
        return cgutils.alloca_once(builder, context.get_value_type(types.float32), size=count)

    return types.CPointer(types.float32)(n), codegen


stable_identity(stack_f32, "_numba_support.stack_f32")


@intrinsic
def data_ptr(typingctx, base, offset):  # pragma: no cover - typing/codegen hook
    """A pointer (typed by ``base``'s dtype) to element ``offset`` of ``base``'s data, for
    a micro-kernel written as IR; no bounds or wraparound handling (the depthwise tile's
    pointer may start in padding it never loads).  A GEP from the array's own data, not
    an integer turned into a pointer (``inttoptr``), so LLVM's alias analysis still knows
    where it points.  Pointers rather than arrays also keep numba's reference counting
    (an atomic increment and decrement, each a call) out of code inlined into a hot loop:
    it had cost one pair per depthwise tile."""
    if not (isinstance(base, types.Array) and isinstance(offset, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        arr = context.make_array(signature.args[0])(context, builder, value=args[0])
        off = context.cast(builder, args[1], signature.args[1], types.intp)
        return builder.gep(arr.data, [off])

    return types.CPointer(base.dtype)(base, offset), codegen


stable_identity(data_ptr, "_numba_support.data_ptr")


