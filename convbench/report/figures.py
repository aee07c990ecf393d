"""The report's figures: matplotlib with the Agg backend, one PNG per figure.

Every function takes the runs to show (name -> tidy table, name -> environment) and the
output directory, and returns the :class:`Figure` records it wrote (none when the data has
nothing to show, e.g. thread scaling for a single thread count).  Several runs are drawn
side by side: one panel column per run with a shared y axis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from convbench.machine.store import bandwidth_for, peak_for
from convbench.report import aggregate
from convbench.textsafe import file_part, mathtext

Runs = dict[str, pd.DataFrame]
DPI = 100
_LEVEL_STYLE = {"L1": ":", "L2": "-.", "L3": "--", "DRAM": "-"}


@dataclass(frozen=True)
class Figure:
    path: Path
    title: str
    caption: str


def _short(text: str, width: int = 28) -> str:
    """A user string (layer, run, algorithm, parameter) as a figure label: shortened, then
    made literal for matplotlib (textsafe.mathtext).  Every such string passes here."""
    text = str(text)
    return mathtext(text if len(text) <= width else text[: width - 1] + "…")


def _label(text: object) -> str:
    """A user string as a figure label at its full length."""
    return _short(str(text), 10**6)


def _colors(names: list[str]) -> dict[str, Any]:
    """One distinct color per name: tab10 up to ten names, tab20 up to twenty (the smoke
    suite alone has 13 algorithms; with tab10 direct and xnnpack were both blue)."""
    if len(names) <= 10:
        cmap, n = plt.get_cmap("tab10"), 10
    else:
        cmap, n = plt.get_cmap("tab20"), 20
    return {name: cmap(i % n) for i, name in enumerate(names)}


def _legend_outside(ax: Any, extra: tuple[Any, ...] = ()) -> None:
    """The legend right of the last panel, where it hides no point or bar; ``extra``:
    handles drawn by no artist of the panel (a key for bars of several colors)."""
    handles, _labels = ax.get_legend_handles_labels()
    ax.legend(handles=[*handles, *extra], fontsize="x-small", loc="upper left",
              bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


def _save(fig: Any, path: Path, title: str, caption: str) -> Figure:
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return Figure(path, title, caption)


def _panels(n: int, width: float = 6.5, height: float = 4.0, sharey: bool = True):
    fig, axes = plt.subplots(1, n, figsize=(width * n, height), sharey=sharey, squeeze=False)
    return fig, list(axes[0])


def _algorithms(runs: Runs) -> list[str]:
    return list(dict.fromkeys(a for t in runs.values() for a in aggregate.ok_rows(t)["algorithm"]))


def bars_by_layer(runs: Runs, out: Path) -> list[Figure]:
    """Grouped bars: GFLOP/s of each algorithm's best variant per layer, with the
    confidence interval of the median as error bars; one figure per thread count."""
    figures = []
    colors = _colors(_algorithms(runs))
    best = {name: aggregate.best_by_algorithm(t) for name, t in runs.items()}
    threads = sorted({int(x) for b in best.values() for x in b["threads"]})
    for t in threads:
        fig, axes = _panels(len(runs), width=max(6.5, 1.2 * _layer_count(runs) + 3))
        for ax, (name, frame) in zip(axes, best.items(), strict=True):
            frame = frame[frame["threads"] == t]
            layers = list(dict.fromkeys(frame["layer"]))
            algs = [a for a in colors if a in set(frame["algorithm"])]
            width = 0.8 / max(1, len(algs))
            for i, alg in enumerate(algs):
                rows = frame[frame["algorithm"] == alg].set_index("layer").reindex(layers)
                x = np.arange(len(layers)) + (i - (len(algs) - 1) / 2) * width
                # float64: flops is a nullable integer column, and a layer this algorithm
                # does not cover (reindexed in as missing) would be pandas.NA for matplotlib
                flops = rows["flops"].astype("float64")
                gflops = flops / rows["median_s"] / 1e9
                low = flops / rows["ci_high_s"] / 1e9
                high = flops / rows["ci_low_s"] / 1e9
                err = np.vstack([(gflops - low).clip(lower=0).fillna(0),
                                 (high - gflops).clip(lower=0).fillna(0)])
                ax.bar(x, gflops, width, yerr=err, capsize=2, label=_label(alg), color=colors[alg])
            ax.set_xticks(np.arange(len(layers)), [_short(s) for s in layers], rotation=30,
                          ha="right")
            ax.set_title(f"{_label(name)}: {t} thread{'s' if t > 1 else ''}")
            ax.grid(axis="y", alpha=0.3)
        axes[0].set_ylabel("GFLOP/s (best variant, 95% CI of the median)")
        _legend_outside(axes[-1])
        figures.append(_save(fig, out / f"gflops_by_layer_t{t}.png",
                             f"GFLOP/s by layer and algorithm, {t} thread(s)",
                             "Each algorithm's fastest variant per layer; error bars: the "
                             "confidence interval of the median time."))
    return figures


def _layer_count(runs: Runs) -> int:
    return max(t["layer"].nunique() for t in runs.values())


def roofline(runs: Runs, envs: dict[str, dict], out: Path) -> list[Figure]:
    """Every ok variant at its arithmetic intensity (nominal FLOPs / compulsory bytes)
    against the measured peak and bandwidth roofs of its run's host, when recorded; one
    figure per thread count, runs side by side."""
    colors = _colors(_algorithms(runs))
    threads = sorted({int(t) for table in runs.values()
                      for t in aggregate.ok_rows(table)["threads"]})
    figures = []
    for t in threads:
        fig, axes = _panels(len(runs), height=4.5)
        bare = []
        for ax, (name, table) in zip(axes, runs.items(), strict=True):
            ok = aggregate.ok_rows(table)
            ok = ok[(ok["threads"] == t) & (ok["compulsory_bytes"].fillna(0) > 0)]
            ai = (ok["flops"] / ok["compulsory_bytes"]).astype(float)
            for alg in colors:
                sel = ok["algorithm"] == alg
                if sel.any():
                    ax.scatter(ai[sel], ok.loc[sel, "gflops"], s=16, alpha=0.75,
                               color=colors[alg], label=_label(alg), zorder=3)
            machine = envs.get(name, {}).get("machine")
            if not _draw_roofs(ax, machine, t, ai, ok["gflops"]):
                bare.append(name)
                ax.set_title(f"{_label(name)}: roofline, {t} thread{'s' if t > 1 else ''}")
                ax.text(0.5, 0.97, "no machine limits recorded for this host: no roofs\n"
                        "(`convbench machine` measures them; then run again)",
                        transform=ax.transAxes, ha="center", va="top", fontsize="small",
                        bbox={"boxstyle": "round", "fc": "#fff6d5", "ec": "#e0b000"})
            else:
                ax.set_title(f"{_label(name)}: roofline, {t} thread{'s' if t > 1 else ''}")
            ax.set_xlabel("arithmetic intensity (FLOP / compulsory byte)")
            ax.grid(True, which="major", alpha=0.3)
        _legend_outside(axes[-1])
        axes[0].set_ylabel("GFLOP/s")
        caption = ("Every ok variant placed by nominal FLOPs over compulsory bytes (input + "
                   "weights + output). Roofs: the measured peak (best vector width) and the "
                   "plateaus of the triad bandwidth curve of the run's host at this thread "
                   "count; each case's own bound reads the curve at its footprint "
                   "(roofline_gbs).")
        if bare:
            caption += (f" No machine limits in {', '.join(bare)}: it was run with "
                        "--no-measure-machine or by an older convbench; `convbench machine` "
                        "on that host, then a new run, gives roofs.")
        figures.append(_save(fig, out / f"roofline_t{t}.png", f"Roofline, {t} thread(s)",
                             caption))
    return figures


def _plain_log_axes(ax: Any) -> None:
    """Log axes labelled 0.1, 1, 10 at the decades only: minor labels (2x10^0, 3x10^0, ...)
    overlapped as soon as the range spanned less than a decade or two."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10))
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(NullFormatter())


