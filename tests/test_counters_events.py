"""Event maps per CPU family, user overrides and the host's peak FP ops per cycle."""

import pytest

from convbench.harness.counters import events
from convbench.host import CpuId, parse_cpuinfo

INTEL = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 106
model name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz
flags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512bw
"""
AMD = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC 9R14
flags\t\t: fpu sse sse2 avx avx2 fma avx512f
"""
ARM_V1 = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd sve
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x1
CPU part\t: 0xd40
"""
ARM_N1 = ARM_V1.replace("0xd40", "0xd0c").replace(" sve", "")


def test_cpuinfo_parsing():
    amd = parse_cpuinfo(AMD)
    assert (amd.vendor, amd.family, amd.model) == ("AuthenticAMD", 25, 17)
    arm = parse_cpuinfo(ARM_V1)
    assert (arm.vendor, arm.implementer, arm.model) == ("ARM", 0x41, 0xD40)


def test_family_maps():
    intel = events.event_map_for(parse_cpuinfo(INTEL))
    assert intel.family == "intel"
    assert intel.fp_events["fp_arith_inst_retired.512b_packed_single"] == 16
    amd = events.event_map_for(parse_cpuinfo(AMD))
    assert amd.family == "amd-zen" and "fp_ret_sse_avx_ops.all" in amd.events
    assert "llc_misses" in amd.missing
    n1 = events.event_map_for(parse_cpuinfo(ARM_N1))
    assert n1.family == "arm-neoverse-n1" and n1.fp_ops_reason
    assert {"l1d_cache_refill", "ll_cache_miss_rd", "ase_spec"} <= set(n1.events)
    v1 = events.event_map_for(parse_cpuinfo(ARM_V1), sve_bits=256)
    assert v1.fp_events == {"fp_scale_ops_spec": 2.0, "fp_fixed_ops_spec": 1.0}
    other = events.event_map_for(CpuId("GenuineIntel", 15, 1))
    assert other.family == "generic"


def test_software_events_always_counted_once():
    for m in (events.intel_map(), events.amd_map(), events.arm_map(), events.generic_map()):
        assert m.events[-3:] == list(events.SOFTWARE_EVENTS)
        assert len(m.events) == len(set(m.events))


def test_overrides():
    base = events.amd_map()
    m = events.with_overrides(base, ["llc_misses=l3_misses", "fp:fp_ret_sse_avx_ops.all*1",
                                     "ls_dispatch.ld_dispatch"])
    assert m.roles["llc_misses"] == "l3_misses" and "llc_misses" not in m.missing
    assert "ls_dispatch.ld_dispatch" in m.events
    with pytest.raises(ValueError):
        events.with_overrides(base, ["l9_misses=x"])
    assert events.with_overrides(base, None) is base


def test_peak_from_vector_width_and_fma_units():
    assert events.host_peak_spec(parse_cpuinfo(INTEL)).fp32_ops_per_cycle == 64
    zen4 = events.host_peak_spec(parse_cpuinfo(AMD))   # 512-bit on 256-bit pipes
    assert zen4.fp32_ops_per_cycle == 32
    assert events.PeakSpec(256, fma_units=1).fp32_ops_per_cycle == 16
    assert events.host_peak_spec(parse_cpuinfo(INTEL),
                                 vector_bits=256).fp32_ops_per_cycle == 32
