"""The closing summary of ``convbench run``: a terminal view of the report's aggregation.

Per layer *and* thread count the fastest case, and per thread count the network total,
taken from :mod:`convbench.report.aggregate` exactly as the report shows them (a 2-thread
time is no rival to a 1-thread one, so nothing here picks across thread counts).  Then the
case counts by status and, for every broken case, the command that reproduces it alone.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pandas as pd

from convbench.identity import CaseKey
from convbench.report import aggregate, units
from convbench.status import BROKEN, STATUSES, Status
from convbench.textable import format_table
from convbench.textsafe import terminal

MAX_REPRODUCERS = 20


def human_seconds(s: float) -> str:
    """A time in the unit that reads best: us, ms or s, four significant digits (``us``:
    a terminal may not show µ)."""
    return units.seconds(s, micro="us")


def _ratio(value: float, resolved: object = True, handoff: object = False) -> str:
    """``value`` to two places; ``~`` before it when its CIs overlap (not resolved), ``!``
    after it when the library's time holds thread-pool handoffs (:func:`class_lines`)."""
    if value is None or pd.isna(value):
        return "-"
    text = f"{value:.2f}" if resolved is True else f"~{value:.2f}"
    return text + "!" if handoff is True else text


def _cell(value: object) -> str:
    return "-" if not isinstance(value, str) else value


def _time(value: float) -> str:
    return "-" if value is None or pd.isna(value) else human_seconds(value)


def best_table(table: pd.DataFrame) -> str:
    """Per thread count and layer: the fastest own kernel and the fastest library, their
    times and own speed-up (library time / own time), with the geomean per thread count."""
    versus = aggregate.own_vs_library(table)
    counts = table.drop_duplicates("layer").set_index("layer")["layer_count"]
    rows = [("t", "layer", "count", "best own", "median", "GFLOP/s", "best library", "median",
             "lib/own")]
    for r in versus.itertuples(index=False):
        count = str(counts.get(r.layer, ""))
        rows.append((str(r.threads), r.layer, count, _cell(r.best_own), _time(r.median_s_own),
                     "-" if pd.isna(r.gflops_own) else f"{r.gflops_own:.2f}",
                     _cell(r.best_library), _time(r.median_s_library),
                     _ratio(r.own_speedup, True if pd.isna(r.resolved) else bool(r.resolved),
                            pd.notna(r.library_handoff) and bool(r.library_handoff))))
    return format_table(rows, right=(0, 2, 4, 5, 7, 8))


LEGEND = ("lib/own: library time / own time (> 1: the own kernel is faster; ~: the two "
          "medians' 95% CIs overlap, more values or processes would tell)")


def class_lines(table: pd.DataFrame) -> list[str]:
    """Per thread count, lib/own by layer class: the geomean, the least and its layer,
    and the layers below :data:`.aggregate.LOSING` (those with overlapping CIs marked)."""
    versus = aggregate.own_vs_library_layers(table)
    classes = aggregate.classes_of(versus)
    lines = []
    for threads, group in classes.groupby("threads", sort=True):
        parts = [f"{r.layer_class} {r.speedup_geomean:.2f} (min {r.speedup_min:.2f} "
                 f"{r.min_layer})" for r in group.itertuples(index=False)]
        losing = versus[(versus["threads"] == threads)
                        & (versus["own_speedup"] < aggregate.LOSING)]
        below = ", ".join(f"{r.layer} {_ratio(r.own_speedup, bool(r.resolved))}"
                          for r in losing.itertuples(index=False)) or "none"
        lines.append(f"lib/own geomean by layer class at {threads} thread(s): "
                     + "; ".join(parts))
        lines.append(f"  layers below {aggregate.LOSING}: {below}")
        handoffs = int(group["library_handoff"].iloc[0])   # the "all" row
        if handoffs:
            lines.append(f"  !: on {handoffs} of {int(group['layers'].iloc[0])} layers the "
                         "fastest library ran cold-weights at 2+ threads, where its time "
                         "holds thread-pool handoffs ours does not (its pool woken after our "
                         "eviction pass; an ONNX Runtime session's or LiteRT interpreter's "
                         "own pool left asleep by the twin): those ratios overstate ours; "
                         "the fair per-layer comparison there is inside a network pass "
                         "(convbench run --network PLAN --profile N)")
    return lines


def network_lines(table: pd.DataFrame) -> list[str]:
    """Per thread count: the best plan's count-weighted network time (the fastest variant
    of every layer, own or library), then own kernels alone against libraries alone."""
    from convbench.report.headline import headlines

    lines = []
    for h in headlines("", table):
        if h.covered < h.layers:
            lines.append(f"network total at {h.threads} thread(s): none (only {h.covered}/"
                         f"{h.layers} layers have an ok case)")
            continue
        lines.append(f"network total at {h.threads} thread(s), best plan (fastest variant "
                     f"per layer x count) over {h.covered}/{h.layers} layers: "
                     f"{human_seconds(h.network_s)} ({h.network_gflops:.2f} GFLOP/s)")
        if pd.notna(h.own_s) and pd.notna(h.library_s):
            ratio = h.own_vs_library
            word = "faster" if ratio >= 1 else "slower"
            lines.append(f"  own kernels alone {human_seconds(h.own_s)}, libraries alone "
                         f"{human_seconds(h.library_s)}: own "
                         f"{max(ratio, 1 / ratio):.2f}x {word}")
    return lines