def _draw_roofs(ax: Any, machine: dict | None, threads: int, ai: pd.Series,
                gflops: pd.Series) -> bool:
    """Peak and bandwidth roofs from the machine limits, each labelled on its line; False
    when there are none.  The x range covers the variants and every ridge point, the y
    range the variants and the peak with room for its label."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_log_axes(ax)
    peak = peak_for(machine, threads)
    points = [v for v in gflops.tolist() if v > 0]
    if not math.isfinite(peak):
        if points:
            ax.set_ylim(min(points) / 2, max(points) * 4)   # room for the note on top
        if len(ai):
            # at least two decade ticks, as on a panel with roofs
            ax.set_xlim(float(ai.min()) / 4, float(ai.max()) * 4)
        return False
    roofs = {lv: bandwidth_for(machine, lv, threads) for lv in _LEVEL_STYLE}
    roofs = {lv: bw for lv, bw in roofs.items() if math.isfinite(bw) and bw > 0}
    ridges = [peak / bw for bw in roofs.values()]
    lo = min([*ai.tolist(), *ridges, 1.0]) / 4
    hi = max([*ai.tolist(), *ridges, 1.0]) * 4
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    ax.plot([lo, hi], [peak, peak], color="black", lw=1.2)
    ax.annotate(f"peak {peak:.0f} GFLOP/s", (lo, peak), xytext=(4, 3),
                textcoords="offset points", ha="left", va="bottom", fontsize="small")
    y_lo = min([*points, peak / 100]) / 2
    lines = [ax.plot(x, np.minimum(peak, bw * x), color="gray", ls=_LEVEL_STYLE[level],
                     lw=1)[0] for level, bw in roofs.items()]
    if lines:
        # a legend of this panel's roofs (each host has its own): labels on the lines
        # collided, the L1 and L2 ridges lie within a few percent of each other
        key = ax.legend(lines, [f"{level} {bw:.0f} GB/s" for level, bw in roofs.items()],
                        title="bandwidth roofs", fontsize="x-small", title_fontsize="x-small",
                        loc="lower right", framealpha=0.9)
        ax.add_artist(key)
    ax.set_xlim(lo, hi)
    ax.set_ylim(y_lo, peak * 2.5)
    return True


def heatmaps(runs: Runs, out: Path) -> list[Figure]:
    """Median time over two numeric parameters, for each algorithm that has two; one
    panel per layer (up to four) of the lowest thread count, one figure per run."""
    figures = []
    for run_i, (name, table) in enumerate(runs.items()):
        for alg in aggregate.algorithms_with_params(table):
            p1, p2 = aggregate.numeric_params(table, alg)[:2]
            frame = aggregate.param_frame(table, alg)
            frame = frame[frame["threads"] == frame["threads"].min()]
            layers = list(dict.fromkeys(frame["layer"]))[:4]
            fig, axes = _panels(len(layers), width=4.8, height=3.6, sharey=False)
            fig.set_layout_engine("constrained")
            for ax, layer in zip(axes, layers, strict=True):
                grid = frame[frame["layer"] == layer].pivot_table(
                    index=f"p:{p1}", columns=f"p:{p2}", values="median_s", aggfunc="min")
                ms = grid.to_numpy() * 1e3
                im = ax.imshow(ms, cmap="viridis_r", aspect="auto")
                ax.set_xticks(range(grid.shape[1]), [_label(v) for v in grid.columns])
                ax.set_yticks(range(grid.shape[0]), [_label(v) for v in grid.index])
                ax.set_xlabel(_label(p2))
                ax.set_ylabel(_label(p1))
                ax.set_title(_short(layer, 34), fontsize="small")
                for (i, j), v in np.ndenumerate(ms):
                    if np.isfinite(v):
                        ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=7,
                                color="white" if v > np.nanmean(ms) else "black")
                fig.colorbar(im, ax=ax, label="ms")
            fig.suptitle(_label(f"{name}: {alg} median time (ms) over {p1} x {p2}"))
            figures.append(_save(fig, out / f"heatmap_{file_part(alg)}_{run_i}.png",
                                 f"{alg}: {p1} x {p2} ({name})",
                                 "Best median time (ms) over the other parameters; yellow is "
                                 "fastest, dark purple slowest."))
    return figures


def thread_scaling(runs: Runs, out: Path) -> list[Figure]:
    """Network GFLOP/s of each algorithm's best variants against the thread count."""
    scaling = {name: aggregate.thread_scaling(t) for name, t in runs.items()}
    if all(s.empty for s in scaling.values()):
        return []
    colors = _colors(_algorithms(runs))
    fig, axes = _panels(len(runs))
    for ax, (name, frame) in zip(axes, scaling.items(), strict=True):
        for alg, rows in frame.groupby("algorithm", sort=False):
            ax.plot(rows["threads"], rows["gflops"], marker="o", color=colors[alg],
                    label=_label(alg))
        if not frame.empty:
            ax.set_xticks(sorted(frame["threads"].unique()))
        ax.set_xlabel("threads")
        ax.set_title(f"{_label(name)}: thread scaling")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:    # a run with one thread count draws none
            ax.legend(fontsize="small")
    axes[0].set_ylabel("network GFLOP/s (count-weighted)")
    return [_save(fig, out / "thread_scaling.png", "Thread scaling",
                  "Count-weighted GFLOP/s over the layers each algorithm covers at every "
                  "thread count.")]


