"""The report's network-pass section: what ``convbench run --network`` measured.

A results directory holding ``network.parquet`` (with the plan.json it ran) gets a section
of its own: per thread count and cache mode the measured whole-network time of the plan
against the best all-NCHW plan, the best all-NHWC plan, the local plans and two libraries
over the same graph (prepacked oneDNN, ONNX Runtime in one session), each pass's predicted
time and the prediction's error (also at run speed: the prediction scaled by the in-run
reference, see :mod:`convbench.harness.network_run`), and the per-layer bound -- a sum
computed from the cost table, never run (no pass can skip its transforms). The plan's
steps that pay a transform are listed with the plan's own reason.

Read through the guarded readers of :mod:`convbench.results.load`, so a damaged file is
one line naming it, as for a sweep's files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from convbench.harness import network_run
from convbench.network import planfile
from convbench.status import Status

# What each pass is, as the page names it (the labels are network.parquet's "pass")
WHAT = {
    planfile.PLAN: "the plan (plan.json: per conv its variant, transforms where they pay)",
    "all-nchw": "best all-NCHW plan (every conv reads and writes NCHW)",
    "all-nhwc": "best all-NHWC plan (every conv reads and writes NHWC)",
    "all-nchwxc": "best all-NCHW[x]c plan (one block x for every tensor the network "
                  "computes; plan.json names the x)",
    "local-best": "local plan: each conv its own fastest variant, transforms where "
                  "layouts disagree (NeoCPU's local search without the global step)",
    "local-best-nchw-glue": "local plan with relu, pooling and add in NCHW (each conv's "
                            "fastest variant dropped into an NCHW graph)",
    network_run.ONEDNN: "oneDNN, prepacked weights, over the same graph op for op",
    network_run.ORT: "ONNX Runtime, the same graph in one session (weights prepacked, its "
                     "NCHWc rewrite and conv+relu/add fusions, as deployed)",
    **{label: f"the plan's pass with {what} (run --network --ablate)"
       for label, what in network_run.ABLATIONS.items()},
    network_run.BOUND: "computed bound: each conv's fastest variant, transforms ignored "
                       "(a sum from the cost table, not a runnable plan: never timed)",
}
PASS_COLUMNS = ("threads", "cache", "pass", "what", "status", "median_s", "ci_low_s",
                "ci_high_s", "n_values", "time ratio plan/pass", "predicted_s",
                "prediction error", "prediction error at run speed", "reason")


@dataclass(frozen=True)
class NetworkRun:
    """One directory's network passes: network.parquet's rows and the plan.json it ran."""

    name: str
    frame: pd.DataFrame          # network_run.COLUMNS, one row per pass x cache x threads
    plan: dict[str, Any] | None  # the plan.json document; None when the copy is missing
    ops: pd.DataFrame | None = None  # network_ops.parquet (run with --profile); else None


def _plan_document(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ValueError("plan.json should be a JSON object")
    return data


def read_network(path: Path, name: str) -> NetworkRun | None:
    """``path``'s network passes, or None when it holds no network.parquet."""
    from convbench.results.load import ResultsError, read_json, read_table

    table = Path(path) / network_run.NETWORK_FILE
    if not table.is_file():
        return None
    frame = read_table(table, network_run.TYPES)
    missing = [c for c in ("pass", "cache", "threads", "status", "median_s", "predicted_s")
               if c not in frame]
    if missing:
        raise ResultsError(f"{table}: not a network.parquet of convbench run --network "
                           f"(no column {', '.join(missing)})")
    plan_path = Path(path) / network_run.PLAN_COPY
    plan = read_json(plan_path, _plan_document) if plan_path.is_file() else None
    ops_path = Path(path) / network_run.NETWORK_OPS_FILE
    ops = read_table(ops_path, network_run.OP_TYPES) if ops_path.is_file() else None
    return NetworkRun(name, frame, plan, ops)


def in_pass_table(ops: pd.DataFrame | None) -> pd.DataFrame:
    """Per thread count and conv, inside the passes (``--profile``): ONNX Runtime's node
    over the plan's conv (:func:`convbench.harness.network_run.library_in_pass`), worst
    first; empty without a profile, or one from before ONNX Runtime's pass was profiled."""
    needed = {"pass", "threads", "op", "kind", "layer_class", "part", "measured_s"}
    if ops is None or not needed <= set(ops.columns):
        return pd.DataFrame()
    table = network_run.library_in_pass(ops)
    return table.rename(columns={"ratio": "library/plan"}).sort_values(
        ["threads", "library/plan"]).reset_index(drop=True)


def _ok(row: pd.Series) -> bool:
    return row["status"] == Status.OK and math.isfinite(float(row["median_s"]))


def plan_time(frame: pd.DataFrame, threads: int, cache: str) -> float:
    """The plan pass's measured median at ``threads`` in ``cache`` mode (NaN: not timed)."""
    rows = frame[(frame["pass"] == planfile.PLAN) & (frame["threads"] == threads)
                 & (frame["cache"] == cache) & (frame["status"] == Status.OK)]
    return float(rows["median_s"].iloc[0]) if len(rows) else math.nan


