"""``convbench run --network PLAN``: whole network passes measured in worker processes, into
a results directory with ``network.parquet``, ``environment.json`` and a copy of the plan.

Passes: the plan's (``plan``), the best all-NCHW, all-NHWC and all-NCHW[x]c plans
(``all-nchw``, ``all-nhwc``, ``all-nchwxc``: one block x for the whole network), the local
plans (``local-best``, ``local-best-nchw-glue``: each conv its own fastest variant, no
global step), each when plan.json has it, and two libraries over the same graph: prepacked
oneDNN op for op (``onednn``, :mod:`convbench.network.onednn_pass`) and ONNX Runtime, one
session with its graph rewrites and fusions (``onnxruntime``,
:mod:`convbench.network.onnxruntime_pass`), each in every cache mode asked for at every
thread count; the per-layer bound (each conv's fastest candidate, transforms ignored) runs
nothing and is carried as its predicted total only.  Every thread count gets
``timing.processes`` workers (:mod:`convbench.harness.network_worker`), their values pooled
as the runner pools a case's and summarised by :mod:`convbench.stats`.

Predicted against measured: the prediction adds up times measured in another run (the
tune), on a machine whose speed drifts between hours (BRIEF.md; the in-run reference took
0.49 ms during a 2-thread tune and 0.55 ms during the network pass an evening later).  So
the table also gives the prediction scaled by the in-run reference, this run's median over
the tune's (``plan_reference_s`` in plan.json): what the plan would predict at the speed
the machine ran the pass.
"""

from __future__ import annotations

import json
import math
import socket
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from convbench.errors import ConvbenchError
from convbench.harness import affinity, oneshot
from convbench.network import planfile
from convbench.spec.suite import TimingOptions
from convbench.status import Status

WORKER = "convbench.harness.network_worker"

NETWORK_FILE = "network.parquet"
PLAN_COPY = "plan.json"
ENVIRONMENT = "environment.json"
# where a pass into a sweep's results directory keeps its environment: the sweep's own
# environment.json (its machine limits, workers, load) stays as the sweep recorded it
SWEEP_SIDE_ENVIRONMENT = "network_environment.json"
ONEDNN = "onednn"
ORT = "onnxruntime"
LIBRARIES = (ONEDNN, ORT)
BOUND = "per-layer-bound"
PASSES = (planfile.PLAN, *planfile.ALTERNATIVES, *LIBRARIES)
# --ablate: the plan's pass without one of the executor's inference-engine habits, in the
# same rounds, so what each buys is measured rather than argued
UNFUSED, OWN_BUFFERS = "plan-unfused", "plan-own-buffers"
ABLATIONS = {UNFUSED: "every relu / relu6 / add as a glue op of its own",
             OWN_BUFFERS: "every tensor in a buffer of its own"}
CACHE_MODES = ("warm", "cold")
BOUND_REASON = ("a computed bound (each conv's fastest candidate, transforms ignored), "
                "not a runnable plan: predicted only")
OP_COLUMNS = ("pass", "threads", "op", "kind", "layer_class", "part", "measured_s", "predicted_s",
              "host")
NETWORK_OPS_FILE = "network_ops.parquet"
# network_ops.parquet's columns as the report reads them back
OP_TYPES = {"pass": "string", "threads": "int64", "op": "string", "kind": "string",
            "layer_class": "string", "part": "string", "measured_s": "float64",
            "predicted_s": "float64", "host": "string"}
COLUMNS = ("pass", "cache", "threads", "status", "reason", "median_s", "ci_low_s",
           "ci_high_s", "n_values", "ref_ratio", "loops", "predicted_s", "plan_reference_s",
           "plan_threads", "plan_cache", "max_abs_err", "max_rel_err", "err_bound_ratio", "build_s",
           "first_call_s", "fused_ops", "host")
# network.parquet's columns as the report reads them back (results.columns.coerce)
TYPES = {**{c: "float64" for c in COLUMNS if c.endswith("_s") or c.endswith("_err")},
         "err_bound_ratio": "float64", "ref_ratio": "float64",
         "pass": "string", "cache": "string", "status": "string", "reason": "string",
         "plan_cache": "string", "host": "string",
         "threads": "int64", "n_values": "int64", "loops": "int64", "plan_threads": "int64",
         "fused_ops": "int64"}


def spec_label(label: str) -> str:
    """The plan.json pass a label runs: an ablation runs the plan's."""
    return planfile.PLAN if label in ABLATIONS else label


