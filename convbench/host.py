"""What this host is: the one place that reads the CPU's identity and caches.

Owns: the CPU identity from /proc/cpuinfo (vendor, model, flags, architecture), the
caches of CPU 0 from sysfs (``/sys/devices/system/cpu/cpu0/cache/index*``: level, type,
size, ways, line size, the CPUs sharing it), the frequency governor, the SVE vector length,
the vector widths this host can run, and the single builder of the ``NUMBA_CPU_FEATURES``
string for each width, so the kernels (worker) and the peak they are divided by
(``convbench machine``) always compile under the same flags.

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
_PREFER_256 = "prefer-256-bit"
_X86 = ("x86_64", "amd64", "i386", "i686")


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
    on x86 also "256", and "512" where the CPU has AVX-512 (``avx512f``).

    The explicit widths work through LLVM's x86 tuning flag ``prefer-256-bit``, so other
    architectures offer only "auto" for now.  ``cpu`` as :func:`detect_cpu` gives it (its
    ``arch`` decides).
    """
    cpu = cpu or detect_cpu()
    if cpu.arch not in _X86:
        return ("auto",)
    return ("auto", "256", "512") if "avx512f" in cpu.flags else ("auto", "256")


def cpu_features(width: str) -> str | None:
    """The ``NUMBA_CPU_FEATURES`` value for a vector width (None for "auto": numba's default).

    "512" and "256" start from the host's own features (llvmlite) without any
    ``prefer-256-bit`` entry they may carry, then set that tuning flag off or on: on some
    hosts LLVM prefers 256-bit code by default and compute-bound kernels lose half their
    throughput (BRIEF.md).  Exactly one ``prefer-256-bit`` entry results, so the worker and
    the peak benchmark compile under the same flags.
    """
    if width == "auto":
        return None
    if width not in ("256", "512"):
        raise ValueError(f"unknown vector width {width!r}; expected auto, 256 or 512")
    from llvmlite import binding as llvm

    features = [f for f in llvm.get_host_cpu_features().flatten().split(",")
                if f and not f.endswith(_PREFER_256)]
    features.append(("+" if width == "256" else "-") + _PREFER_256)
    return ",".join(features)