def passes_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per thread count, cache mode and pass: the measured median and its CI, the
    plan's time over the pass's (< 1: the plan is faster), the predicted time and the
    prediction's error (predicted / measured - 1), also with the prediction scaled to the
    run's machine speed (NaN where plan.json has no reference_s)."""
    rows = []
    for (threads, cache), group in frame.groupby(["threads", "cache"], sort=False):
        plan_s = plan_time(frame, int(threads), str(cache))
        for _, r in group.iterrows():
            measured = _ok(r)
            median = float(r["median_s"]) if measured else math.nan
            predicted = float(r["predicted_s"])
            # a prediction is for the plan's setting: a warm one against a cold pass (or
            # one thread's against two) is no error of the model
            planned = (str(r["plan_cache"]) == str(cache)
                       and int(r["plan_threads"]) == int(threads))
            rows.append({
                "threads": int(threads), "cache": str(cache), "pass": str(r["pass"]),
                "what": WHAT.get(str(r["pass"]), ""), "status": str(r["status"]),
                "median_s": median,
                "ci_low_s": float(r["ci_low_s"]) if measured else math.nan,
                "ci_high_s": float(r["ci_high_s"]) if measured else math.nan,
                "n_values": int(r["n_values"]) if pd.notna(r["n_values"]) else 0,
                "time ratio plan/pass": plan_s / median if measured else math.nan,
                "predicted_s": predicted,
                "prediction error": (predicted / median - 1
                                     if measured and planned and predicted > 0
                                     else math.nan),
                "prediction error at run speed": (
                    network_run.scaled_prediction(r.to_dict()) / median - 1
                    if measured and planned and "plan_reference_s" in r else math.nan),
                # the bound's reason repeats its "what": left out
                "reason": "" if measured or r["pass"] == network_run.BOUND
                else str(r["reason"])})
    return pd.DataFrame(rows, columns=list(PASS_COLUMNS))


def _transform_text(raw: dict[str, Any]) -> str:
    return f"{raw.get('tensor')} {raw.get('from_layout')}->{raw.get('to_layout')}"


def transforms_table(plan: dict[str, Any] | None) -> pd.DataFrame:
    """The plan's steps that pay a layout transform (and the output's, back to NCHW): what
    is converted, its predicted time, and the plan's reason for paying it."""
    if plan is None:
        return pd.DataFrame()
    rows = []
    for step in plan.get("ops", []):
        paid = step.get("transforms") or []
        if not paid:
            continue
        rows.append({"op": step.get("op"), "layer": step.get("layer") or step.get("kind"),
                     "variant": step.get("variant") or "",
                     "reads -> writes": f"{step.get('in_layout')} -> {step.get('out_layout')}",
                     "transforms": "; ".join(map(_transform_text, paid)),
                     "transform_s": sum(float(t.get("seconds", math.nan)) for t in paid),
                     "why": step.get("why") or ""})
    tail = plan.get("output_transform")
    if tail:
        rows.append({"op": "(output)", "layer": "", "variant": "",
                     "reads -> writes": f"{tail.get('from_layout')} -> NCHW",
                     "transforms": _transform_text(tail),
                     "transform_s": float(tail.get("seconds", math.nan)),
                     "why": "the network's output is delivered in NCHW"})
    return pd.DataFrame(rows)


PASSES_ABOUT = (
    "Whole network passes (every conv, glue op and transform in order, on one input, "
    "verified against a float64 reference pass first), all timed in the same rounds. "
    "time ratio plan/pass: the plan's median over the pass's (below 1: the plan is "
    "faster). prediction error: predicted / measured - 1, the prediction being the sum of "
    "the plan's layer and transform times, made for the plan's thread count and cache "
    "mode: the error is given at that setting only. At run speed: the same with the "
    "prediction scaled by the in-run reference's median in the pass's rounds over its "
    "median while the plan's costs were measured (the machine's speed drifts between "
    "hours). The per-layer bound is computed, not "
    "measured: it ignores every transform, so no runnable plan reaches it, and a "
    "single-layout plan's predicted time over the bound's is the most any layout plan "
    "could gain over that plan with these kernels (only faster kernels raise it).")
IN_PASS_ABOUT = ("Conv by conv inside the passes (run --network --profile): ONNX "
                 "Runtime's node for the conv over the plan's conv, each timed inside its "
                 "own whole-graph pass (ours by the clock around each call, ORT's by its "
                 "profiler). library/plan above 1: ours is faster. ORT's node holds the "
                 "relu, relu6 or residual add it fused; ours the relus and adds our kernels "
                 "fused. "
                 "At 2+ threads this is the fair per-layer cold comparison: both runtimes "
                 "keep their thread pools awake and stream the network's weights alike.")
TRANSFORMS_ABOUT = ("The plan's steps that pay a layout transform before they run, with "
                    "the predicted time of the transforms and the plan's reason for paying "
                    "it (from plan.json).")
