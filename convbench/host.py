"""What this host is: the one place that reads the CPU's identity and caches.

Owns: the CPU identity from /proc/cpuinfo (vendor, model, flags, architecture), the
caches of CPU 0 from sysfs (``/sys/devices/system/cpu/cpu0/cache/index*``: level, type,
size, ways, line size, the CPUs sharing it), the frequency governor, the SVE vector length,
the vector widths this host can run, the single builder of the ``NUMBA_CPU_FEATURES``
string for each width, so the kernels (worker) and the peak they are divided by
(``convbench machine``) always compile under the same flags, and the vector register file
(lanes, registers) the kernels size their register tiles for.

Everything here reads the machine as it is now; what a run records of it is
:mod:`convbench.harness.sysinfo`'s job.  Nothing here imports numba: the worker imports this
module before numba reads ``NUMBA_CPU_FEATURES``.
"""

from __future__ import annotations

import dataclasses
import platform
from dataclasses import dataclass
from pathlib import Path

CPUINFO = "/proc/cpuinfo"
CACHE_SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")
GOVERNOR_SYSFS = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
SVE_LENGTH = "/proc/sys/abi/sve_default_vector_length"
FEATURES_ENV = "NUMBA_CPU_FEATURES"
# a simulated counting pass compiles for the CPU valgrind shows (harness/counters/sim_cpu.py)
SIM_WIDTH_PREFIX = "sim-"
_PREFER_256 = "prefer-256-bit"
_X86 = ("x86_64", "amd64", "i386", "i686")
_ARM64 = ("aarch64", "arm64")


# -- CPU identity ----------------------------------------------------------------------
@dataclass(frozen=True)
class CpuId:
    """The first processor's identity; ``arch`` is filled by :func:`detect_cpu` only."""

    vendor: str                   # GenuineIntel | AuthenticAMD | ARM | ...
    family: int = 0               # x86 family; 0 on ARM
    model: int = 0                # x86 model, or ARM "CPU part"
    implementer: int = 0          # ARM "CPU implementer" (0x41 Arm Ltd)
    model_name: str = ""
    flags: tuple[str, ...] = ()   # in /proc/cpuinfo's order (x86 "flags", ARM "Features")
    mhz_nominal: float | None = None  # "cpu MHz" (x86); not the clock under load
    arch: str = ""                # platform.machine(): x86_64, aarch64, ...


def cache_dir() -> Path:
    """convbench's per-user cache folder on this host: ``$XDG_CACHE_HOME/convbench``
    (default ``~/.cache/convbench``); machine limits, compile stamps, the callgrind helper."""
    import os

    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "convbench")


def parse_cpuinfo(text: str) -> CpuId:
    """The first processor's identity from /proc/cpuinfo text (x86 or ARM)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip().lower(), value.strip())

    def num(key: str) -> int:
        v = fields.get(key, "0") or "0"
        return int(v, 16) if v.lower().startswith("0x") else int(v)

    mhz = float(fields["cpu mhz"]) if fields.get("cpu mhz") else None
    if "cpu implementer" in fields:
        return CpuId("ARM", 0, num("cpu part"), num("cpu implementer"),
                     fields.get("model name", ""), tuple(fields.get("features", "").split()),
                     mhz)
    return CpuId(fields.get("vendor_id", "unknown"), num("cpu family"), num("model"), 0,
                 fields.get("model name", ""), tuple(fields.get("flags", "").split()), mhz)


def detect_cpu(path: str = CPUINFO) -> CpuId:
    """This host's CPU (``vendor`` "unknown" when /proc/cpuinfo cannot be read)."""
    try:
        cpu = parse_cpuinfo(Path(path).read_text())
    except OSError:
        cpu = CpuId("unknown")
    return dataclasses.replace(cpu, arch=platform.machine())


