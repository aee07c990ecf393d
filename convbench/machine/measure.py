"""Measure every machine limit of this host into the object :mod:`.store` documents.

Two profiles: ``full`` (``convbench machine``) and ``quick`` (``--quick``, and what ``run``
measures on a host's first use).  Limits are maxima, so each figure is the best of
``repeats`` timed calls of at least ``min_seconds``; the quick profile trades noise for time
(about 20 s on the 2-core hosts, most of it the two numba processes of the peak benchmark).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from convbench import host
from convbench.machine import store
from convbench.machine.bandwidth import (
    LEVELS,
    cache_levels,
    curve_sizes,
    largest_bytes,
    measure_curve,
    upper_envelope,
    working_set_bytes,
)
from convbench.machine.clock import measure_clock_ghz
from convbench.machine.peak import SCALING_RETRIES, WIDTHS, measure_width


@dataclass(frozen=True)
class Profile:
    name: str
    min_seconds: float           # per timed call of the peak and clock benchmarks
    repeats: int                 # timed calls; the best counts
    curve_seconds: float         # per timed call of one point of the bandwidth curve
    points_per_octave_pair: int  # bandwidth curve density (per factor 4 of size)


PROFILES = {
    "full": Profile("full", 0.3, 7, 0.1, 4),
    # 16 KiB .. 64 MiB at 3 points per factor 4 is 19 sizes per thread count: ~5 s for 1
    # and 2 threads on the 2-core AMD host
    "quick": Profile("quick", 0.05, 3, 0.02, 3),
}


def measure_machine(threads: list[int], quick: bool = False,
                    progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Peak at each width, clock, and the triad bandwidth curve for each thread count."""
    profile = PROFILES["quick" if quick else "full"]
    started = time.perf_counter()
    limits: dict[str, Any] = {
        "format_version": store.FORMAT_VERSION, "host": store.host_identity(),
        "measured": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "quick": quick, "profile": profile.name,
        "peak_gflops": {str(t): {} for t in threads}, "asm_width": {}, "notes": []}
    progress("clock")
    limits["clock_ghz"] = measure_clock_ghz(profile.min_seconds, profile.repeats)
    for width in WIDTHS:
        _peak(limits, width, threads, profile, progress)
    caches = cache_levels()
    limits["caches"] = {k: {"size_bytes": c.size_bytes, "shared_by": c.shared_by,
                            "from_sysfs": c.from_sysfs} for k, c in caches.items()}
    limits["notes"] += [f"{k} size assumed ({c.size_bytes} bytes): not in sysfs"
                        for k, c in caches.items() if not c.from_sysfs]
    sizes = curve_sizes(largest_bytes(caches), profile.points_per_octave_pair)
    limits["bandwidth_curve"], limits["bandwidth_curve_measured"] = {}, {}
    for t in threads:
        progress(f"triad bandwidth curve on {t} thread{'s' if t > 1 else ''} ({len(sizes)} "
                 f"sizes, {sizes[0] >> 10} KiB to {sizes[-1] >> 20} MiB per thread)")
        points = measure_curve(sizes, t, profile.curve_seconds, profile.repeats)
        limits["bandwidth_curve_measured"][str(t)] = points
        limits["bandwidth_curve"][str(t)] = upper_envelope(points)
    limits["working_set_bytes"] = {level: {str(t): working_set_bytes(caches, level, t)
                                           for t in threads} for level in LEVELS}
    limits["bandwidth_gbs"] = {level: {t: store.bandwidth_at(limits, size, int(t))
                                       for t, size in by_t.items()}
                               for level, by_t in limits["working_set_bytes"].items()}
    limits["seconds"] = round(time.perf_counter() - started, 1)
    return limits


def _peak(limits: dict[str, Any], width: str, threads: list[int], profile: Profile,
          progress: Callable[[str], None]) -> None:
    """The peak at one width into ``limits``; a width the CPU lacks is noted, not run."""
    if width == "512" and "+avx512f" not in (host.cpu_features("512") or "").split(","):
        # saves a numba process (~2 s) on AVX2-only hosts; LLVM would emit 256-bit FMAs
        limits["asm_width"][width] = None
        limits["notes"].append("512-bit peak missing: this CPU has no AVX-512")
        return
    progress(f"peak at {width} bits")
    result = measure_width(width, threads, profile.min_seconds, profile.repeats)
    limits["asm_width"][width] = result["asm_width"]
    if result["asm_width"] != int(width):
        limits["notes"].append(f"{width}-bit peak missing: LLVM emitted "
                               f"{result['asm_width'] or 'no'}-bit FMAs on this host")
        return
    for t, gflops in result["gflops"].items():
        limits["peak_gflops"][t][width] = gflops
    limits["notes"] += scaling_notes(width, result.get("unscaled", {}))


def scaling_notes(width: str, unscaled: dict[str, float]) -> list[str]:
    """A note per thread count whose peak stayed far below t x the 1-thread one after every
    attempt (``unscaled``: the peak over the 1-thread one, as :mod:`.peak` judged it).
    Stored silently, such a figure turned up only later, as kernels' shares above 100%:
    on the Zen 3 host a first-use measurement stored 107 GFLOP/s on 2 threads against 87 on
    one (1.23x), and every 2-thread run after it flagged most cases; `convbench machine` on
    the idle host measured 172 (1.91x)."""
    return [f"{t}-thread {width}-bit peak only {ratio:.2f}x the 1-thread one after "
            f"{1 + SCALING_RETRIES} attempts: threads sharing a core, or another load on "
            f"the CPUs; shares on {t} threads may read above 100% (re-run `convbench "
            "machine` on an idle host)"
            for t, ratio in sorted(unscaled.items(), key=lambda kv: int(kv[0]))]
