"""The report's numbers, with pandas: best variants, speed-ups, network totals, sensitivity.

Every function takes the tidy table of one run (schema.COLUMNS) and returns a new frame;
only rows with status "ok" carry times.  A "setting" is a (layer, threads) pair: variants
are compared within a setting, since a 2-thread time is no rival to a 1-thread one.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from convbench.identity import WARM
from convbench.results import schema
from convbench.spec.descriptor import parse_descriptor
from convbench.spec.sweep import CACHE_MODES
from convbench.status import Status

DIRECT = "direct"
SETTING = ["layer", "threads"]
COLD_WEIGHTS = CACHE_MODES[1]


def by_cache_mode(name: str, table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """A run's table split by cache mode, labelled ``name [mode]``; a run timed warm only
    keeps its name.  Cold and warm times are never rivals: every section of the report and
    the run summary show each mode as a run of its own, side by side."""
    modes = table["cache"].fillna(WARM) if "cache" in table else pd.Series(WARM,
                                                                           index=table.index)
    if set(modes) <= {WARM}:
        return {name: table}
    return {f"{name} [{mode}]": table[modes == mode] for mode in dict.fromkeys(modes)}


def ok_rows(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["status"] == Status.OK].copy()


def fastest(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The row with the smallest median time in each group of ``keys``."""
    if frame.empty:
        return frame
    return frame.loc[frame.groupby(keys, sort=False)["median_s"].idxmin()]


def best_by_algorithm(table: pd.DataFrame) -> pd.DataFrame:
    """Per layer, thread count and algorithm, its fastest variant with speed-ups over the
    best direct variant and the best library baseline of the same setting (NaN when the
    run has none)."""
    ok = ok_rows(table)
    best = fastest(ok, [*SETTING, "algorithm"])
    direct = fastest(ok[ok["algorithm"] == DIRECT], SETTING)
    base = fastest(ok[ok["baseline"].fillna(False).astype(bool)], SETTING)
    out = best.merge(direct[[*SETTING, "median_s"]].rename(columns={"median_s": "direct_s"}),
                     on=SETTING, how="left")
    out = out.merge(base[[*SETTING, "median_s"]].rename(columns={"median_s": "baseline_s"}),
                    on=SETTING, how="left")
    out["speedup_vs_direct"] = out["direct_s"] / out["median_s"]
    out["speedup_vs_baseline"] = out["baseline_s"] / out["median_s"]
    order = {name: i for i, name in enumerate(dict.fromkeys(table["layer"]))}
    out = out.sort_values(["layer", "threads", "median_s"],
                          key=lambda s: s.map(order) if s.name == "layer" else s)
    cols = ["layer", "threads", "algorithm", "variant", "vector_width", "median_s",
            "ci_low_s", "ci_high_s", "gflops", "peak_share", "roofline_share",
            "roofline_level", "speedup_vs_direct",
            "speedup_vs_baseline", "asm_profile", "layer_count", "flops", "compulsory_bytes"]
    return out[[c for c in cols if c in out.columns]].reset_index(drop=True)


def own_vs_library(table: pd.DataFrame) -> pd.DataFrame:
    """Per layer and thread count: the fastest own kernel, the fastest library (baseline)
    and ``own_speedup`` = library time / own time (> 1: ours is faster), and ``resolved``:
    whether the two medians' 95% CIs are apart, so the ratio's side of 1 is measured, not
    noise (on the Zen 3 host a 3-process run called a depthwise layer 0.64 that 8 processes
    put at 1.05; False where either CI is missing); then one row per thread count with the
    geometric mean of the speed-ups over the layers that have both."""
    out = own_vs_library_layers(table)
    rows = []
    for threads, group in out.groupby("threads", sort=True):
        rows.append(group)
        both = group["own_speedup"].dropna()
        if len(both):
            rows.append(pd.DataFrame([{"layer": f"geomean ({len(both)} layers)",
                                       "threads": threads,
                                       "own_speedup": _geomean(both)}]))
    columns = [*SETTING, "best_own", "median_s_own", "gflops_own", "best_library",
               "median_s_library", "gflops_library", "own_speedup", "resolved",
               "library_handoff"]
    if not rows:
        return pd.DataFrame(columns=columns)
    return pd.concat(rows, ignore_index=True)[columns]


LOSING = 0.9   # a layer whose best own kernel runs below this share of the fastest library


