"""convbench.host on this machine's real /proc and /sys, and the one NUMBA_CPU_FEATURES
builder that the kernels' workers and the peak benchmark share."""

import os
import subprocess

import pytest

from convbench import host
from convbench.harness import worker
from convbench.machine import peak


def test_cpu_identity_is_read():
    cpu = host.detect_cpu()
    assert host.cpu_model()
    assert cpu.vendor != "unknown" and cpu.flags and cpu.arch


def test_widths_offer_auto_and_512_only_with_avx512f():
    cpu = host.detect_cpu()
    widths = host.vector_widths(cpu)
    assert "auto" in widths
    assert ("512" in widths) == ("avx512f" in cpu.flags)


def test_aarch64_offers_the_neon_width_and_x86_the_prefer_256_widths():
    arm = host.CpuId("ARM", model=0xD0C, implementer=0x41, flags=("fp", "asimd"),
                     arch="aarch64")
    zen = host.CpuId("AuthenticAMD", 25, 17, flags=("avx2", "avx512f"), arch="x86_64")
    assert host.vector_widths(arm) == ("auto", "128")
    assert host.vector_widths(zen) == ("auto", "256", "512")
    assert host.width_unsupported("128", arm) is None
    assert host.width_unsupported("512", arm) == (
        "vector width 512 needs AVX-512 (an x86 host with avx512f); this aarch64 host runs "
        "auto, 128")
    assert "needs NEON (an aarch64 host)" in host.width_unsupported("128", zen)
    # tiles are planned for NEON's 32 x 4-lane registers on ARM, zmm's 32 x 16 with
    # AVX-512, ymm's 16 x 8 on an AVX2-only x86 host
    zen1 = host.CpuId("AuthenticAMD", 23, 1, flags=("avx2", "fma"), arch="x86_64")
    assert host.register_file(arm) == host.NEON and host.register_file(zen) == host.ZMM
    assert host.register_file(zen1) == host.YMM
    assert host.NEON.vectors(16) == 4 and host.ZMM.vectors(16) == 1 and host.NEON.vectors(6) == 2


def test_a_width_the_host_cannot_run_has_no_feature_string():
    other = "128" if host.detect_cpu().arch == "x86_64" else "512"
    with pytest.raises(ValueError, match=f"vector width {other} needs"):
        host.cpu_features(other)


def test_caches_ascend_by_level_with_positive_sizes():
    caches = host.caches()
    if not caches:
        pytest.skip(f"no cache information under {host.CACHE_SYSFS} on this machine")
    levels = [c.level for c in caches]
    assert levels == sorted(levels) and levels[0] == 1
    assert all(c.size_bytes > 0 for c in caches)


def test_cache_sizes_and_sharing_parse():
    assert host.parse_size("48K") == 48 << 10 and host.parse_size("105M") == 105 << 20
    assert host.CacheInfo(3, "Unified", 1, shared_cpu_list="0-3,8-11").shared_by == 8
    assert host.CacheInfo(1, "Data", 1).shared_by == 0  # not given: unknown


@pytest.mark.parametrize("width", ["256", "512"])
def test_features_carry_exactly_one_prefer_256_bit_entry(width):
    features = host.cpu_features(width).split(",")
    wanted = "+prefer-256-bit" if width == "256" else "-prefer-256-bit"
    assert wanted in features
    assert sum(f.endswith("prefer-256-bit") for f in features) == 1


def test_vector_width_feature_strings():
    assert host.cpu_features("auto") is None
    wide, narrow = host.cpu_features("512"), host.cpu_features("256")
    assert wide.endswith(",-prefer-256-bit") and narrow.endswith(",+prefer-256-bit")
    assert wide.rsplit(",", 1)[0] == narrow.rsplit(",", 1)[0]  # the host's own features
    with pytest.raises(ValueError, match="vector width"):
        host.cpu_features("1024")


@pytest.mark.parametrize("width", ["256", "512"])
def test_worker_and_peak_compile_under_the_same_features(width, monkeypatch):
    """The peak a GFLOP/s figure is divided by must be measured under the kernels' flags."""
    seen = {}

    def fake_run(cmd, env, **_):
        seen["peak"] = env[host.FEATURES_ENV]
        return subprocess.CompletedProcess(cmd, 0, stdout='{"gflops": {}}\n', stderr="")

    monkeypatch.setattr(peak.subprocess, "run", fake_run)
    peak.measure_width(width, [1])
    monkeypatch.setenv(host.FEATURES_ENV, "restored after the test")
    worker.apply_vector_width(width)
    assert seen["peak"] == os.environ[host.FEATURES_ENV]


# The widest tiles that compiled without a vector stack access in their FMA loop, and the
# first ones that spilled (host.py: measured per register file)
@pytest.mark.parametrize(("registers", "rows", "row_floats", "fits"), [
    (host.ZMM, 28, 16, True), (host.ZMM, 14, 32, True), (host.ZMM, 6, 64, True),
    (host.ZMM, 29, 16, False), (host.ZMM, 16, 32, False), (host.ZMM, 7, 64, False),
    (host.YMM, 12, 8, True), (host.YMM, 6, 16, True), (host.YMM, 1, 64, True),
    (host.YMM, 4, 24, True),
    # 13 and 14 x 8 fit on Zen 1's code but spilled 4 and 6 in znver3's (Zen 3 host)
    (host.YMM, 13, 8, False), (host.YMM, 14, 8, False), (host.YMM, 15, 8, False),
    (host.YMM, 7, 16, False), (host.YMM, 3, 32, False),
    (host.YMM, 2, 48, False),
    (host.NEON, 6, 16, True), (host.NEON, 1, 64, True),
    (host.NEON, 7, 16, False), (host.NEON, 14, 8, False), (host.NEON, 2, 64, False)])
def test_register_tiles_fit_as_measured(registers, rows, row_floats, fits):
    reason = registers.tile_unfit(rows, row_floats)
    assert (reason is None) == fits, reason
    if reason:
        assert reason.endswith("spills") and f"{rows} x {row_floats}" in reason


def test_register_tile_rows_are_whole_registers_then_powers_of_two():
    from convbench.kernels.register_tile import row_vectors

    assert row_vectors(48, 16) == [(0, 16), (16, 16), (32, 16)]   # 3 zmm, not <48 x float>
    assert row_vectors(20, 8) == [(0, 8), (8, 8), (16, 4)]
    assert row_vectors(3, 8) == [(0, 2), (2, 1)]
    assert row_vectors(64, 4) == [(i, 4) for i in range(0, 64, 4)]