def _predicted(plan: planfile.PlanFile, label: str, fused: Sequence[str] = ()) -> float:
    """The pass's predicted total; ``fused``: its glue ops that ran inside a conv's stores
    (:attr:`convbench.network.executor.NetworkPass.fused`), whose predicted seconds it
    does not spend: the sum of :func:`convbench.network.executor.predicted_parts`, so a
    pass predicts what it runs whatever the plan assumed (the dynamic program charges a
    fused op nothing where the kernel fuses it; an ``--ablate`` pass runs it as glue)."""
    from convbench.network import executor

    if label == BOUND:
        return plan.bound_s
    spec = plan.passes.get(spec_label(label))
    if not isinstance(spec, planfile.PassSpec):
        return math.nan
    return sum(executor.predicted_parts(spec, fused).values())


def _fused(answers: Sequence[dict[str, Any]], label: str) -> list[str]:
    """The glue ops a pass fused (the same in every process: the plan and kernels decide)."""
    return next((list(row.get("fused", ())) for answer in answers for row in answer
                 if row["pass"] == label), [])


@dataclass(frozen=True)
class NetworkResults:
    """What ``run --network`` measured: one row per pass x cache mode x thread count
    (columns :data:`COLUMNS`) and, with a profile, one per pass x thread count x op x part
    (columns :data:`OP_COLUMNS`; empty without)."""

    frame: pd.DataFrame
    ops: pd.DataFrame


def measure(plan: planfile.PlanFile, plan_path: Path, threads: Sequence[int] = (),
            cache: Sequence[str] = CACHE_MODES, timing: TimingOptions | None = None,
            seed: int = 0, cpus: Sequence[int] = (), cold_bytes: int | None = None,
            timeout: float | None = None, progress: bool = True,
            profile: int = 0, ablate: bool = False) -> NetworkResults:
    """Every pass in every cache mode at every thread count; ``progress``: a bar with an
    ETA on stderr; ``profile``: also time each op inside our passes, this many passes
    per process (0: no profile); ``ablate``: also the plan without fusion and without
    shared storage (:data:`ABLATIONS`)."""
    from tqdm import tqdm

    from convbench.network import onednn_pass, onnxruntime_pass

    timing = timing or plan.suite.sweep.timing
    thread_counts = tuple(threads) or (plan.threads,)
    pool = affinity.resolve_pool(cpus)
    affinity.check_pool(pool, thread_counts)
    skipped: dict[str, str] = {label: spec for label, spec in plan.passes.items()
                               if isinstance(spec, str)}
    for label, why_not in ((ONEDNN, onednn_pass.unavailable()),
                           (ORT, onnxruntime_pass.unavailable())):
        if why_not:
            skipped[label] = why_not
    labels = (*PASSES, *(ABLATIONS if ablate else ()))
    for label in ABLATIONS if ablate else ():
        if planfile.PLAN in skipped:
            skipped[label] = skipped[planfile.PLAN]
    runnable = [label for label in labels if label not in skipped]
    host = socket.gethostname()
    budget = timeout or timing.timeout * (len(runnable) * len(cache) + 1)
    rows: list[dict[str, Any]] = []
    op_rows: list[dict[str, Any]] = []
    # a worker ticks once per cache mode (every pass timed in that mode's rounds)
    bar = tqdm(total=len(thread_counts) * timing.processes * len(cache), file=sys.stderr,
               unit="mode", dynamic_ncols=True, disable=not progress)
    for t in thread_counts:
        job = {"threads": t, "cpus": list(affinity.cpus_for(pool, t)),
               "plan": dict(plan.document), "plan_path": str(plan_path),
               "passes": runnable, "cache": list(cache), "timing": asdict(timing),
               "seed": seed, "cold_bytes": cold_bytes, "profile": profile}
        bar.set_postfix_str(f"{t} thread(s)")
        answers = [oneshot.run_worker(WORKER, {**job, "process": process}, budget,
                                      "network pass", " (--timeout)", bar.update)
                   for process in range(timing.processes)]
        pooled: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for answer in answers:
            for row in answer:
                pooled.setdefault((row["pass"], row["cache"]), []).append(row)
        op_rows.extend(_op_rows(plan, answers, t, host))
        for label in (*labels, BOUND):
            fused = _fused(answers, label)
            for mode in cache:
                base = {"pass": label, "cache": mode, "threads": t, "host": host,
                        "predicted_s": _predicted(plan, label, fused),
                        "fused_ops": len(fused),
                        "plan_reference_s": plan.reference_s, "plan_threads": plan.threads,
                        "plan_cache": plan.cache}
                if label == BOUND:
                    rows.append({**base, "status": str(Status.SKIP), "reason": BOUND_REASON,
                                 "n_values": 0})
                elif label in skipped:
                    rows.append({**base, "status": str(Status.SKIP), "reason": skipped[label],
                                 "n_values": 0})
                else:
                    rows.append({**base, **_summary(pooled[label, mode])})
    bar.close()
    return NetworkResults(pd.DataFrame(rows, columns=list(COLUMNS)),
                          pd.DataFrame(op_rows, columns=list(OP_COLUMNS)))