def own_vs_library_by_class(table: pd.DataFrame) -> pd.DataFrame:
    """Per thread count and layer class (:attr:`ConvProblem.layer_class`; "all" first):
    the geometric mean and the least of :func:`own_vs_library`'s speed-ups, the layer of
    the least, how many layers fall below :data:`LOSING` (and how many of those are
    resolved, not noise), on how many the fastest library's time holds thread-pool
    handoffs (``library_handoff``: cold-weights at 2+ threads), and the median share of
    peak of the best own kernels and of the fastest libraries.  A network-wide mean hides
    a class that loses: on the Intel host ResNet-50 stood at 0.89 overall with its
    direct-method kernels at 0.72-0.93 on every layer and Winograd ahead on the 3 x 3
    ones."""
    return classes_of(own_vs_library_layers(table))


def classes_of(per_layer: pd.DataFrame) -> pd.DataFrame:
    """:func:`own_vs_library_by_class` from :func:`own_vs_library_layers`' rows."""
    per_layer = per_layer.dropna(subset=["own_speedup"])
    rows = []
    for threads, group in per_layer.groupby("threads", sort=True):
        classes = [("all", group), *group.groupby("layer_class", sort=True)]
        for name, part in classes:
            least = part.loc[part["own_speedup"].idxmin()]
            losing = part[part["own_speedup"] < LOSING]
            rows.append({"threads": threads, "layer_class": name, "layers": len(part),
                         "speedup_geomean": _geomean(part["own_speedup"]),
                         "speedup_min": float(least["own_speedup"]),
                         "min_layer": least["layer"],
                         "below_0.9": len(losing),
                         "below_0.9_resolved": int(losing["resolved"].sum()),
                         "library_handoff": int(part["library_handoff"].sum()),
                         "own_peak_share": float(part["peak_share_own"].median()),
                         "library_peak_share": float(part["peak_share_library"].median())})
    return pd.DataFrame(rows, columns=["threads", "layer_class", "layers", "speedup_geomean",
                                       "speedup_min", "min_layer", "below_0.9",
                                       "below_0.9_resolved", "library_handoff",
                                       "own_peak_share", "library_peak_share"])


