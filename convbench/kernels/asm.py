"""Static code profile: count FP instructions by vector width in a numba kernel's assembly.

numba's vectorisation is fragile (BRIEF.md): a kernel that compiles to scalar code runs
5-10x slower with no error.  Reading the assembly tells why, on any machine, PMU or not.
x86: packed ``ps/pd`` vs scalar ``ss/sd`` instructions, width from the xmm/ymm/zmm registers
named.  AArch64 (GNU syntax, as LLVM prints it on Linux): NEON instructions on ``v``
registers, width from the arrangement (``v0.4s``, ``v0.2d``, ``v0.8h``: 128 bits; ``v0.2s``,
``v0.4h``: 64), SVE ones on ``z`` registers (width: the machine's, counted under
:data:`SCALABLE`), scalar ones on ``s``/``d``/``h`` registers -- including the by-element
form ``fmla s0, s1, v2.s[1]``, which names a ``v`` register but computes one lane.
tests/data/asm/ holds real aarch64 output of numba (tools/arm64.sh) that the tests read.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_X86_FP = re.compile(
    r"^\s*(v?)(fn?m(?:add|sub)\d*|add|sub|mul|div|max|min|sqrt)(p|s)(s|d)\b\s*(.*)$")
_X86_REG = re.compile(r"%?([xyz])mm\d+")
# AArch64 FP arithmetic: the mnemonic, the destination register's letter and its
# arrangement (".4s"; NEON and SVE only).  FMAs: NEON/SVE fmla/fmls (accumulating), SVE
# fmad/fmsb/fnmla/fnmls/fnmad/fnmsb, scalar fmadd/fmsub/fnmadd/fnmsub.
_ARM_FP = re.compile(
    r"^\s*(fn?ml[as]|fn?ma[d]|fn?msb|fn?madd|fn?msub|fmulx?|fnmul|faddp?|fsub|fdiv|fsqrt"
    r"|fmaxn?m?p?|fminn?m?p?|fabs|fneg)\s+([vzsdh])\d+(\.\d*[bhsd])?\b")
_ARM_FMA = re.compile(r"^fn?(ml[as]|mad|msb|madd|msub)$")
_WIDTH = {"x": 128, "y": 256, "z": 512}
# The width under which SVE instructions are counted: their vector length is the
# machine's (128 to 2048 bits), not written in the code.
SCALABLE = -1
# NEON arrangement -> vector bits: lanes x lane size ("4s": 4 x 32)
_LANE_BITS = {"b": 8, "h": 16, "s": 32, "d": 64}


def _neon_bits(arrangement: str) -> int:
    """Bits of a NEON register arrangement such as ``.4s`` (128) or ``.2s`` (64)."""
    lanes = arrangement[1:-1]
    return int(lanes or 1) * _LANE_BITS[arrangement[-1]]


@dataclass(frozen=True)
class FpProfile:
    """FP instruction counts in one compiled function (static, not executed counts)."""

    packed_fma: dict[int, int]       # vector width in bits -> packed FMA instructions
    packed_other: dict[int, int]     # packed add/mul/... by width
    scalar_fma: int
    scalar_other: int

    @property
    def total_packed_fma(self) -> int:
        return sum(self.packed_fma.values())

    @property
    def widest(self) -> int:
        """Widest vector width with packed FP instructions (0: none; :data:`SCALABLE`
        when the only packed ones are SVE's)."""
        widths = [w for w, n in {**self.packed_fma, **self.packed_other}.items() if n]
        return max(widths, default=0)

    @property
    def vectorised(self) -> bool:
        """A kernel counts as vectorised when its code has packed FMAs; one whose arithmetic
        has no multiply-add at all, scalar or packed (F(2x2) Winograd's transforms: adds and
        subtractions by design), when it has packed FP instructions.  Scalar FMAs without a
        packed one are a scalar fallback whatever else is packed."""
        if self.total_packed_fma or self.scalar_fma:
            return self.total_packed_fma > 0
        return any(self.packed_other.values())


def fp_profile(asm: str) -> FpProfile:
    """Count FP instructions in assembly text (AT&T or Intel x86 syntax, or AArch64)."""
    packed_fma: Counter[int] = Counter()
    packed_other: Counter[int] = Counter()
    scalar_fma = scalar_other = 0
    for line in asm.splitlines():
        m = _X86_FP.match(line)
        if m:
            _, op, kind, _, operands = m.groups()
            is_fma = op.startswith(("fmadd", "fmsub", "fnmadd", "fnmsub"))
            if kind == "s":
                scalar_fma += is_fma
                scalar_other += not is_fma
                continue
            regs = _X86_REG.findall(operands)
            width = max((_WIDTH[r] for r in regs), default=128)
            (packed_fma if is_fma else packed_other)[width] += 1
            continue
        m = _ARM_FP.match(line)
        if m:
            op, reg, arrangement = m.groups()
            is_fma = _ARM_FMA.match(op) is not None
            if reg == "v" and arrangement:
                (packed_fma if is_fma else packed_other)[_neon_bits(arrangement)] += 1
            elif reg == "z":
                (packed_fma if is_fma else packed_other)[SCALABLE] += 1
            else:
                scalar_fma += is_fma
                scalar_other += not is_fma
    return FpProfile(dict(packed_fma), dict(packed_other), scalar_fma, scalar_other)


# (dispatcher, signatures) -> assembly: the code of a signature never changes within a
# process, and each clone is a full compile (~25-50 s per kernel under qemu-user emulation,
# where `convbench check --asm` profiles the same kernels on every layer)
_ASM: dict[tuple[object, tuple[object, ...]], str] = {}

# a dispatcher -> the argument types of the calls Python made to it (calls_recorded)
Calls = dict[object, set[tuple[object, ...]]]


@contextlib.contextmanager
def calls_recorded(active: bool = True) -> Iterator[Calls]:
    """Within the block, record the argument types of every call Python makes to a numba
    dispatcher: the signatures a variant's run dispatched to (``active`` False: record
    nothing and leave numba as it is; the mapping stays empty).

    A dispatcher holds every signature compiled in the process, and kernels are shared
    between variants (the own GEMM's macro-kernel: a C-ordered output for im2col, strided
    quadrants for Strassen), so its code read whole depends on what ran before (im2col's
    own GEMM on a 256-channel 1x1 layer: 36 packed FMAs alone, 72 after a Strassen variant,
    Zen 3).  numba resolves a call in C, so the record is made by a ``__call__`` set on
    numba's Dispatcher class for the block's duration (a Python frame more per call: only
    around a verifying call, never a timed one).  A kernel called from jitted code is not
    seen, but its caller's object code holds its code for that call's signature."""
    from numba.core.dispatcher import Dispatcher

    calls: Calls = {}
    if not active:
        yield calls
        return
    original = Dispatcher.__call__
    had_own = "__call__" in Dispatcher.__dict__

    def recording_call(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if not kwargs:   # keyword calls: left unrecorded (every signature is read)
            types = tuple(self.typeof_pyval(a) for a in args)
            calls.setdefault(self, set()).add(types)
        return original(self, *args, **kwargs)

    Dispatcher.__call__ = recording_call  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        if had_own:
            Dispatcher.__call__ = original  # type: ignore[method-assign]
        else:
            del Dispatcher.__call__


class AsmUnreadable(RuntimeError):
    """Cached code whose object cannot be read, where compiling it again is not allowed."""


def dispatcher_asm(dispatcher: object, signatures: tuple[object, ...] | None = None,
                   recompile: bool = True) -> str:
    """Assembly of ``signatures`` of a numba dispatcher (default: every signature it has
    compiled), concatenated.

    Code compiled in this process is read as LLVM printed it.  numba will not show code it
    loaded from its on-disk cache; that code is read from the cache's object file instead,
    disassembled by ``objdump`` (:func:`cached_object_asm`: the very code that runs, in
    ~10 ms), and only where that cannot be done (no objdump, a cache numba's internals no
    longer open the same way) compiled again, uncached, with the same options and
    signatures, once per process and set of signatures (1.3-6.2 s a kernel here, 25-50 s
    under qemu-user emulation); with ``recompile`` False that case raises
    :class:`AsmUnreadable` instead (a timing worker, which must not spend seconds on it).
    """
    import numba

    if signatures is None:
        signatures = tuple(dispatcher.signatures)  # type: ignore[attr-defined]
    if not signatures:
        raise ValueError("the dispatcher has compiled no signature yet: call it once first")
    overloads = dispatcher.overloads  # type: ignore[attr-defined]
    if not any(getattr(overloads[sig].library, "_disable_inspection", True)
               for sig in signatures):
        return "\n".join(dispatcher.inspect_asm(sig)  # type: ignore[attr-defined]
                         for sig in signatures)
    key = (dispatcher, signatures)
    if key not in _ASM:
        text = cached_object_asm(dispatcher, signatures)
        if text is None and not recompile:
            why = ("no objdump on the PATH" if shutil.which("objdump") is None
                   else "numba's cache entry could not be read as object code")
            raise AsmUnreadable(f"{getattr(dispatcher, '__name__', dispatcher)}: {why}")
        if text is None:
            options = {k: v for k, v in dispatcher.targetoptions.items()  # type: ignore[attr-defined]
                       if k not in ("cache", "nopython", "boundscheck")}
            clone = numba.njit(cache=False, **options)(dispatcher.py_func)  # type: ignore[attr-defined]
            for sig in signatures:
                clone.compile(sig)
            text = "\n".join(clone.inspect_asm().values())
        _ASM[key] = text
    return _ASM[key]


def cached_object_asm(dispatcher: object,
                      signatures: tuple[object, ...] | None = None) -> str | None:
    """The assembly of the object code numba's cache holds for ``signatures`` of
    ``dispatcher`` (default: each it has compiled; the code it loaded and runs), as
    :func:`objdump_asm` writes it; None where that cannot be read (no objdump on the PATH,
    no cache entry, an entry that is not object code).  The entry is found as numba finds
    it when loading (the signature and the code generator's CPU name and features):
    numba's private cache API, numba 0.6x."""
    objdump = shutil.which("objdump")
    cache = getattr(dispatcher, "_cache", None)
    cache_file = getattr(cache, "_cache_file", None)
    if objdump is None or cache_file is None:
        return None
    if signatures is None:
        signatures = tuple(dispatcher.signatures)  # type: ignore[attr-defined]
    texts = []
    try:
        codegen = dispatcher.targetctx.codegen()  # type: ignore[attr-defined]
        for sig in signatures:
            entry = cache_file.load(cache._index_key(sig, codegen))  # type: ignore[union-attr]
            # a CompileResult reduced for the cache: its library first, as
            # (name, "object", (object code, bitcode)) (numba.core.codegen)
            _name, kind, payload = entry[0]
            if kind != "object":
                return None
            texts.append(objdump_asm(payload[0], objdump))
    except (AttributeError, TypeError, ValueError, IndexError, OSError,
            subprocess.CalledProcessError):
        return None
    return "\n".join(texts)


# objdump -d lines: a function's start ("0000000000000040 <name>:"), an instruction
# ("      7f:\tvfmadd231ps %ymm1,%ymm2,%ymm3"), a section's start; a direct branch names its
# target ("jne    1a4 <name+0x1a4>", AArch64 "b.ne 40 <name+0x40>")
_OBJDUMP_FUNCTION = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_OBJDUMP_INSTRUCTION = re.compile(r"^\s*([0-9a-f]+):\s+(.+)$")
_OBJDUMP_SECTION = re.compile(r"^Disassembly of section (.+):$")
_OBJDUMP_TARGET = re.compile(r"\s([0-9a-f]+) <[^>]*>$")
# direct branches: x86 jumps and loops, AArch64 b, b.cond, cbz/cbnz, tbz/tbnz (not calls,
# and not an address computed for data: lea's and adrp's comments name addresses too)
_BRANCH = re.compile(r"j\w+|loop\w*|b|b\.\w+|cbn?z|tbn?z")


def objdump_asm(code: bytes, objdump: str = "objdump") -> str:
    """Disassemble an ELF object with ``objdump`` into text that reads like LLVM's assembly
    where this module looks: one instruction a line, a label line where a function starts
    and where a branch lands (so :func:`hot_block` splits it into the same basic blocks),
    AT&T syntax on x86."""
    with tempfile.TemporaryDirectory(prefix="convbench-asm-") as folder:
        path = Path(folder) / "kernel.o"
        path.write_bytes(code)
        listing = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(path)],
                                 capture_output=True, text=True, check=True).stdout
    parsed: list[tuple[str, str, str]] = []   # (section, address, text) or a function label
    section = ""
    targets: set[tuple[str, str]] = set()
    for line in listing.splitlines():
        if m := _OBJDUMP_SECTION.match(line):
            section = m.group(1)
        elif m := _OBJDUMP_FUNCTION.match(line):
            parsed.append((section, "", f"{m.group(1)}:"))
        elif m := _OBJDUMP_INSTRUCTION.match(line):
            address, text = m.group(1), m.group(2).strip()
            parsed.append((section, address, text))
            target = _OBJDUMP_TARGET.search(text)
            if target and _BRANCH.fullmatch(text.split(None, 1)[0]):
                targets.add((section, target.group(1)))
    out = []
    for section, address, text in parsed:
        if not address:
            out.append(text)
            continue
        if (section, address) in targets:
            out.append(f".Lobj_{address}:")
        out.append("\t" + text)
    return "\n".join(out)