# what each counter panel's y axis reads, and whether the metric is a share (drawn in %)
_COUNTER_AXIS = {
    "ipc": ("instructions per cycle", False),
    "l1d_miss_rate": ("L1D miss rate (% of data refs)", True),
    "llc_miss_rate": ("LLC miss rate (% of refs reaching it)", True),
    "fma_utilization": ("FMA utilization (% of peak)", True),
    "counted_gflops": ("counted GFLOP/s", False),
    "dram_bandwidth_gbs": ("DRAM bandwidth (GB/s)", False),
    "sim_ir": ("simulated instructions per call", False),
}


def _why_empty(table: pd.DataFrame, metric: str) -> str:
    """The recorded reason a metric has no figure in a run (its most common one)."""
    if metric not in table:
        return "not recorded in this run"
    reasons = table.get(f"{metric}_reason")
    if reasons is not None:
        reasons = reasons.dropna().astype(str)
        reasons = reasons[reasons != ""]
        if len(reasons):
            return str(reasons.value_counts().index[0])
    return "no figure recorded"


def counter_panels(runs: Runs, out: Path) -> list[Figure]:
    """One panel row per counter metric with a figure in some run (and the simulated
    instruction count, when there is one): the figure of each algorithm's best variant per
    layer (lowest thread count), runs side by side.  A panel without figures says why."""
    from matplotlib.ticker import EngFormatter, PercentFormatter

    counters = {name: aggregate.counter_figures(t) for name, t in runs.items()}
    metrics = [m for m in _COUNTER_AXIS
               if any(m in c and c[m].notna().any() for c in counters.values())]
    if not metrics:
        return []
    colors = _colors(_algorithms(runs))
    # rows share a y range by hand, not sharey: a panel without figures is switched off,
    # and with sharey a run beside it lost its tick labels
    fig, grid = plt.subplots(len(metrics), len(runs), squeeze=False,
                             figsize=(6.5 * len(runs), 3.2 * len(metrics)))
    for col, (name, figures) in enumerate(counters.items()):
        best = figures[figures["threads"] == figures["threads"].min()] if len(figures) \
            else figures
        layers = list(dict.fromkeys(best["layer"])) if len(best) else []
        algs = [a for a in colors if len(best) and a in set(best["algorithm"])]
        width = 0.8 / max(1, len(algs))
        for row, metric in enumerate(metrics):
            ax = grid[row][col]
            axis, share = _COUNTER_AXIS[metric]
            ax.set_title(f"{_label(name)}: {axis}", fontsize="small")
            if metric not in best or not best[metric].notna().any():
                ax.text(0.5, 0.5, _short(_why_empty(runs[name], metric), 60),
                        ha="center", va="center", transform=ax.transAxes, fontsize="small",
                        wrap=True)
                ax.axis("off")
                continue
            scale = 100.0 if share else 1.0
            for i, alg in enumerate(algs):
                vals = best[best["algorithm"] == alg].set_index("layer").reindex(layers)[metric]
                ax.bar(np.arange(len(layers)) + (i - (len(algs) - 1) / 2) * width,
                       vals.astype(float) * scale, width, color=colors[alg], label=_label(alg))
            ax.yaxis.set_major_formatter(PercentFormatter(decimals=None) if share
                                         else EngFormatter(sep=""))
            ax.set_xticks(np.arange(len(layers)), [_short(s) for s in layers], rotation=20,
                          ha="right", fontsize="small")
            ax.set_ylabel(axis, fontsize="small")
            ax.grid(axis="y", alpha=0.3)
    for row in grid:
        drawn = [ax for ax in row if ax.axison]
        top = max((ax.get_ylim()[1] for ax in drawn), default=1.0)
        for ax in drawn:
            ax.set_ylim(0, top)
    shown = {label: handle for ax in grid.flat
             for handle, label in zip(*ax.get_legend_handles_labels(), strict=True)}
    if shown:      # one legend for every run's algorithms, above the panels
        fig.legend(list(shown.values()), list(shown), loc="upper center",
                   ncol=min(len(shown), 8), fontsize="x-small")
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / (3.2 * len(metrics))))
    source = "simulated (callgrind)" if any(
        "sim_ir" in c and c["sim_ir"].notna().any() for c in counters.values()) \
        else "hardware"
    # a named cache model's counts are a model of this host's code, not that core's: the
    # caption says so per run
    models = [f"{_label(name)}: {line}" for name, table in runs.items()
              for line in aggregate.cache_model_captions(table)]
    return [_save(fig, out / "counters.png", "Counters",
                  f"Counter figures ({source}) of each algorithm's best variant per layer, "
                  "the fewest threads; the numbers are in the Counter figures table, and "
                  "metrics without figures are listed under Missing counters."
                  + "".join(f" {m}." for m in models))]


