"""Static code profile: count FP instructions by vector width in a numba kernel's assembly.

numba's vectorisation is fragile (BRIEF.md): a kernel that compiles to scalar code runs
5-10x slower with no error.  Reading the assembly tells why, on any machine, PMU or not.
x86: packed ``ps/pd`` vs scalar ``ss/sd`` instructions, width from the xmm/ymm/zmm registers
named.  AArch64: ``fmla``/``fmul``/``fadd`` on ``v`` (NEON, 128-bit) or ``z`` (SVE) registers
vs scalar ``s``/``d`` registers.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_X86_FP = re.compile(
    r"^\s*(v?)(fn?m(?:add|sub)\d*|add|sub|mul|div|max|min|sqrt)(p|s)(s|d)\b\s*(.*)$")
_X86_REG = re.compile(r"%?([xyz])mm\d+")
_ARM_FP = re.compile(r"^\s*(fmla|fmls|fmadd|fmsub|fmul|fadd|fsub|fdiv)\s+([vzsdq])\d+")
_WIDTH = {"x": 128, "y": 256, "z": 512}


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
        """Widest vector width with packed FP instructions (0: none)."""
        widths = [w for w, n in {**self.packed_fma, **self.packed_other}.items() if n]
        return max(widths, default=0)

    @property
    def vectorised(self) -> bool:
        """A kernel counts as vectorised when its code has packed FMAs."""
        return self.total_packed_fma > 0


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
            op, reg = m.groups()
            is_fma = op in ("fmla", "fmls", "fmadd", "fmsub")
            if reg in "vq":
                (packed_fma if is_fma else packed_other)[128] += 1
            elif reg == "z":  # SVE: width is the machine's; record it as 0-agnostic 2048 max
                (packed_fma if is_fma else packed_other)[-1] += 1
            else:
                scalar_fma += is_fma
                scalar_other += not is_fma
    return FpProfile(dict(packed_fma), dict(packed_other), scalar_fma, scalar_other)


def dispatcher_asm(dispatcher: object) -> str:
    """Assembly of every signature a numba dispatcher has compiled, concatenated.

    numba refuses to show the assembly of code loaded from its on-disk cache, so such a
    function is compiled again, uncached, with the same options and signatures.  Code
    compiled in this process is read as it is: compiling it a second time cost the machine
    limits' first use ~5 s of its ~14 (the two FMA kernels of the peak, AMD host).
    """
    import numba

    signatures = list(dispatcher.signatures)  # type: ignore[attr-defined]
    if not signatures:
        raise ValueError("the dispatcher has compiled no signature yet: call it once first")
    overloads = dispatcher.overloads  # type: ignore[attr-defined]
    if not any(getattr(overloads[sig].library, "_disable_inspection", True)
               for sig in signatures):
        return "\n".join(dispatcher.inspect_asm(sig)  # type: ignore[attr-defined]
                         for sig in signatures)
    options = {k: v for k, v in dispatcher.targetoptions.items()  # type: ignore[attr-defined]
               if k not in ("cache", "nopython", "boundscheck")}
    clone = numba.njit(cache=False, **options)(dispatcher.py_func)  # type: ignore[attr-defined]
    for sig in signatures:
        clone.compile(sig)
    return "\n".join(clone.inspect_asm().values())


@dataclass(frozen=True)
class KernelProfile:
    """The static profile of one jitted kernel."""

    name: str
    profile: FpProfile

    @property
    def status(self) -> str:
        """"vectorised", "not vectorised" (FP arithmetic but no packed FMA) or "no FP"
        (a copy or index kernel, such as an im2col unfold)."""
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


def kernel_profiles(prepared_or_kernels: object) -> list[KernelProfile]:
    """Per-kernel FP profiles of a :class:`~convbench.kernels.base.Prepared` (its
    ``hot_kernels()``, else every compiled dispatcher of its module) or of an iterable of
    numba dispatchers.  Kernels must have run once (compiled a signature)."""
    hot = getattr(prepared_or_kernels, "hot_kernels", None)
    if hot is not None:
        kernels = list(hot()) or _module_dispatchers(prepared_or_kernels)
    else:
        kernels = list(prepared_or_kernels)  # type: ignore[call-overload]
    return [KernelProfile(getattr(k, "__name__", repr(k)), fp_profile(dispatcher_asm(k)))
            for k in kernels if getattr(k, "signatures", None)]


def profile_columns(profiles: list[KernelProfile]) -> dict[str, float | str]:
    """Tidy-table columns of a variant's static profile: packed FMAs by width summed over
    its kernels, scalar FP instructions, and "vectorised" / "not vectorised" / "no FP"
    (any kernel with FP but no packed FMA makes the variant "not vectorised")."""
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
                                   for w in (128, 256, 512)}
    out["asm_scalar_fp"] = float(scalar)
    out["asm_vectorisation"] = status
    out["asm_kernels"] = ",".join(f"{kp.name}:{kp.status}" for kp in profiles)
    return out
