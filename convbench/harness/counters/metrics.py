"""Derived counter metrics, each NaN with a ``<name>_reason`` when an input is missing.

All inputs are per kernel call.  With C = cycles, I = instructions, L1 = L1D loads,
M1 = L1D misses, LR = LLC references, LM = LLC misses, F = FP operations retired (from the
family's FP events, see :mod:`events`), t = wall seconds of one call, P = peak FP ops per
cycle of one core (:class:`events.PeakSpec`), B = cache line bytes:

- ``ipc``               = I / C
- ``l1d_miss_rate``     = M1 / L1
- ``llc_miss_rate``     = LM / LR
- ``fma_utilization``   = F / (C x P)      (FP pipe utilization; C sums over threads)
- ``counted_gflops``    = F / t / 1e9      (compare with the nominal ``gflops``: their ratio
                                            exposes wasted work such as padding lanes)
- ``dram_bandwidth_gbs``= LM x B / t / 1e9 (demand misses only: a lower bound)

A metric is never estimated from other metrics: a missing input makes it missing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

Metrics = dict[str, float | str]


def _ratio(name: str, num: str, den: str, values: Mapping[str, float],
           reasons: Mapping[str, str], out: Metrics,
           combine: Callable[[float, float], float] = lambda a, b: a / b) -> None:
    for key in (num, den):
        v = values.get(key, math.nan)
        if v is None or math.isnan(v):
            out[name] = math.nan
            out[f"{name}_reason"] = f"{key}: {reasons.get(key) or 'not counted'}"
            return
    if values[den] == 0:
        out[name] = math.nan
        out[f"{name}_reason"] = f"{den} is zero"
        return
    out[name] = combine(values[num], values[den])


def derive(values: Mapping[str, float], reasons: Mapping[str, str], *,
           seconds: float = math.nan, peak_ops_per_cycle: float = math.nan,
           line_bytes: int = 64) -> Metrics:
    """Metrics from per-call ``values`` by role (plus ``fp_ops``); see the module docstring.

    ``reasons`` gives, by role, why a value is missing.  ``seconds`` is the wall time of
    one call in the counted region.
    """
    v = dict(values)
    r = dict(reasons)
    v["seconds"] = seconds
    r.setdefault("seconds", "region time unknown")
    v["peak"] = peak_ops_per_cycle
    r.setdefault("peak", "peak FP ops per cycle unknown")
    out: Metrics = {}
    _ratio("ipc", "instructions", "cycles", v, r, out)
    _ratio("l1d_miss_rate", "l1d_misses", "l1d_loads", v, r, out)
    _ratio("llc_miss_rate", "llc_misses", "llc_refs", v, r, out)
    # F / (C x P): first check C x P through a combined denominator
    v["cycles_x_peak"] = v.get("cycles", math.nan) * v["peak"]
    r["cycles_x_peak"] = (r.get("cycles") if math.isnan(v.get("cycles", math.nan))
                          else r["peak"]) or "not counted"
    _ratio("fma_utilization", "fp_ops", "cycles_x_peak", v, r, out)
    _ratio("counted_gflops", "fp_ops", "seconds", v, r, out, lambda f, t: f / t / 1e9)
    _ratio("dram_bandwidth_gbs", "llc_misses", "seconds", v, r, out,
           lambda m, t: m * line_bytes / t / 1e9)
    return out


def fp_ops(counts: Mapping[str, float], weights: Mapping[str, float],
           reasons: Mapping[str, str], no_ops_reason: str = "") -> tuple[float, str]:
    """FP operations = sum(count x ops per count) over the FP events, or NaN and why.

    Any missing FP event makes the total missing: a partial sum would undercount.
    """
    if no_ops_reason:
        return math.nan, no_ops_reason
    if not weights:
        return math.nan, "no FP events in the event map"
    total = 0.0
    for event, ops in weights.items():
        c = counts.get(event, math.nan)
        if math.isnan(c):
            return math.nan, f"{event}: {reasons.get(event) or 'not counted'}"
        total += c * ops
    return total, ""