def _op_rows(plan: planfile.PlanFile, answers: Sequence[Sequence[dict[str, Any]]],
             threads: int, host: str) -> list[dict[str, Any]]:
    """Per pass with a profile: each (op, part)'s median over the processes, beside the
    plan's prediction for it."""
    from convbench.network import executor

    graph = plan.suite.graph
    kinds = {op.name: op.kind for op in graph.ops}
    classes = {op.name: graph.problem(op).layer_class for op in graph.convs}
    measured: dict[str, dict[tuple[str, str], list[float]]] = {}
    for answer in answers:
        seen = set()
        for row in answer:
            if "profile" in row and row["pass"] not in seen:   # every mode's row has it
                seen.add(row["pass"])
                for op, part, seconds in row["profile"]:
                    measured.setdefault(row["pass"], {}).setdefault((op, part), []).append(
                        seconds)
    out = []
    for label, parts in measured.items():
        spec = plan.passes.get(spec_label(label))   # a library's pass predicts nothing
        predicted = (executor.predicted_parts(spec, _fused(answers, label))
                     if isinstance(spec, planfile.PassSpec) else {})
        for (op, part), values in parts.items():
            out.append({"pass": label, "threads": threads, "op": op,
                        "kind": "transform" if part == executor.TRANSFORMS else kinds[op],
                        "layer_class": classes.get(op, "") if part == executor.OP else "",
                        "part": part, "measured_s": statistics.median(values),
                        "predicted_s": predicted.get((op, part), math.nan), "host": host})
    return out


