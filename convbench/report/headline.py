"""The answer a report leads with, per run and thread count: how fast the network can go
(the best plan), how own kernels stand against the best library, how close the best own
kernels come to the machine, and which layers hold the time.

Definitions (each stated on the page too):
- best plan: the fastest ok variant of every layer, own or library; network time = the sum
  over layers of its median time x the layer's count (aggregate.best_plan);
- own / library network time: the same sum over the fastest own / library variant per
  layer, given only when that side covers every layer; the ratio is library / own (> 1:
  ours is faster);
- share of peak / roofline: time-weighted mean of the best own kernels' shares, which is
  the network's performed FLOP rate over the peak (likewise for the roofline bound);
- dominant layers: the three largest shares of the best plan's network time.

Where the directory also holds a network pass (``convbench run --network``), the network
time is the plan pass's measured median at the same thread count and cache mode instead:
one pass of the whole graph, glue and layout transforms included (:func:`with_network_pass`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from convbench.report import aggregate, units
from convbench.report.network import NetworkRun, plan_time

TOP_LAYERS = 3


@dataclass(frozen=True)
class Headline:
    """The headline figures of one run at one thread count (NaN: not measurable)."""

    run: str
    threads: int
    layers: int                 # layers in the suite
    covered: int                # layers with an ok case
    network_s: float            # best plan
    network_gflops: float
    own_s: float                # best own variant per layer, all layers covered
    library_s: float            # best library variant per layer, all layers covered
    library_names: str          # which libraries ran ("" none)
    peak_share: float           # of the best own kernels, time-weighted
    roofline_share: float
    dominant: tuple[tuple[str, float, str, float], ...]   # (layer, share, variant, time)
    measured_pass: bool = False  # network_s is the plan's measured network pass
    layer_sum_s: float = float("nan")   # the best plan's sum over layers, when it is
    sweep: bool = True           # False: the directory holds a network pass only

    @property
    def own_vs_library(self) -> float:
        return self.library_s / self.own_s


def _plan_time(best: pd.DataFrame, counts: pd.Series, layers: int) -> float:
    if best.empty or best["layer"].nunique() < layers:
        return float("nan")
    return float((best["median_s"] * best["layer"].map(counts)).sum())


def _weighted(best: pd.DataFrame, counts: pd.Series, column: str) -> float:
    """Mean of ``column`` weighted by each layer's count-weighted time, NaN when any layer
    lacks it (no machine limits, or a flagged share)."""
    if best.empty or column not in best or best[column].isna().any():
        return float("nan")
    weight = best["median_s"] * best["layer"].map(counts)
    return float((best[column] * weight).sum() / weight.sum())


def headlines(run: str, table: pd.DataFrame) -> list[Headline]:
    """One :class:`Headline` per thread count of the run's ok cases."""
    counts = table.drop_duplicates("layer").set_index("layer")["layer_count"].fillna(1)
    flops = table.drop_duplicates("layer").set_index("layer")["flops"].astype("float64")
    ok = aggregate.ok_rows(table)
    library = ok["baseline"].fillna(False).astype(bool)
    plan = aggregate.best_plan(table)
    out = []
    for threads in sorted(ok["threads"].unique()):
        at = ok["threads"] == threads
        best_own = aggregate.fastest(ok[at & ~library], ["layer"])
        best_lib = aggregate.fastest(ok[at & library], ["layer"])
        steps = plan[plan["threads"] == threads]
        network = _plan_time(steps, counts, len(counts))
        top = steps.sort_values("share", ascending=False).head(TOP_LAYERS)
        out.append(Headline(
            run=run, threads=int(threads), layers=len(counts), covered=len(steps),
            network_s=network,
            network_gflops=float((flops * counts).sum() / network / 1e9)
            if np.isfinite(network) else float("nan"),
            own_s=_plan_time(best_own, counts, len(counts)),
            library_s=_plan_time(best_lib, counts, len(counts)),
            library_names=", ".join(dict.fromkeys(ok[at & library]["algorithm"])),
            peak_share=_weighted(best_own, counts, "peak_share"),
            roofline_share=_weighted(best_own, counts, "roofline_share"),
            dominant=tuple((r.layer, float(r.share), r.variant, float(r.total_s))
                           for r in top.itertuples(index=False))))
    return out