# A label line opens a basic block (x86 AT&T ".LBB4_46:", AArch64 ".LBB4_46:" too)
_LABEL = re.compile(r"^\s*[.\w$]+:")
# A vector register moved to or from the stack: x86 AT&T "(%rsp)" beside an xmm/ymm/zmm
# register, AArch64 "[sp" beside a q/v register
_STACK_VECTOR = re.compile(r"(\(%rsp\).*%[xyz]mm\d|%[xyz]mm\d.*\(%rsp\)|\[sp\b.*\b[qv]\d"
                           r"|\b[qv]\d.*\[sp\b)")


def _block_counts(lines: list[str]) -> tuple[int, int]:
    fmas = sum(bool(re.match(r"v?fn?m(add|sub)\d*p|fml[as]\s", line.strip())) for line in lines)
    return fmas, sum(bool(_STACK_VECTOR.search(line)) for line in lines)


def hot_block(asm: str) -> list[str]:
    """The lines of the basic block with the most packed FMAs (of two such, the one with
    more vector stack accesses): a kernel's register tile."""
    blocks: list[list[str]] = [[]]
    for line in asm.splitlines():
        if _LABEL.match(line):
            blocks.append([])
        else:
            blocks[-1].append(line)
    return max(blocks, key=_block_counts)