def _summary(answers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One pass in one mode: every process's values pooled; the first non-ok status wins
    (a pass wrong in one process is wrong)."""
    bad = [a for a in answers if a["status"] != "ok"]
    first = bad[0] if bad else answers[0]
    row = {"status": first["status"], "reason": first["reason"],
           **oneshot.pooled_timing(answers)}
    for key in ("max_abs_err", "max_rel_err", "err_bound_ratio", "build_s", "first_call_s"):
        row[key] = max((float(a.get(key, math.nan)) for a in answers), default=math.nan)
    return row


def write(results: NetworkResults, directory: Path, plan_path: Path,
          environment: dict[str, Any]) -> Path:
    """``directory``: network.parquet, network_ops.parquet (with a profile),
    environment.json and plan.json (the plan run); in a sweep's results directory the
    environment goes to network_environment.json instead."""
    from convbench.results import schema

    directory.mkdir(parents=True, exist_ok=True)
    sweep = (directory / schema.MANIFEST).exists()
    results.frame.to_parquet(directory / NETWORK_FILE, index=False)
    if len(results.ops):
        results.ops.to_parquet(directory / NETWORK_OPS_FILE, index=False)
    (directory / PLAN_COPY).write_bytes(Path(plan_path).read_bytes())
    name = SWEEP_SIDE_ENVIRONMENT if sweep else ENVIRONMENT
    (directory / name).write_text(json.dumps(environment, indent=1, default=str) + "\n")
    return directory / NETWORK_FILE


def load(directory: Path) -> pd.DataFrame:
    path = Path(directory) / NETWORK_FILE
    if not path.is_file():
        raise ConvbenchError(f"{path}: no such file (measure with: convbench run --network "
                             "PLAN.json -o DIR)")
    return pd.read_parquet(path)


def _ms(seconds: float) -> str:
    return "-" if not math.isfinite(seconds) else f"{seconds * 1e3:.3f}"


def run_reference_s(row: dict[str, Any]) -> float:
    """The in-run reference's median in a pass's rounds (its median over its ref_ratio)."""
    ratio = float(row.get("ref_ratio", math.nan))
    return float(row["median_s"]) / ratio if ratio > 0 else math.nan


def scaled_prediction(row: dict[str, Any]) -> float:
    """The pass's prediction at the machine speed of its own rounds: predicted x this
    run's reference / the reference while the plan's costs were measured (NaN where either
    is unknown)."""
    tuned = float(row.get("plan_reference_s", math.nan))
    now = run_reference_s(row) if row.get("status") == "ok" else math.nan
    return float(row["predicted_s"]) * now / tuned if tuned > 0 else math.nan


def _ratio(measured: float, predicted: float) -> str:
    ok = math.isfinite(measured) and math.isfinite(predicted) and predicted > 0
    return f"{measured / predicted:.2f}" if ok else "-"


def summary_table(frame: pd.DataFrame) -> str:
    """Measured vs predicted per pass, and the plan's speedups, per thread count and mode."""
    from convbench.textable import format_table

    lines = []
    for (threads, mode), group in frame.groupby(["threads", "cache"], sort=False):
        rows = [["pass", "status", "measured ms", "95% CI ms", "predicted ms",
                 "measured/predicted", "at run speed", "note"]]
        scaled_any = False
        for r in group.to_dict("records"):   # "pass" is a keyword: no itertuples
            ok = r["status"] == "ok"
            measured = r["median_s"] if ok else math.nan
            scaled = scaled_prediction(r)
            scaled_any = scaled_any or math.isfinite(scaled)
            rows.append([r["pass"], r["status"], _ms(measured),
                         f"{_ms(r['ci_low_s'])}-{_ms(r['ci_high_s'])}" if ok else "-",
                         _ms(r["predicted_s"]), _ratio(measured, r["predicted_s"]),
                         _ratio(measured, scaled), "" if ok else str(r["reason"])[:80]])
        plan_cache = group.plan_cache.iloc[0]
        plan_threads = int(group.plan_threads.iloc[0])
        lines.append(f"{threads} thread(s), cache {mode} (predictions are for "
                     f"{plan_threads} thread(s), cache {plan_cache}):")
        lines.append(format_table(rows, right=(2, 4, 5, 6)))
        if scaled_any:
            tuned = float(group.plan_reference_s.iloc[0])
            now = [run_reference_s(r) for r in group.to_dict("records") if r["status"] == "ok"]
            lines.append(f"at run speed: measured / (predicted x the in-run reference now, "
                         f"{_ms(statistics.median(now))} ms, / while the costs were "
                         f"measured, {_ms(tuned)} ms)")
        lines.extend(speedup_lines(group))
        lines.append("")
    return "\n".join(lines).rstrip()


def profile_table(ops: pd.DataFrame, most: int = 5) -> str:
    """Per pass and thread count: measured inside the pass vs predicted, by kind of op, and
    the ops that ran furthest over their prediction."""
    from convbench.textable import format_table

    lines = []
    for (label, threads), group in ops.groupby(["pass", "threads"], sort=False):
        rows = [["kind", "ops", "in the pass ms", "predicted ms", "in pass/predicted"]]
        for kind, part in group.groupby("kind", sort=False):
            # a library's pass predicts nothing: its sum is NaN, not 0
            measured, predicted = part.measured_s.sum(), part.predicted_s.sum(min_count=1)
            rows.append([kind, str(len(part)), _ms(measured), _ms(predicted),
                         _ratio(measured, predicted)])
        predicted_all = group.predicted_s.sum(min_count=1)
        rows.append(["all", str(len(group)), _ms(group.measured_s.sum()), _ms(predicted_all),
                     _ratio(group.measured_s.sum(), predicted_all)])
        lines.append(f"{label} at {threads} thread(s), each op timed on its own inside the "
                     "pass (medians over passes):")
        lines.append(format_table(rows, right=(1, 2, 3, 4)))
        over = group.assign(excess=group.measured_s - group.predicted_s).dropna(
            subset=["excess"]).nlargest(most, "excess")
        if len(over):
            lines.append("furthest over their prediction: " + ", ".join(
                f"{r.op} {r.part} {_ms(r.measured_s)} vs {_ms(r.predicted_s)} ms"
                for r in over.itertuples()))
        lines.append("")
    lines.extend(library_in_pass_lines(ops, most))
    return "\n".join(lines).rstrip()


def _geomean(ratios: pd.Series) -> float:
    return float(np.exp(np.log(ratios).mean()))


def library_in_pass(ops: pd.DataFrame, library: str = ORT) -> pd.DataFrame:
    """Per thread count and conv op, inside the passes: the plan's conv against the
    library's node for it (``library``/plan: above 1, ours is faster).  The library's node
    holds what it fused into the conv (relu, relu6, the residual add), ours the conv with
    the relus and adds it fused (:attr:`convbench.network.executor.NetworkPass.fused`): the rest
    of the glue is compared as a whole beside it (:func:`library_in_pass_lines`).  At 2
    threads this is the fair per-layer cold comparison the per-layer cold-weights protocol
    is not (:meth:`convbench.harness.coldcache.Evictor.before_twin`)."""
    convs = ops[(ops.part == "op") & (ops.kind == "conv")]
    ours = convs[convs["pass"] == planfile.PLAN]
    theirs = convs[convs["pass"] == library]
    both = ours.merge(theirs, on=["threads", "op"], suffixes=("", "_library"))
    return pd.DataFrame({"threads": both.threads, "op": both.op,
                         "layer_class": both.layer_class, "ours_s": both.measured_s,
                         "library_s": both.measured_s_library,
                         "ratio": both.measured_s_library / both.measured_s})


def library_in_pass_lines(ops: pd.DataFrame, most: int = 5, library: str = ORT
                          ) -> list[str]:
    """The per-layer comparison inside the passes, by layer class, and what each side
    spends besides its convs (glue, transforms, ORT's reorders)."""
    table = library_in_pass(ops, library)
    lines = []
    for threads, group in table.groupby("threads", sort=True):
        parts = [f"all {_geomean(group.ratio):.2f}"]
        for cls, rows in group.groupby("layer_class", sort=True):
            worst = rows.loc[rows.ratio.idxmin()]
            parts.append(f"{cls} {_geomean(rows.ratio):.2f} (min {worst.ratio:.2f} {worst.op})")
        lines.append(f"{library}/plan per conv inside the passes at {threads} thread(s), "
                     "geomean by layer class (its node holds the relu / add it fused): "
                     + "; ".join(parts))
        sides = ops[ops.threads == threads]
        rest = []
        for label in (planfile.PLAN, library):
            side = sides[sides["pass"] == label]
            convs = side[(side.part == "op") & (side.kind == "conv")].measured_s.sum()
            rest.append(f"{label} convs {_ms(convs)} ms + the rest "
                        f"{_ms(side.measured_s.sum() - convs)} ms")
        lines.append("  " + "; ".join(rest))
        lowest = group.nsmallest(most, "ratio")
        lines.append("  lowest: " + ", ".join(
            f"{r.op} {r.ratio:.2f} ({_ms(r.ours_s)} vs {_ms(r.library_s)} ms)"
            for r in lowest.itertuples()))
    return lines


def _headroom(group: pd.DataFrame, best: str) -> str:
    """What the costs allowed against the best single-layout plan ``best``: the plan's
    predicted speedup over it, and the per-layer bound's, the most any plan could gain with
    these kernels (every conv its fastest candidate, transforms free).  A goal above the
    bound's ratio is out of reach of any layout plan; only faster kernels move it."""
    predicted = group.set_index("pass").predicted_s
    if not {best, planfile.PLAN, BOUND} <= set(predicted.index):
        return ""
    single = float(predicted[best])
    plan, bound = float(predicted[planfile.PLAN]), float(predicted[BOUND])
    if not all(math.isfinite(x) and x > 0 for x in (single, plan, bound)):
        return ""
    return (f" (predicted {single / plan:.2f}x; at most {single / bound:.2f}x on these "
            "costs: the per-layer bound, each conv its fastest candidate, transforms free)")


def speedup_lines(group: pd.DataFrame) -> list[str]:
    """The plan's speedup over the best single-layout plan, over the local plans (what the
    global step adds) and over the libraries (measured)."""
    ok = group[group.status == "ok"].set_index("pass")
    if planfile.PLAN not in ok.index:
        return ["the plan's pass was not timed: no speedups"]
    plan_s = float(ok.loc[planfile.PLAN, "median_s"])
    out = []
    single = [label for label in planfile.SINGLE_LAYOUT if label in ok.index]
    if single:
        best = min(single, key=lambda label: float(ok.loc[label, "median_s"]))
        out.append(f"plan vs best single-layout plan ({best}): "
                   f"{float(ok.loc[best, 'median_s']) / plan_s:.2f}x"
                   + _headroom(group, best))
    local = {"local-best": "each conv its own fastest variant",
             "local-best-nchw-glue": "the same, relu / pooling / add in NCHW"}
    for label in planfile.LOCAL:
        if label in ok.index:
            out.append(f"plan vs {label} ({local[label]}): "
                       f"{float(ok.loc[label, 'median_s']) / plan_s:.2f}x")
    for label, what in ABLATIONS.items():
        if label in ok.index:
            out.append(f"plan vs {label} ({what}): "
                       f"{float(ok.loc[label, 'median_s']) / plan_s:.2f}x")
    libraries = {ONEDNN: "oneDNN (prepacked, op for op)",
                 ORT: "ONNX Runtime (one session, its fusions)"}
    for label, what in libraries.items():
        if label in ok.index:
            out.append(f"plan vs {what}: {float(ok.loc[label, 'median_s']) / plan_s:.2f}x")
    return out
