"""Which perf events to count on this CPU, by role, per CPU family.

A role is what a derived metric needs (``cycles``, ``instructions``, ``l1d_loads``,
``l1d_misses``, ``llc_refs``, ``llc_misses``) or FP work (``fp_events``: each event with the
FP operations one count stands for).  Maps:

- Intel (Skylake-SP and later): ``fp_arith_inst_retired.*`` by width; an FMA counts twice
  in these events, so ops = count x lanes (1, 4, 8, 16 for single precision); the 512-bit
  event only where the CPU has AVX-512.  L1D through perf's generic cache events, the LLC
  through the architectural LONGEST_LAT_CACHE events (``cache-references``/
  ``cache-misses``).
- AMD Zen 1-5: ``fp_ret_sse_avx_ops.all`` counts FLOPs (a MAC as 2).  L1D through the
  generic cache events, which the kernel turns into raw 0x0040 (data-cache accesses) and
  0xc860 (L2 accesses from data-cache misses) on family 17h and later
  (arch/x86/events/amd/core.c, ``amd_f17h_hw_cache_event_ids``); perf's Zen 1-3 lists
  call 0x40 ``ls_dc_accesses``, its Zen 4 list has no name for it.  The L3 is
  counted by the uncore ``amd_l3`` PMU, which cannot be attached to one process, so the
  LLC roles are missing with that reason.
- ARM (Neoverse, Cortex-A): the architectural PMUv3 events, lower-case as perf names them.
  ``fp_scale_ops_spec`` x (SVE length / 128) + ``fp_fixed_ops_spec`` where the core has
  them (Armv8.6 PMU: Neoverse V1, N2, V2); else ``ase_spec``/``vfp_spec`` are recorded but
  count instructions, not operations, so no FP-op total is derived from them.
  Cortex-A72 has no ``ll_cache_rd``/``ll_cache_miss_rd``, so its LLC roles are missing.
- generic: perf's hardware events, for anything else.

Software events (task-clock, page-faults, context-switches) are always counted: they work
in VMs and containers where the PMU is hidden.

Every name here is checked (tests/test_event_names.py) against perf's own lists in Linux
6.12.117: ``tools/perf/pmu-events/arch/{arm64/arm,x86}/<core>/*.json`` for Neoverse N1, V1,
N2/V2, Cortex-A72, A76, A77, A78, Sapphire and Granite Rapids, Skylake (client) and Zen 4,
and perf's built-in names (``tools/perf/util/parse-events.c``, ``evsel.c``); the names are
kept in tests/data/pmu_events/ with their sources.  ARM part numbers are those of
``arch/arm64/include/asm/cputype.h``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from convbench.host import CpuId, detect_cpu, sve_vector_bits

SOFTWARE_EVENTS = ("task-clock", "page-faults", "context-switches")
ROLES = ("cycles", "instructions", "l1d_loads", "l1d_misses", "llc_refs", "llc_misses")


@dataclass(frozen=True)
class EventMap:
    """Events by role for one CPU family; ``missing`` gives reasons for absent roles."""

    family: str
    roles: dict[str, str]
    fp_events: dict[str, float] = field(default_factory=dict)  # event -> FP ops per count
    extra: tuple[str, ...] = ()        # counted and reported, not used by a metric
    missing: dict[str, str] = field(default_factory=dict)
    fp_ops_reason: str = ""             # why fp_events gives no op count ("" when it does)

    @property
    def events(self) -> list[str]:
        """Every event to count, software events last, without duplicates."""
        names = list(self.roles.values()) + list(self.fp_events) + list(self.extra)
        names += SOFTWARE_EVENTS
        return list(dict.fromkeys(names))


_GENERIC_ROLES = {
    "cycles": "cycles", "instructions": "instructions",
    "l1d_loads": "L1-dcache-loads", "l1d_misses": "L1-dcache-load-misses",
    "llc_refs": "cache-references", "llc_misses": "cache-misses",
}

_NO_FP_GENERIC = "perf has no generic FP-operation event; no family map for this CPU"


def intel_map(avx512: bool = True) -> EventMap:
    """The Intel map; ``avx512``: whether the CPU has AVX-512 (its ``avx512f`` flag)."""
    fp = {"fp_arith_inst_retired.scalar_single": 1.0,
          "fp_arith_inst_retired.128b_packed_single": 4.0,
          "fp_arith_inst_retired.256b_packed_single": 8.0}
    if avx512:
        # Only AVX-512 cores have this event (perf's Skylake and Alder Lake client lists lack
        # it); perf refuses an unknown name, and one FP event missing leaves no FP total.
        fp["fp_arith_inst_retired.512b_packed_single"] = 16.0
    return EventMap("intel", dict(_GENERIC_ROLES), fp)


def amd_map() -> EventMap:
    roles = {k: v for k, v in _GENERIC_ROLES.items() if not k.startswith("llc")}
    reason = "AMD's L3 is counted by the uncore amd_l3 PMU, which cannot attach to a process"
    return EventMap("amd-zen", roles, {"fp_ret_sse_avx_ops.all": 1.0},
                    missing={"llc_refs": reason, "llc_misses": reason})


# ARM "CPU part" numbers (implementer 0x41) whose PMU has FP_SCALE/FIXED_OPS_SPEC
_ARM_FP_OPS_PARTS = {0xD40: "neoverse-v1", 0xD49: "neoverse-n2", 0xD4F: "neoverse-v2",
                     0xD8E: "neoverse-n3", 0xD84: "neoverse-v3"}
ARM_PARTS = {0xD0C: "neoverse-n1", 0xD08: "cortex-a72", 0xD0B: "cortex-a76",
             0xD0D: "cortex-a77", 0xD41: "cortex-a78", 0xD03: "cortex-a53",
             **_ARM_FP_OPS_PARTS}
# Parts without LL_CACHE_RD / LL_CACHE_MISS_RD: perf's list for the Cortex-A72
# (tools/perf/pmu-events/arch/arm64/arm/cortex-a57-a72/, Linux 6.12.117) has neither
_ARM_NO_LL_CACHE_PARTS = {0xD08}
_NO_LL_CACHE = ("this core's PMU has no LL_CACHE_RD/LL_CACHE_MISS_RD; where its L2 is the "
                "last level, count it with --events "
                "llc_refs=l2d_cache_rd,llc_misses=l2d_cache_refill_rd")


def arm_map(part: int = 0, sve_bits: int = 0) -> EventMap:
    roles = {"cycles": "cpu_cycles", "instructions": "inst_retired",
             "l1d_loads": "l1d_cache", "l1d_misses": "l1d_cache_refill",
             "llc_refs": "ll_cache_rd", "llc_misses": "ll_cache_miss_rd"}
    missing = {}
    if part in _ARM_NO_LL_CACHE_PARTS:
        missing = {role: _NO_LL_CACHE for role in ("llc_refs", "llc_misses")}
        roles = {k: v for k, v in roles.items() if k not in missing}
    name = "arm-" + ARM_PARTS.get(part, f"part-{part:#x}")
    if part in _ARM_FP_OPS_PARTS:
        # FP_SCALE_OPS_SPEC counts per 128 bits of an SVE vector
        scale = max(sve_bits, 128) / 128.0
        return EventMap(name, roles, {"fp_scale_ops_spec": scale, "fp_fixed_ops_spec": 1.0},
                        missing=missing)
    return EventMap(name, roles, extra=("ase_spec", "vfp_spec"), missing=missing,
                    fp_ops_reason="this core counts SIMD/FP instructions (ASE_SPEC, "
                                  "VFP_SPEC), not FP operations")


def generic_map() -> EventMap:
    return EventMap("generic", dict(_GENERIC_ROLES), fp_ops_reason=_NO_FP_GENERIC)


def event_map_for(cpu: CpuId, sve_bits: int = 0) -> EventMap:
    """The family map for ``cpu`` (Intel family 6, AMD family >= 0x17, ARM; else generic)."""
    if cpu.vendor == "GenuineIntel" and cpu.family == 6:
        return intel_map("avx512f" in cpu.flags)
    if cpu.vendor in ("AuthenticAMD", "HygonGenuine") and cpu.family >= 0x17:
        return amd_map()
    if cpu.vendor == "ARM":
        return arm_map(cpu.model, sve_bits)
    return generic_map()


def host_event_map() -> EventMap:
    return event_map_for(detect_cpu(), sve_vector_bits())


_ROLE_RE = re.compile(r"^(\w+)=(.+)$")


def with_overrides(base: EventMap, overrides: list[str] | None) -> EventMap:
    """``base`` changed by a user's ``--events`` list.

    Each item is either ``role=event`` (replace a role's event, e.g.
    ``l1d_misses=l1d.replacement``), ``fp:event*ops`` (an FP event with its operations per
    count, replacing the family's FP events), or a bare event name (counted as an extra).
    """
    if not overrides:
        return base
    roles, fp, extra = dict(base.roles), {}, list(base.extra)
    missing = dict(base.missing)
    for item in overrides:
        item = item.strip()
        if not item:
            continue
        if item.startswith("fp:"):
            event, _, ops = item[3:].partition("*")
            fp[event] = float(ops or 1)
            continue
        m = _ROLE_RE.match(item)
        if m and m.group(1) in ROLES:
            roles[m.group(1)] = m.group(2)
            missing.pop(m.group(1), None)
        elif m:
            raise ValueError(f"unknown counter role {m.group(1)!r}; roles: {', '.join(ROLES)}")
        else:
            extra.append(item)
    return EventMap(base.family + "+override", roles, fp or dict(base.fp_events),
                    tuple(extra), missing, "" if fp else base.fp_ops_reason)


@dataclass(frozen=True)
class PeakSpec:
    """What a core can retire per cycle, for FMA utilization.

    peak FP32 ops/cycle = fma_units x (min(vector_bits, datapath_bits) / 32) x 2
    (an FMA is two operations).  Zen 4 runs 512-bit vectors on 256-bit pipes, hence
    ``datapath_bits``.
    """

    vector_bits: int
    fma_units: int = 2
    datapath_bits: int = 0     # 0: as wide as vector_bits

    @property
    def fp32_ops_per_cycle(self) -> float:
        width = min(self.vector_bits, self.datapath_bits or self.vector_bits)
        return self.fma_units * (width / 32) * 2


def host_peak_spec(cpu: CpuId | None = None, fma_units: int | None = None,
                   vector_bits: int | None = None) -> PeakSpec:
    """The host's peak from its flags; ``fma_units`` defaults to 2 (current server cores).

    A user who knows better (one-FMA-unit parts) passes ``fma_units``; ``vector_bits``
    overrides the width actually used (a run pinned to 256-bit code).
    """
    cpu = cpu or detect_cpu()
    if vector_bits is None:
        if "avx512f" in cpu.flags:
            vector_bits = 512
        elif "avx2" in cpu.flags or "avx" in cpu.flags:
            vector_bits = 256
        elif cpu.vendor == "ARM":
            vector_bits = sve_vector_bits() or 128
        else:
            vector_bits = 128
    datapath = 256 if cpu.vendor == "AuthenticAMD" and cpu.family == 0x19 else 0
    return PeakSpec(vector_bits, 2 if fma_units is None else fma_units, datapath)


def perf_env() -> dict[str, str]:
    """Environment for perf subprocesses: C locale so numbers use '.' decimals."""
    return {**os.environ, "LC_ALL": "C"}