def hot_block_spills(asm: str) -> tuple[int, int]:
    """(FMAs, vector stack accesses) of :func:`hot_block`: a register tile that stays in
    registers reads and writes no vector on the stack in its FMA loop; one over the
    register file spills and reloads accumulators there, still packed (so
    :func:`fp_profile` alone does not see it)."""
    return _block_counts(hot_block(asm))


@dataclass(frozen=True)
class KernelProfile:
    """The static profile of one jitted kernel."""

    name: str
    profile: FpProfile

    @property
    def status(self) -> str:
        """"vectorised", "not vectorised" (FP arithmetic, not vectorised: see
        FpProfile.vectorised) or "no FP" (a copy or index kernel, such as an im2col
        unfold)."""
        p = self.profile
        if p.vectorised:
            return "vectorised"
        has_fp = p.scalar_fma or p.scalar_other or any(p.packed_other.values())
        return "not vectorised" if has_fp else "no FP"


def _module_dispatchers(prepared: object) -> list[object]:
    import sys

    from numba.core.registry import CPUDispatcher

    module = sys.modules.get(type(prepared).__module__)
    return [v for v in vars(module).values()
            if isinstance(v, CPUDispatcher) and v.signatures] if module else []


def kernel_profiles(prepared_or_kernels: object, calls: Calls | None = None,
                    recompile: bool = True) -> list[KernelProfile]:
    """Per-kernel FP profiles of a :class:`~convbench.kernels.base.Prepared` (its
    ``hot_kernels()``; where it declares none, every compiled dispatcher of its module) or
    of an iterable of numba dispatchers.  Kernels must have run once (compiled a signature).
    With ``calls`` (:func:`calls_recorded` around the variant's run) a kernel is read at
    the signatures its run called and no other; without, or for a kernel the run did not
    call from Python, at every signature it compiled in the process: a kernel shared by
    several variants (the own GEMM's macro-kernel) then holds each one's specialisation.
    ``recompile``: as :func:`dispatcher_asm`."""
    hot = getattr(prepared_or_kernels, "hot_kernels", None)
    if hot is not None:
        declared = hot()
        kernels = (_module_dispatchers(prepared_or_kernels) if declared is None
                   else list(declared))
    else:
        kernels = list(prepared_or_kernels)  # type: ignore[call-overload]
    return [KernelProfile(getattr(k, "__name__", repr(k)),
                          fp_profile(dispatcher_asm(k, _called(k, calls), recompile)))
            for k in kernels if getattr(k, "signatures", None)]