def network_stack(runs: Runs, out: Path) -> list[Figure]:
    """Stacked bar of count-weighted time per layer for each run's best plan (lowest
    thread count): where the network's time goes."""
    plans = {}
    for name, table in runs.items():
        plan = aggregate.best_plan(table)
        plans[name] = plan[plan["threads"] == plan["threads"].min()] if len(plan) else plan
    layers = list(dict.fromkeys(layer for p in plans.values() for layer in p["layer"]))
    if not layers:
        return []
    cmap = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(2.2 * len(plans) + 4.5, 4.5))
    bottoms = np.zeros(len(plans))
    for i, layer in enumerate(layers):
        ms = np.array([float(p.set_index("layer")["total_s"].get(layer, 0.0)) * 1e3
                       for p in plans.values()])
        ax.bar(range(len(plans)), ms, 0.6, bottom=bottoms, color=cmap(i % 20),
               label=_short(layer, 32))
        bottoms += ms
    ax.set_xticks(range(len(plans)), [_label(p) for p in plans])
    ax.set_ylabel("network time (ms), count-weighted")
    t = min(int(p["threads"].min()) for p in plans.values() if len(p))
    ax.set_title(f"Best plan: time per layer, {t} thread{'s' if t > 1 else ''}")
    ax.legend(fontsize="x-small", bbox_to_anchor=(1.02, 1), loc="upper left")
    return [_save(fig, out / "network_best_plan.png", "Network time per layer (best plan)",
                  "The fastest variant of every layer times its count in the network; one "
                  "bar per run.")]


