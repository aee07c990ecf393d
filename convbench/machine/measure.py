"""Measure every machine limit of this host into the object :mod:`.store` documents."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from convbench.machine import store
from convbench.machine.bandwidth import LEVELS, cache_levels, measure_triad_gbs, working_set_bytes
from convbench.machine.clock import measure_clock_ghz
from convbench.machine.peak import WIDTHS, measure_width


def measure_machine(threads: list[int], quick: bool = False,
                    progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Peak at each width, clock, and triad bandwidth per level for each thread count."""
    seconds, repeats = (0.05, 3) if quick else (0.3, 7)
    limits: dict[str, Any] = {
        "format_version": store.FORMAT_VERSION, "host": store.host_identity(),
        "measured": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "quick": quick, "peak_gflops": {str(t): {} for t in threads}, "bandwidth_gbs": {},
        "working_set_bytes": {}, "asm_width": {}, "notes": []}
    progress("clock")
    limits["clock_ghz"] = measure_clock_ghz(seconds, repeats)
    for width in WIDTHS:
        progress(f"peak at {width} bits")
        result = measure_width(width, threads, seconds, repeats)
        limits["asm_width"][width] = result["asm_width"]
        if result["asm_width"] != int(width):
            limits["notes"].append(f"{width}-bit peak missing: LLVM emitted "
                                   f"{result['asm_width'] or 'no'}-bit FMAs on this host")
            continue
        for t, gflops in result["gflops"].items():
            limits["peak_gflops"][t][width] = gflops
    caches = cache_levels()
    limits["caches"] = {k: {"size_bytes": c.size_bytes, "shared_by": c.shared_by,
                            "from_sysfs": c.from_sysfs} for k, c in caches.items()}
    limits["notes"] += [f"{k} size assumed ({c.size_bytes} bytes): not in sysfs"
                        for k, c in caches.items() if not c.from_sysfs]
    for level in LEVELS:
        progress(f"triad in {level}")
        limits["bandwidth_gbs"][level] = {
            str(t): measure_triad_gbs(level, t, caches, seconds / 2, repeats) for t in threads}
        limits["working_set_bytes"][level] = {
            str(t): working_set_bytes(caches, level, t) for t in threads}
    return limits