def _called(kernel: object, calls: Calls | None) -> tuple[object, ...] | None:
    """The compiled signatures of ``kernel`` that ``calls`` saw it called with, in compile
    order; None (every signature) where it saw none of them."""
    seen = (calls or {}).get(kernel, set())
    called = tuple(sig for sig in kernel.signatures if sig in seen)  # type: ignore[attr-defined]
    return called or None


def profile_columns(profiles: list[KernelProfile]) -> dict[str, float | str]:
    """Tidy-table columns of a variant's static profile: packed FMAs by width summed over
    its kernels (64: NEON's half-width ``.2s`` form; sve: SVE at the machine's width),
    scalar FP instructions, and "vectorised" / "not vectorised" / "no FP"
    (any kernel with FP arithmetic that is not vectorised makes the variant "not
    vectorised")."""
    fma: Counter[int] = Counter()
    scalar = 0
    for kp in profiles:
        fma.update(kp.profile.packed_fma)
        scalar += kp.profile.scalar_fma + kp.profile.scalar_other
    statuses = {kp.status for kp in profiles}
    status = ("not vectorised" if "not vectorised" in statuses else
              "vectorised" if "vectorised" in statuses else
              "no FP" if statuses else "no jitted kernel")
    out: dict[str, float | str] = {f"asm_packed_fma_{w}": float(fma.get(w, 0))
                                   for w in (64, 128, 256, 512)}
    out["asm_packed_fma_sve"] = float(fma.get(SCALABLE, 0))
    out["asm_scalar_fp"] = float(scalar)
    out["asm_vectorisation"] = status
    out["asm_kernels"] = ",".join(f"{kp.name}:{kp.status}" for kp in profiles)
    return out