def run_ratio(runs: Runs, out: Path) -> list[Figure]:
    """For two or more runs: each later run's median time over the first's, per case
    joined on identity, grouped by algorithm (below 1: faster than the first run)."""
    if len(runs) < 2:
        return []
    from matplotlib.ticker import FormatStrFormatter

    joined = aggregate.join_runs(runs)
    algorithm = joined["variant"].str.split("/").str[0]
    algs = list(dict.fromkeys(algorithm))
    names = list(runs)
    colors = _colors(names[1:])
    rng = np.random.default_rng(0)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(algs) + 2), 4))
    offsets = np.linspace(-0.2, 0.2, len(names) - 1) if len(names) > 2 else [0.0]
    for name, offset in zip(names[1:], offsets, strict=True):
        ratio = joined[f"time ratio [{name}/{names[0]}]"]
        x = algorithm.map({a: i for i, a in enumerate(algs)}) + offset
        sel = ratio.notna()
        ax.scatter(x[sel] + rng.uniform(-0.08, 0.08, sel.sum()), ratio[sel], s=12, alpha=0.7,
                   color=colors[name], label=_label(f"{name} / {names[0]}"))
    ax.axhline(1.0, color="black", lw=1)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FormatStrFormatter("%.2g"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%.2g"))
    ax.set_xticks(range(len(algs)), [_label(a) for a in algs])
    ax.set_ylabel("median time ratio (< 1: faster)")
    ax.set_title("Run vs run, every case joined on identity")
    ax.grid(axis="y", alpha=0.3, which="both")
    ax.legend(fontsize="small")
    return [_save(fig, out / "run_ratio.png", "Run vs run",
                  "Each point is one case present in both runs (joined on layer, variant, "
                  "threads and vector width), grouped by algorithm.")]


NETWORK_FIGURE = "network_pass"


def network_figure_stem(index: int) -> str:
    """File stem of the network-pass figure of the ``index``-th directory with one."""
    return f"{NETWORK_FIGURE}_{index}"


def network_passes(networks: dict[str, Any], out: Path) -> list[Figure]:
    """Per directory with a network pass (``networks``: label -> report.network.NetworkRun):
    horizontal bars of each pass's measured median with its CI, the predicted time as a
    marker and the per-layer bound as a dashed line (computed, never run); one panel per
    thread count and cache mode."""
    from matplotlib.patches import Patch

    from convbench.harness.network_run import BOUND, PASSES
    from convbench.report.network import WHAT

    figures = []
    for index, (label, run) in enumerate(networks.items()):
        frame = run.frame
        settings = list(dict.fromkeys(zip(frame["threads"], frame["cache"], strict=True)))
        if not settings:
            continue
        fig, axes = _panels(len(settings), width=5.5, height=0.5 * len(PASSES) + 1.6)
        colors = _colors(list(PASSES))
        for ax, (threads, cache) in zip(axes, settings, strict=True):
            rows = frame[(frame["threads"] == threads) & (frame["cache"] == cache)]
            rows = rows.set_index("pass").reindex(list(PASSES))
            y = np.arange(len(PASSES))[::-1]   # the plan on top
            ok = (rows["status"] == "ok").fillna(False).to_numpy(bool)
            ms = np.where(ok, rows["median_s"].astype(float) * 1e3, np.nan)
            err = np.vstack([np.clip(ms - rows["ci_low_s"].astype(float) * 1e3, 0, None),
                             np.clip(rows["ci_high_s"].astype(float) * 1e3 - ms, 0, None)])
            ax.barh(y, ms, 0.6, xerr=np.nan_to_num(err), capsize=3,
                    color=[colors[p] for p in PASSES])
            # predictions are for the plan's thread count and cache mode: elsewhere no
            # diamonds (a warm prediction beside a cold pass reads as a model error)
            first = frame.iloc[0]
            planned = (str(first["plan_cache"]) == str(cache)
                       and int(first["plan_threads"]) == int(threads))
            predicted = rows["predicted_s"].astype(float) * 1e3 if planned else \
                pd.Series(np.nan, index=rows.index)
            ax.scatter(predicted, y, marker="D", s=28, color="black", zorder=3,
                       label="predicted (plan.json)")
            # each label right of its CI's end: at the bar's end it sat on the error bar
            ends = np.where(ok, ms + err[1], 0.0)
            for yi, value, end, timed, status in zip(y, ms, ends, ok, rows["status"],
                                                     strict=True):
                ax.annotate(f"{value:.3g} ms" if timed else f"not timed ({status})",
                            (end, yi), xytext=(6, 0), textcoords="offset points",
                            va="center", fontsize="x-small")
            bound = frame[(frame["threads"] == threads) & (frame["cache"] == cache)
                          & (frame["pass"] == BOUND)]["predicted_s"].astype(float)
            if planned and len(bound) and np.isfinite(bound.iloc[0]):
                ax.axvline(bound.iloc[0] * 1e3, color="gray", ls="--", lw=1,
                           label="per-layer bound (computed, not runnable)")
            ax.set_yticks(y, [_label(p) for p in PASSES])
            ax.set_xlabel("whole network pass (ms)")
            ax.set_xlim(0, np.nanmax([*ends, *predicted, 1e-6]) * 1.3)   # room for labels
            ax.set_title(f"{threads} thread{'s' if threads > 1 else ''}, cache {cache}",
                         fontsize="small")
            ax.grid(axis="x", alpha=0.3)
        fig.suptitle(_label(f"{label}: network pass"), fontsize="medium")
        # one key for every panel (the bound is drawn in the plan's setting only, maybe
        # not in the last panel), and a gray one for the bars: each pass has its own color
        keys: dict[str, Any] = {}
        for ax in axes:
            for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
                keys.setdefault(text, handle)
        shown = set(axes[-1].get_legend_handles_labels()[1])
        _legend_outside(axes[-1], (*(h for t, h in keys.items() if t not in shown),
                                   Patch(facecolor="0.6", label="measured median (95% CI)")))
        figures.append(_save(fig, out / f"{network_figure_stem(index)}.png",
                             f"Network pass: the plan vs the alternatives ({label})",
                             "Measured median of each whole network pass with its 95% CI; "
                             "diamonds: the predicted time from plan.json and dashed: "
                             f"{WHAT[BOUND]}, both in the plan's own thread count and "
                             "cache mode only."))
    return figures


def all_figures(runs: Runs, envs: dict[str, dict], out: Path) -> list[Figure]:
    out.mkdir(parents=True, exist_ok=True)
    return [*bars_by_layer(runs, out), *roofline(runs, envs, out), *network_stack(runs, out),
            *run_ratio(runs, out), *thread_scaling(runs, out), *heatmaps(runs, out),
            *counter_panels(runs, out)]