def own_vs_library_layers(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`own_vs_library`'s per-layer rows (no geomean rows), with each layer's class
    and both sides' shares of peak."""
    ok = ok_rows(table)
    is_library = ok["baseline"].fillna(False).astype(bool)
    cols = [*SETTING, "variant", "median_s", "gflops", "ci_low_s", "ci_high_s", "peak_share"]
    # older tables lack them
    ok = ok.assign(peak_share=ok.get("peak_share", np.nan), cache=ok.get("cache", WARM))
    own = fastest(ok[~is_library], SETTING)[cols]
    lib = fastest(ok[is_library], SETTING)[[*cols, "cache"]]
    out = own.merge(lib, on=SETTING, how="outer", suffixes=("_own", "_library")).rename(
        columns={"variant_own": "best_own", "variant_library": "best_library"})
    # a library timed cold-weights at 2+ threads: its time holds thread-pool handoffs ours
    # does not (:meth:`.coldcache.Evictor.before_twin`)
    out["library_handoff"] = (out.pop("cache") == COLD_WEIGHTS) & (out["threads"] > 1)
    out["own_speedup"] = out["median_s_library"] / out["median_s_own"]
    out["resolved"] = ((out["ci_high_s_own"] < out["ci_low_s_library"])
                       | (out["ci_high_s_library"] < out["ci_low_s_own"]))
    out["layer_class"] = out["layer"].map(_layer_classes(table))
    order = {name: i for i, name in enumerate(dict.fromkeys(table["layer"]))}
    return out.sort_values(["threads", "layer"],
                           key=lambda s: s.map(order) if s.name == "layer" else s)


def _layer_classes(table: pd.DataFrame) -> dict[str, str]:
    """Each layer's class, from its descriptor ("?" where the table has none)."""
    if "descriptor" not in table:
        return {}
    layers = table.drop_duplicates("layer")
    return {layer: parse_descriptor(desc).layer_class if isinstance(desc, str) else "?"
            for layer, desc in zip(layers["layer"], layers["descriptor"], strict=True)}


def _geomean(values: pd.Series) -> float:
    return float(np.exp(np.log(values.astype(float)).mean()))


def best_plan(table: pd.DataFrame) -> pd.DataFrame:
    """The fastest ok variant of every setting: the network's best plan per thread count,
    with the layer's share of the network time (count-weighted)."""
    best = fastest(ok_rows(table), SETTING).copy()
    best["layer_count"] = best["layer_count"].fillna(1).astype("int64")
    best["total_s"] = best["median_s"] * best["layer_count"]
    best["share"] = best["total_s"] / best.groupby("threads")["total_s"].transform("sum")
    order = {name: i for i, name in enumerate(dict.fromkeys(table["layer"]))}
    best = best.sort_values(["threads", "layer"],
                            key=lambda s: s.map(order) if s.name == "layer" else s)
    return best[["threads", "layer", "variant", "layer_count", "median_s", "total_s",
                 "share", "gflops"]].reset_index(drop=True)


def network_totals(table: pd.DataFrame) -> pd.DataFrame:
    """Count-weighted time of the whole network per thread count: for the best plan and
    for each algorithm alone (an algorithm that does not cover every layer gets no total
    and says how many it covers)."""
    ok = ok_rows(table)
    layers = table.drop_duplicates("layer").set_index("layer")["layer_count"].fillna(1)
    flops = float((table.drop_duplicates("layer").set_index("layer")["flops"] * layers).sum())
    rows = []
    for threads, group in ok.groupby("threads"):
        plans = {"best plan": fastest(group, ["layer"])}
        for algorithm, alg_rows in group.groupby("algorithm", sort=False):
            plans[algorithm] = fastest(alg_rows, ["layer"])
        for plan, rows_ in plans.items():
            covered = len(rows_)
            time_s = float((rows_["median_s"] * rows_["layer"].map(layers)).sum())
            full = covered == len(layers)
            rows.append({"threads": int(threads), "plan": plan,
                         "layers": f"{covered}/{len(layers)}",
                         "network_s": time_s if full else np.nan,
                         "gflops": flops / time_s / 1e9 if full and time_s else np.nan})
    out = pd.DataFrame(rows, columns=["threads", "plan", "layers", "network_s", "gflops"])
    if not out.empty:
        best = out[out["plan"] == "best plan"].set_index("threads")["network_s"]
        out["vs_best_plan"] = out["network_s"] / out["threads"].map(best)
    return out


def _params(table: pd.DataFrame) -> pd.DataFrame:
    """The params JSON column spread into one column per parameter."""
    parsed = [json.loads(p) if isinstance(p, str) and p else {} for p in table["params"]]
    return pd.DataFrame(parsed, index=table.index)


def numeric_params(table: pd.DataFrame, algorithm: str) -> list[str]:
    """Parameters of ``algorithm`` that are numbers and take at least two values."""
    params = _params(ok_rows(table)[lambda t: t["algorithm"] == algorithm])
    return [c for c in params.columns
            if pd.api.types.is_numeric_dtype(params[c]) and not pd.api.types.is_bool_dtype(
                params[c]) and params[c].nunique() >= 2]


def param_frame(table: pd.DataFrame, algorithm: str) -> pd.DataFrame:
    """The ok rows of ``algorithm`` with one column per parameter (prefixed ``p:``)."""
    ok = ok_rows(table)
    rows = ok[ok["algorithm"] == algorithm]
    return rows.join(_params(rows).add_prefix("p:"))


def sensitivity(table: pd.DataFrame) -> pd.DataFrame:
    """How much each parameter (and the thread count) matters: for every algorithm and
    parameter, the median over settings of (slowest / fastest) best time across the
    parameter's values, and the value that wins most often."""
    rows: list[dict[str, Any]] = []
    ok = ok_rows(table)
    for algorithm in dict.fromkeys(ok["algorithm"]):
        frame = param_frame(table, algorithm)
        params = [c for c in frame.columns if c.startswith("p:") and frame[c].nunique() >= 2]
        axes = [(p, [*SETTING]) for p in params]
        if frame["threads"].nunique() >= 2:
            axes.append(("threads", ["layer"]))
        for column, setting in axes:
            per_value = frame.groupby([*setting, column], dropna=False)["median_s"].min()
            by_setting = per_value.groupby(level=list(range(len(setting))))
            spread = (by_setting.max() / by_setting.min()).median()
            winners = per_value.groupby(level=list(range(len(setting)))).idxmin()
            winner = pd.Series([w[-1] for w in winners]).mode()
            rows.append({"algorithm": algorithm, "parameter": column.removeprefix("p:"),
                         "values": ", ".join(map(str, sorted(frame[column].dropna().unique(),
                                                             key=str))),
                         "usual_best": str(winner.iloc[0]) if len(winner) else "",
                         "slowest_over_fastest": float(spread)})
    return pd.DataFrame(rows, columns=["algorithm", "parameter", "values", "usual_best",
                                       "slowest_over_fastest"])


def thread_scaling(table: pd.DataFrame) -> pd.DataFrame:
    """Per algorithm and thread count: count-weighted network GFLOP/s of its best variant
    per layer, over the layers it covers at every thread count; empty for one thread count."""
    ok = ok_rows(table)
    if ok["threads"].nunique() < 2:
        return pd.DataFrame(columns=["algorithm", "threads", "gflops", "speedup"])
    rows = []
    for algorithm, group in ok.groupby("algorithm", sort=False):
        best = fastest(group, SETTING)
        counts = best.groupby("layer")["threads"].nunique()
        best = best[best["layer"].isin(counts[counts == best["threads"].nunique()].index)]
        weight = best["layer_count"].fillna(1)
        best = best.assign(w_flops=best["flops"] * weight, w_time=best["median_s"] * weight)
        for threads, g in best.groupby("threads"):
            rows.append({"algorithm": algorithm, "threads": int(threads),
                         "gflops": g["w_flops"].sum() / g["w_time"].sum() / 1e9})
    out = pd.DataFrame(rows)
    first = out.sort_values("threads").groupby("algorithm")["gflops"].transform("first")
    out["speedup"] = out["gflops"] / first
    return out


def failures(table: pd.DataFrame) -> pd.DataFrame:
    """Cases that are not ok, with their reason (skips included: never dropped)."""
    bad = table[table["status"] != Status.OK]
    return bad[["layer", "variant", "threads", "vector_width", "status", "reason"]
               ].reset_index(drop=True)


def flagged_shares(table: pd.DataFrame) -> pd.DataFrame:
    """Ok cases whose share of peak or roofline came out above 1: measurement errors, shown
    with the flag instead of the share (record.share_flag; the shares are NaN there)."""
    if "share_flag" not in table:
        return pd.DataFrame(columns=["layer", "variant", "threads", "gflops", "share_flag"])
    flagged = ok_rows(table)
    flagged = flagged[flagged["share_flag"].fillna("").astype(str) != ""]
    return flagged[["layer", "variant", "threads", "vector_width", "gflops", "share_flag"]
                   ].reset_index(drop=True)


# A layer's group whose in-run reference ran this many times slower than the run's
# typical group at its thread count and cache mode shared the CPUs with other work.
DISTURBED = 2.0


def disturbed_groups(table: pd.DataFrame) -> pd.DataFrame:
    """The (threads, cache, layer) groups whose in-run reference ran :data:`DISTURBED`
    times slower than the run's median group at that thread count and cache mode, slowest
    first: columns threads, cache, layer, suite, reference_s (the group's median over its
    ok cases of median_s / ref_ratio), typical_s (the median of every group's) and
    slowdown (their ratio).

    The reference is one fixed sgemm timed in every round of every group, so on a quiet
    machine each group reads about the same (Zen 5 host, 2 threads: within 0.80-1.50 of
    the median in six runs); a group whose rounds ran beside other work reads far more
    (MobileNet V1's conv1 at 2 threads, while a test run loaded both CPUs: 37x and 45x),
    and its cases' times, own and library alike, are then not the machine's."""
    columns = ["threads", "cache", "layer", "suite", "reference_s", "typical_s", "slowdown"]
    if "ref_ratio" not in table:
        return pd.DataFrame(columns=columns)
    ok = ok_rows(table)
    ok = ok[(ok["ref_ratio"] > 0) & ok["median_s"].notna()]
    if ok.empty:
        return pd.DataFrame(columns=columns)
    ok["cache"] = ok["cache"].fillna(WARM) if "cache" in ok else WARM
    ok["suite"] = ok["suite"].fillna("") if "suite" in ok else ""
    ok["reference_s"] = ok["median_s"] / ok["ref_ratio"]
    groups = ok.groupby(["threads", "cache", "layer", "suite"], sort=False, as_index=False
                        )["reference_s"].median()
    groups["typical_s"] = groups.groupby(["threads", "cache"])["reference_s"].transform("median")
    groups["slowdown"] = groups["reference_s"] / groups["typical_s"]
    found = groups[groups["slowdown"] >= DISTURBED]
    return found[columns].sort_values("slowdown", ascending=False).reset_index(drop=True)


NOT_VECTORISED = "not vectorised"


def not_vectorised(table: pd.DataFrame) -> pd.DataFrame:
    """Ok own cases whose code, as the run read it (the asm_* columns), is "not vectorised"
    (kernels.asm.FpProfile.vectorised: multiply-adds none of them packed, or FP arithmetic
    with no packed instruction at all): a kernel several times below what its source should
    give, whatever made numba compile it so (an LLVM upgrade, NUMBA_OPT=0, or a cache
    filled under it: numba's cache key does not hold the optimisation level, so later runs
    load that code; the direct kernels of the tiny test suite ran at 0.04-0.06 GFLOP/s
    that way, Zen 3)."""
    columns = ["layer", "variant", "threads", "vector_width", "gflops", "asm_profile"]
    if "asm_vectorisation" not in table:
        return pd.DataFrame(columns=columns)
    found = ok_rows(table)
    found = found[found["asm_vectorisation"].fillna("").astype(str) == NOT_VECTORISED]
    return found[columns].reset_index(drop=True)


def counter_columns(table: pd.DataFrame) -> list[str]:
    """Counter metrics (schema.COUNTER_METRICS) with at least one figure in the table."""
    return [m for m in schema.COUNTER_METRICS if m in table and table[m].notna().any()]


# simulated counts per call shown next to the metrics (callgrind: instructions, data
# reads and writes, D1 and last-level misses), so a rate can be checked against its counts
SIM_COUNTS = ("sim_ir", "sim_dr", "sim_dw", "sim_d1mr", "sim_d1mw", "sim_dlmr", "sim_dlmw")


def counter_figures(table: pd.DataFrame) -> pd.DataFrame:
    """The counter metrics (and simulated counts per call) of each algorithm's fastest
    variant per layer and thread count: the numbers behind the counter panels.  Columns
    without a single figure are left out (Missing counters says why); no counters at all
    gives an empty frame."""
    columns = [*counter_columns(table),
               *(c for c in SIM_COUNTS if c in table and table[c].notna().any())]
    if not columns:
        return pd.DataFrame()
    key = ["layer", "variant", "threads", "vector_width"]
    best = best_by_algorithm(table)[[*key[:3], "algorithm", "vector_width"]]
    figures = ok_rows(table)[[*key, *columns]].drop_duplicates(key)
    return best.merge(figures, on=key, how="left")[["layer", "threads", "algorithm",
                                                    "variant", *columns]]


def cache_model_captions(table: pd.DataFrame) -> list[str]:
    """What the simulated counts of the table are: one caption per cache model of the rows
    that have them ("a model of the data-cache traffic of this host's code under X's
    caches"), so a count made under a named core's caches is never read as that core's."""
    from convbench.harness.counters.cache_models import caption

    if "sim_ir" not in table or "cache_model" not in table:
        return []
    counted = table[table["sim_ir"].notna()]
    return [f"simulated counts: {caption(str(m))}"
            for m in dict.fromkeys(counted["cache_model"].dropna())]


def missing_counters(table: pd.DataFrame) -> pd.DataFrame:
    """Why counter metrics are missing: one row per metric and reason, with a count.  A
    run without any counter columns gets one row saying so."""
    rows = []
    for metric in schema.COUNTER_METRICS:
        if metric not in table:
            continue
        missing = table[table[metric].isna() & (table["status"] == Status.OK)]
        reason_col = f"{metric}_reason"
        reasons = (missing[reason_col].fillna("no reason recorded") if reason_col in table
                   else pd.Series("no reason recorded", index=missing.index))
        for reason, count in reasons.replace("", "no reason recorded").value_counts().items():
            rows.append({"metric": metric, "cases": int(count), "reason": str(reason)})
    if not any(m in table for m in schema.COUNTER_METRICS):
        rows.append({"metric": "all", "cases": int((table["status"] == Status.OK).sum()),
                     "reason": "the run recorded no hardware counters"})
    return pd.DataFrame(rows, columns=["metric", "cases", "reason"])


def join_runs(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Several runs side by side, joined on the case key without the cache mode (each run
    here holds one mode, see :func:`by_cache_mode`, so warm and cold of the same variant
    sit in one row): median time and GFLOP/s of each run, and each later run's time over
    the first's (< 1: faster)."""
    names = list(tables)
    keys = [c for c in schema.IDENTITY if c != "cache"]
    joined = None
    for name in names:
        part = ok_rows(tables[name])[[*keys, "median_s", "gflops"]].rename(
            columns={"median_s": f"median_s [{name}]", "gflops": f"gflops [{name}]"})
        joined = part if joined is None else joined.merge(part, on=keys, how="outer")
    assert joined is not None
    for name in names[1:]:
        joined[f"time ratio [{name}/{names[0]}]"] = (joined[f"median_s [{name}]"]
                                                     / joined[f"median_s [{names[0]}]"])
    return joined.reset_index(drop=True)


def algorithms_with_params(table: pd.DataFrame) -> list[str]:
    """Algorithms with at least two numeric parameters that vary (heatmap candidates)."""
    algs = dict.fromkeys(ok_rows(table)["algorithm"])
    return [a for a in algs if len(numeric_params(table, a)) >= 2]