def profile_summary(profiles: list[KernelProfile]) -> str:
    """One line for a variant's static profile: its verdict and packed FMAs by width,
    e.g. ``vectorised: 24 x 128-bit FMA`` (what ``convbench check --asm`` prints); code
    without packed FMAs shows its other packed FP instructions (``64 x 256-bit packed FP``)."""
    cols = profile_columns(profiles)
    widths = [(w, int(cols[f"asm_packed_fma_{w}"])) for w in ("sve", 512, 256, 128, 64)]
    fmas = ", ".join(f"{n} x {w}{'' if w == 'sve' else '-bit'} FMA" for w, n in widths if n)
    if not fmas:
        other: Counter[int] = Counter()
        for kp in profiles:
            other.update(kp.profile.packed_other)
        fmas = ", ".join(f"{n} x {'sve' if w == SCALABLE else f'{w}-bit'} packed FP"
                         for w, n in sorted(other.items(), reverse=True) if n)
    scalar = int(cols["asm_scalar_fp"])
    detail = ", ".join(filter(None, [fmas, f"{scalar} scalar FP" if scalar else ""]))
    return f"{cols['asm_vectorisation']}: {detail}" if detail else str(cols["asm_vectorisation"])


def static_profile(prepared: object, calls: Calls) -> dict[str, float | str]:
    """A measured case's static profile as result columns (:func:`profile_columns` and
    ``asm_profile``, the :func:`profile_summary` line), read from the code its run called
    (``calls``) without compiling anything; ``asm_reason`` alone where it cannot be read
    (a profile that fails is a missing column, never a lost measurement)."""
    try:
        profiles = kernel_profiles(prepared, calls, recompile=False)
    except (AsmUnreadable, OSError, subprocess.SubprocessError, ValueError) as exc:
        return {"asm_reason": f"{type(exc).__name__}: {exc}"}
    return {**profile_columns(profiles), "asm_profile": profile_summary(profiles)}
