"""Every perf event name in convbench's event maps exists for the cores it is meant for.

The lists under tests/data/pmu_events/ are perf's own names (each file's header cites its
source in the Linux tree; tools/pmu_event_names.py rewrites them from a Linux checkout).
perf resolves a name either from its per-core JSON lists or from its built-in tables
(cycles, L1-dcache-loads, task-clock...), so a map's name must be in one of the two.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from convbench.harness.counters import events
from convbench.host import CpuId

DATA = Path(__file__).parent / "data" / "pmu_events"

# ARM part -> the list perf uses for it (tools/perf/pmu-events/arch/arm64/mapfile.csv)
ARM_LISTS = {0xD0C: "neoverse-n1", 0xD40: "neoverse-v1", 0xD49: "neoverse-n2-v2",
             0xD4F: "neoverse-n2-v2", 0xD08: "cortex-a57-a72", 0xD0B: "cortex-a76",
             0xD0D: "cortex-a77", 0xD41: "cortex-a78"}
# parts convbench names that no list can check, and why
ARM_UNCHECKED = {
    0xD03: "perf's cortex-a53 files list only its IMPLEMENTATION DEFINED events; the "
           "architectural ones come from the kernel driver's sysfs names",
    0xD8E: "Neoverse N3: no perf list in Linux 6.12.117",
    0xD84: "Neoverse V3: no perf list in Linux 6.12.117",
}
X86_LISTS = {"intel": ("sapphirerapids", "graniterapids"), "amd-zen": ("amdzen4",)}
INTEL_NO_AVX512 = "skylake"     # a client core: perf's list has no 512-bit FP event


def names(stem: str) -> set[str]:
    lines = (DATA / f"{stem}.txt").read_text().splitlines()
    return {line for line in lines if line and not line.startswith("#")}


BUILTIN = names("perf-builtin")


def unknown(emap: events.EventMap, stem: str | None) -> list[str]:
    """The map's events that are neither perf built-ins nor in the core's list."""
    core = names(stem) if stem else set()
    return [e for e in emap.events if e not in BUILTIN and e not in core]


@pytest.mark.parametrize("part", sorted(ARM_LISTS), ids=lambda p: f"{p:#x}")
@pytest.mark.parametrize("sve_bits", [0, 256])
def test_arm_map_names_exist(part, sve_bits):
    emap = events.arm_map(part, sve_bits)
    assert unknown(emap, ARM_LISTS[part]) == [], f"not in {ARM_LISTS[part]}.txt"


def test_every_arm_part_is_checked_or_says_why():
    assert set(events.ARM_PARTS) == set(ARM_LISTS) | set(ARM_UNCHECKED)


@pytest.mark.parametrize("stem", X86_LISTS["intel"])
def test_intel_map_names_exist(stem):
    assert unknown(events.intel_map(), stem) == [], f"not in {stem}.txt"


def test_intel_map_without_avx512_names_exist():
    client = CpuId("GenuineIntel", 6, 94, flags=("avx", "avx2", "fma"))   # Skylake-S
    emap = events.event_map_for(client)
    assert unknown(emap, INTEL_NO_AVX512) == [], f"not in {INTEL_NO_AVX512}.txt"
    assert "fp_arith_inst_retired.512b_packed_single" not in names(INTEL_NO_AVX512)


@pytest.mark.parametrize("stem", X86_LISTS["amd-zen"])
def test_amd_map_names_exist(stem):
    assert unknown(events.amd_map(), stem) == [], f"not in {stem}.txt"


def test_generic_map_and_software_events_are_builtins():
    assert unknown(events.generic_map(), None) == []
    assert set(events.SOFTWARE_EVENTS) <= BUILTIN


def test_a72_llc_roles_missing_with_reason():
    # no LL_CACHE_* in perf's cortex-a57-a72 list (see test_arm_map_names_exist)
    a72 = events.arm_map(0xD08)
    assert {"llc_refs", "llc_misses"} <= set(a72.missing)
    assert "llc_refs" not in a72.roles and "l2d_cache_rd" in names("cortex-a57-a72")


def test_misspelt_name_is_caught():
    bad = events.EventMap("arm-test", {"l1d_misses": "l1d_cache_refil"})
    assert unknown(bad, "neoverse-n1") == ["l1d_cache_refil"]


@pytest.mark.parametrize("path", sorted(DATA.glob("*.txt")), ids=lambda p: p.stem)
def test_lists_cite_a_source_and_hold_sorted_names(path):
    lines = path.read_text().splitlines()
    assert lines[0].startswith("#") and any("Source: Linux" in line for line in lines)
    listed = [line for line in lines if line and not line.startswith("#")]
    assert len(listed) == len(set(listed)) > 10
    if path.stem != "perf-builtin":   # built-ins keep perf's mixed case, grouped by kind
        assert listed == sorted(listed) and all(n == n.lower() for n in listed)