def _listed(cases: pd.DataFrame, head: str, column: str) -> list[str]:
    """``head``, then the first few cases (layer, variant, threads) with their ``column``."""
    if cases.empty:
        return []
    shown = MAX_REPRODUCERS // 4
    lines = [head, *(f"  {r['layer']} {r['variant']} t{r['threads']}: {r[column]}"
                     for r in cases.head(shown).to_dict("records"))]
    if len(cases) > shown:
        lines.append(f"  ... and {len(cases) - shown} more")
    return lines


def flag_lines(table: pd.DataFrame) -> list[str]:
    """How many ok cases beat a measured bound (record.share_flag), and the first few."""
    flagged = aggregate.flagged_shares(table)
    return _listed(flagged, f"{len(flagged)} case(s) measured above 100% of a bound: a "
                            "measurement error, share left out (share_flag column):",
                   "share_flag")


def vector_lines(table: pd.DataFrame) -> list[str]:
    """How many own cases ran code that is not vectorised (aggregate.not_vectorised), and
    the first few."""
    found = aggregate.not_vectorised(table)
    return _listed(found, f"warning: {len(found)} own case(s) ran code whose arithmetic is "
                          "not vectorised (asm_profile column; `convbench check --asm` reads "
                          "any variant's):", "asm_profile")


def disturbed_lines(table: pd.DataFrame) -> list[str]:
    """The layer groups whose in-run reference ran far slower than the run's others
    (:func:`.aggregate.disturbed_groups`), each with the command that times it again."""
    found = aggregate.disturbed_groups(table)
    if found.empty:
        return []
    lines = [f"warning: {len(found)} layer group(s) ran beside other work: their in-run "
             f"reference read {aggregate.DISTURBED:g}x or more the run's median, so their "
             "times (own and library) are not the machine's; time them again:"]
    for r in found.head(MAX_REPRODUCERS).itertuples(index=False):
        words = ["convbench", "run", shlex.quote(r.suite or "SUITE"), "--threads",
                 str(r.threads), "--cache", r.cache, "--only", shlex.quote(f"layer={r.layer}")]
        lines.append(f"  {' '.join(words)}    # reference {human_seconds(r.reference_s)}, "
                     f"{r.slowdown:.1f}x the run's {human_seconds(r.typical_s)}")
    if len(found) > MAX_REPRODUCERS:
        lines.append(f"  ... and {len(found) - MAX_REPRODUCERS} more")
    return lines


def reproducer_lines(table: pd.DataFrame) -> list[str]:
    """The command that reproduces each broken case alone (at most MAX_REPRODUCERS)."""
    broken = table[table["status"].isin([s.value for s in BROKEN])]
    lines = [f"  {CaseKey.from_row(row).reproducer()}    # {row['status']}"
             for row in broken.head(MAX_REPRODUCERS).to_dict("records")]
    if len(broken) > MAX_REPRODUCERS:
        lines.append(f"  ... and {len(broken) - MAX_REPRODUCERS} more (status column of "
                     f"results.csv)")
    return ["reproduce a case alone:", *lines] if lines else []


def next_lines(path: Path | None) -> list[str]:
    """Where the results are and the command that shows them."""
    if path is None:
        return []
    return [f"results: {path}",
            f"next: convbench report {path}    (HTML report: the answer first, figures, "
            "every case)"]


def run_summary(table: pd.DataFrame, path: Path | None = None) -> str:
    """The whole closing summary of a run's table (schema.COLUMNS); one block per cache
    mode when the run has several; with ``path``, where the results are and what to run
    next.  lib/own > 1: the own kernel is faster."""
    lines = []
    parts = aggregate.by_cache_mode("", table)
    for label, part in parts.items():
        if not (part["status"] == Status.OK).any():
            continue
        if len(parts) > 1 or label:
            lines += [f"cache {label.strip(' []')}:"]
        lines += [best_table(part), "", LEGEND]
        lines += class_lines(part)
        lines += network_lines(part)
        lines += [""] if len(parts) > 1 else []
    layers = dict.fromkeys(table["layer"])
    without = [layer for layer in layers
               if not (table[table["layer"] == layer]["status"] == Status.OK).any()]
    if without:
        lines.append(f"no ok case for: {', '.join(without)}")
    lines += flag_lines(table)
    lines += vector_lines(table)
    lines += disturbed_lines(table)
    lines += aggregate.cache_model_captions(table)
    counts = table["status"].value_counts()
    lines.append("cases: " + (", ".join(f"{counts[s]} {s}" for s in STATUSES if s in counts)
                              or "none"))
    lines += reproducer_lines(table)
    lines += next_lines(path)
    # layer names and reasons come from the suite and the kernels: no escape sequence of
    # theirs reaches the terminal (the tables' cells are escaped already)
    return "\n".join(terminal(line) for line in "\n".join(lines).split("\n"))