def with_network_pass(h: Headline, frame: pd.DataFrame, cache: str) -> Headline:
    """``h`` with the plan pass's measured time as the network time, when the pass was
    timed at ``h``'s thread count in ``cache`` mode (the rates follow: same conv FLOPs)."""
    measured = plan_time(frame, h.threads, cache)
    if not np.isfinite(measured):
        return h
    flops = h.network_gflops * h.network_s   # GFLOP; NaN when the sweep misses a layer
    return replace(h, network_s=measured, network_gflops=flops / measured,
                   measured_pass=True, layer_sum_s=h.network_s)


def network_headlines(run: NetworkRun) -> list[Headline]:
    """Headlines of a directory that holds a network pass and no sweep: the measured plan
    pass per thread count and cache mode, nothing else known."""
    frame = run.frame
    out = []
    for (threads, cache), _rows in frame.groupby(["threads", "cache"], sort=False):
        measured = plan_time(frame, int(threads), str(cache))
        out.append(Headline(
            run=f"{run.name} [{cache}]", threads=int(threads), layers=0, covered=0,
            network_s=measured, network_gflops=float("nan"), own_s=float("nan"),
            library_s=float("nan"), library_names="", peak_share=float("nan"),
            roofline_share=float("nan"), dominant=(), measured_pass=np.isfinite(measured),
            sweep=False))
    return out


def _network_text(h: Headline) -> str:
    if h.measured_pass:
        rate = (f", {units.gflops(h.network_gflops)} of conv FLOPs"
                if np.isfinite(h.network_gflops) else "")
        layers = (f"; the sum of the best layers alone: {units.seconds(h.layer_sum_s)}"
                  if np.isfinite(h.layer_sum_s) else "")
        return (f"{units.seconds(h.network_s)} measured: one pass of the whole network by "
                f"plan.json (convs, glue and layout transforms){rate}{layers}")
    if not h.sweep:
        return "none: the plan's network pass was not timed (see Network pass)"
    if not np.isfinite(h.network_s):
        return f"none: only {h.covered} of {h.layers} layers have an ok case"
    return f"{units.seconds(h.network_s)} ({units.gflops(h.network_gflops)})"


def _versus_text(h: Headline) -> str:
    if not h.library_names:
        return "no library baseline ran (not installed, or not in the sweep)"
    if not (np.isfinite(h.own_s) and np.isfinite(h.library_s)):
        return "not comparable: own kernels or libraries miss a layer"
    ratio = h.own_vs_library
    word = "faster" if ratio >= 1 else "slower"
    factor = ratio if ratio >= 1 else 1 / ratio
    return (f"own {units.seconds(h.own_s)} vs library {units.seconds(h.library_s)}: own "
            f"kernels {factor:.2f}x {word}")


def _share_text(h: Headline) -> str:
    if not np.isfinite(h.peak_share):
        return ("unknown: no machine limits recorded for this run's host (`convbench "
                "machine` measures them)")
    roof = (f", {units.percent(h.roofline_share)} of the roofline bound"
            if np.isfinite(h.roofline_share) else "")
    return f"{units.percent(h.peak_share)} of peak{roof}"


def _dominant_text(h: Headline) -> str:
    return "; ".join(f"{layer} {units.percent(share)} ({units.seconds(time_s)}, {variant})"
                     for layer, share, variant, time_s in h.dominant) or "-"


ROWS = (
    ("network time, best plan", _network_text),
    ("best own vs best library", _versus_text),
    ("best own kernels: share of the machine", _share_text),
    (f"layers that dominate (top {TOP_LAYERS} of the best plan's time)", _dominant_text),
)

ABOUT = ("Per run and thread count. Best plan: the fastest ok variant of every layer (own or "
         "library), network time = the sum of its median times x each layer's count. Own "
         "vs library: the same sum over the fastest own and the fastest library variant per "
         "layer. Share of the machine: the best own kernels' shares of peak and of the "
         "roofline bound, weighted by their time (= the network's FLOP rate over the "
         "peak). Where the directory holds a network pass (convbench run --network), the "
         "network time is the plan's measured pass instead (it says so): glue and layout "
         "transforms included, which the sum over layers leaves out. Timings of a "
         "one-process run (the smoke suite) are a first look.")

NO_SWEEP = "- (a network pass only: no sweep in this directory)"


def headline_frame(items: list[Headline]) -> pd.DataFrame:
    """The headline as text: one row per figure, one column per run and thread count
    (several runs side by side)."""
    columns = {f"{h.run}, {h.threads} thread{'s' if h.threads > 1 else ''}":
               [render(h) if h.sweep or i == 0 else NO_SWEEP
                for i, (_, render) in enumerate(ROWS)] for h in items}
    return pd.DataFrame({"": [name for name, _ in ROWS], **columns})