def cpu_model(path: str = CPUINFO) -> str:
    """The CPU's model name; ARM kernels without one give "CPU model" or "Hardware".

    Part of the machine store's host key, so its spelling must not change.
    """
    try:
        for line in Path(path).read_text().splitlines():
            if line.lower().startswith(("model name", "cpu model", "hardware")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def governor() -> str:
    """CPU 0's frequency governor ("" when the host exposes none, as in most VMs)."""
    try:
        return GOVERNOR_SYSFS.read_text().strip()
    except OSError:
        return ""


def sve_vector_bits(path: str = SVE_LENGTH) -> int:
    """The default SVE vector length in bits (0: no SVE)."""
    try:
        return int(Path(path).read_text().strip()) * 8
    except (OSError, ValueError):
        return 0


# -- caches ----------------------------------------------------------------------------
@dataclass(frozen=True)
class CacheInfo:
    """One cache of CPU 0 as sysfs describes it (one ``indexN`` directory)."""

    level: int
    kind: str                # Data | Instruction | Unified
    size_bytes: int
    ways: int = 0            # 0: not given
    line_bytes: int = 0      # 0: not given
    shared_cpu_list: str = ""  # e.g. "0-3,8-11"; "": not given

    @property
    def shared_by(self) -> int:
        """How many CPUs share one instance of this cache (0: unknown)."""
        count = 0
        for part in self.shared_cpu_list.split(","):
            lo, _, hi = part.partition("-")
            count += int(hi or lo) - int(lo) + 1 if lo else 0
        return count


def parse_size(text: str) -> int:
    """Bytes of a sysfs size such as ``48K``, ``2048K``, ``105M`` or ``1G``."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def _attr(index: Path, name: str, default: str | None = None) -> str:
    """One sysfs attribute of a cache; ``default`` where it is optional and absent."""
    try:
        return (index / name).read_text().strip()
    except OSError:
        if default is None:
            raise
        return default


def caches(sysfs: Path = CACHE_SYSFS) -> list[CacheInfo]:
    """CPU 0's caches by level (data before instruction before unified within a level).

    An entry whose level, type or size cannot be read is left out; ways, line size and
    sharing are optional (0 or "" when absent).  No sysfs (some containers, macOS): [].
    """
    found = []
    for index in sysfs.glob("index*") if sysfs.is_dir() else []:
        try:
            level, kind = int(_attr(index, "level")), _attr(index, "type")
            size = parse_size(_attr(index, "size"))
            ways = int(_attr(index, "ways_of_associativity", "0"))
            line = int(_attr(index, "coherency_line_size", "0"))
        except (OSError, ValueError):
            continue
        found.append(CacheInfo(level, kind, size, ways, line,
                               _attr(index, "shared_cpu_list", "")))
    return sorted(found, key=lambda c: (c.level, c.kind))


# -- vector widths and NUMBA_CPU_FEATURES ---------------------------------------------
def vector_widths(cpu: CpuId | None = None) -> tuple[str, ...]:
    """The vector widths a sweep can ask for here: "auto" (numba's choice) everywhere;
    on x86 also "256", and "512" where the CPU has AVX-512 (``avx512f``); on aarch64
    "128" (NEON, with SVE turned off where the core has it).

    The x86 widths work through LLVM's x86 tuning flag ``prefer-256-bit``; other
    architectures offer only "auto".  ``cpu`` as :func:`detect_cpu` gives it (its ``arch``
    decides).
    """
    cpu = cpu or detect_cpu()
    if cpu.arch in _ARM64:
        return ("auto", "128")
    if cpu.arch not in _X86:
        return ("auto",)
    return ("auto", "256", "512") if "avx512f" in cpu.flags else ("auto", "256")


def width_unsupported(width: str, cpu: CpuId | None = None) -> str | None:
    """Why this host cannot run code of vector width ``width``; None when it can."""
    cpu = cpu or detect_cpu()
    runs = vector_widths(cpu)
    if width in runs:
        return None
    needs = {"128": "NEON (an aarch64 host)", "256": "an x86 host",
             "512": "AVX-512 (an x86 host with avx512f)"}.get(width, "a known width")
    return (f"vector width {width} needs {needs}; this {cpu.arch or 'unknown'} host runs "
            f"{', '.join(runs)}")


def _llvm_host_features() -> list[str]:
    """The host's features as LLVM reads them, one ``+name``/``-name`` each; [] where
    LLVM cannot read them (under qemu-user on aarch64 it reads the x86 host's
    /proc/cpuinfo and gives up: numba then goes by NUMBA_CPU_NAME alone)."""
    from llvmlite import binding as llvm

    try:
        return [f for f in llvm.get_host_cpu_features().flatten().split(",") if f]
    except RuntimeError:
        return []


def cpu_features(width: str) -> str | None:
    """The ``NUMBA_CPU_FEATURES`` value for a vector width (None for "auto": numba's default).

    "512" and "256" start from the host's own features (llvmlite) without any
    ``prefer-256-bit`` entry they may carry, then set that tuning flag off or on: on some
    hosts LLVM prefers 256-bit code by default and compute-bound kernels lose half their
    throughput (BRIEF.md).  Exactly one ``prefer-256-bit`` entry results, so the worker and
    the peak benchmark compile under the same flags.  "128" (aarch64) keeps the host's
    features less SVE: LLVM's loop vectoriser then uses 128-bit NEON vectors, what a core
    without SVE (Cortex-A72/A76, Neoverse N1) runs anyway.  A width this host cannot run
    raises ValueError with :func:`width_unsupported`'s reason.
    """
    if width == "auto":
        return None
    if width not in ("128", "256", "512"):
        raise ValueError(f"unknown vector width {width!r}; expected auto, 128, 256 or 512")
    cpu = detect_cpu()
    if cpu.arch in _ARM64 and width == "128":
        features = [f for f in _llvm_host_features() if not f[1:].startswith("sve")]
        return ",".join([*features, "-sve"])   # -sve also turns off what needs it (sve2)
    if cpu.arch not in _X86 or width == "128":
        raise ValueError(width_unsupported(width, cpu) or f"vector width {width}: no flags")
    features = [f for f in _llvm_host_features() if not f.endswith(_PREFER_256)]
    features.append(("+" if width == "256" else "-") + _PREFER_256)
    return ",".join(features)


def feature_lanes(features: str) -> int:
    """float32 lanes of the vectors loop code compiled under ``features`` (a
    :func:`cpu_features` string) uses: 16 with AVX-512 unless 256-bit code is preferred,
    8 on other x86, 4 (NEON) on aarch64."""
    if detect_cpu().arch not in _X86:
        return 4
    return 16 if "+avx512f" in features and f"+{_PREFER_256}" not in features else 8


# -- the vector register file the kernels plan their register tiles for --------------
@dataclass(frozen=True)
class RegisterFile:
    """The vector registers an explicit-vector kernel's tile lives in."""

    name: str          # how messages call one register ("zmm", "NEON q")
    lanes: int         # float32 lanes of one register
    registers: int     # architectural vector registers
    accumulators: int  # of them, what a register tile's accumulators may take (measured)

    def vectors(self, floats: int) -> int:
        """Registers that ``floats`` float32 lanes take (a part register counts whole)."""
        return -(-floats // self.lanes)

    def tile_accumulators(self, rows: int, row_floats: int) -> int:
        """Registers the accumulators of a ``rows`` x ``row_floats`` register tile take:
        its independent FMA chains."""
        return rows * self.vectors(row_floats)

    def tile_unfit(self, rows: int, row_floats: int) -> str | None:
        """Why a register tile of ``rows`` accumulator rows of ``row_floats`` lanes, each
        row updated by one broadcast input times one ``row_floats``-wide operand row,
        would not stay in registers; None when it does.

        Two limits, both seen in the hot loop's assembly: the accumulator budget, and the
        accumulators plus the operand row and the broadcast within the register file (with
        one row to update, each FMA reads its operand from memory instead)."""
        row = self.vectors(row_floats)
        accumulators = self.tile_accumulators(rows, row_floats)
        live = accumulators + (1 if rows == 1 else row + 1)
        name = self.name
        if accumulators > self.accumulators:
            return (f"{rows} x {row_floats} needs {accumulators} {name} accumulators, more "
                    f"than the {self.accumulators} that fit: spills")
        if live > self.registers:
            return (f"{rows} x {row_floats} needs {accumulators} {name} accumulators plus "
                    f"{live - accumulators} for its operands, more than the {self.registers} "
                    f"registers: spills")
        return None


# Accumulator budgets, as measured with the NCHW[x]c tile (kernels/nchwc.py): on the Zen 4
# host tiles of up to 28 zmm accumulators kept every one in a register; on aarch64
# (numba 0.68 / LLVM under tools/arm64.sh, Neoverse N1 target) 6 x 16 and 7 x 8 (24 and 14
# q registers) reloaded nothing from the stack, while 7 x 16 and 14 x 8 (28) reloaded one
# register and 7 x 32 (56) 65: the weight vectors and the broadcast input need the rest.
# On an AVX2 host (AMD EPYC Zen 1, 16 ymm; the hot loops of compiled, never run tiles
# read): 14 x 8, 6 x 16 and 4 x 16 reloaded nothing; 15 x 8,
# 7 x 16 (14 accumulators + 2 weight vectors + the broadcast: 17) and 3 x 32 spilled (7,
# 6 and 26 stack accesses in the loop).  With AVX-512 the explicit 16-lane vectors of the
# tiles compile to zmm at either vector width (prefer-256-bit tunes only the vectorisers).
# On an AMD EPYC Zen 3 (LLVM's znver3 schedule) 13 x 8 and 14 x 8 spilled (4 and 6 stack
# accesses in the loop) where 12 x 8 and 6 x 16 did not: the ymm budget is 12, which holds
# on both AMD hosts.  The zmm budget of 28 is kept for every AVX-512 host: on
# the Zen 4 host (numba 0.68, znver4 schedule, the broadcast input folded into each FMA as
# {1to16}) 31 x 16 and 14 x 32 kept everything in registers, 32 x 16 and 15 x 32 spilled
# (7 and 6 stack accesses in the loop); a schedule that keeps the broadcast in a register
# needs one more.
ZMM = RegisterFile("zmm", 16, 32, 28)
YMM = RegisterFile("ymm", 8, 16, 12)
NEON = RegisterFile("NEON q", 4, 32, 24)


def register_file(cpu: CpuId | None = None) -> RegisterFile:
    """The register file this host's kernels are planned for: NEON's 32 x 128 bits on
    aarch64 (LLVM lowers fixed-length vector operations to NEON even on SVE cores),
    AVX-512's 32 zmm on x86 with ``avx512f`` (at a 256-bit vector width too: the tiles'
    explicit 16-lane vectors still compile to zmm), AVX2's 16 ymm on other x86 hosts --
    there a 32-lane row takes four registers and a 28-accumulator zmm tile spills."""
    cpu = cpu or detect_cpu()
    if cpu.arch in _ARM64:
        return NEON
    return ZMM if "avx512f" in cpu.flags else YMM
