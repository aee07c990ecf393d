"""A layout plan for people (a terminal table) and for programs (plan.json)."""

from __future__ import annotations

import math
from typing import Any

from convbench.plan.layouts import EdgeTransform, Plan
from convbench.textable import format_table

FORMAT_VERSION = 1


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def _transform_text(t: EdgeTransform) -> str:
    return f"{t.tensor} {t.src}->{t.dst} {t.seconds * 1e6:.1f} us"


def plan_table(plan: Plan) -> str:
    """One row per op with a candidate or a transform; glue ops that pay nothing left out."""
    rows = [["op", "layer", "variant", "in -> out", "ms", "transform paid"]]
    for s in plan.steps:
        if s.candidate is None and not s.transforms:
            continue
        c = s.candidate
        rows.append([s.op, s.layer or s.kind, c.variant_id if c else "",
                     f"{c.in_layout} -> {c.out_layout}" if c else s.layout,
                     _ms(s.seconds), "; ".join(map(_transform_text, s.transforms))])
    if plan.output_transform:
        rows.append(["(output)", "", "", "", "", _transform_text(plan.output_transform)])
    return format_table(rows, right=(4,))


def alternatives_table(plans: dict[str, Plan | str]) -> str:
    rows = [["plan", "total ms", "convs+glue ms", "transforms ms", "transforms"]]
    for label, plan in plans.items():
        if isinstance(plan, str):
            rows.append([label, "-", "-", "-", f"unavailable: {plan}"])
            continue
        rows.append([plan.label, _ms(plan.total_seconds), _ms(plan.op_seconds),
                     "ignored" if plan.bound else _ms(plan.transform_seconds),
                     "" if plan.bound else str(len(plan.transforms))])
    return format_table(rows, right=(1, 2, 3, 4))


def block_text(layout: str, plan: Plan | str) -> str:
    """One block's all-NCHW[x]c plan in a line: its total, or why there is none."""
    return f"{layout} {_ms(plan.total_seconds)} ms" if isinstance(plan, Plan) \
        else f"{layout} unavailable ({plan})"


def block_json(plan: Plan | str) -> dict[str, Any]:
    return {"total_s": plan.total_seconds} if isinstance(plan, Plan) else {"unavailable": plan}


def explanations(plan: Plan) -> list[str]:
    return [f"{s.op} ({s.layer or s.kind}): {s.why}" for s in plan.steps if s.why]


def _transform_json(t: EdgeTransform) -> dict[str, Any]:
    return {"tensor": t.tensor, "consumer": t.consumer, "shape": list(t.shape),
            "from_layout": t.src, "to_layout": t.dst, "seconds": t.seconds}


def _steps_json(plan: Plan) -> list[dict[str, Any]]:
    return [{"op": s.op, "kind": s.kind, "layer": s.layer,
             "variant": s.candidate.variant_id if s.candidate else None,
             "in_layout": s.candidate.in_layout if s.candidate else s.layout,
             "out_layout": s.layout, "seconds": s.seconds, "fused_into": s.fused_into,
             "transforms": [_transform_json(t) for t in s.transforms], "why": s.why}
            for s in plan.steps]


def _alternative_json(plan: Plan | str) -> dict[str, Any]:
    """An alternative's totals and, for a runnable plan, its steps (``convbench run
    --network`` executes them; the bound has none that run)."""
    if isinstance(plan, str):
        return {"unavailable": plan}
    document: dict[str, Any] = {
        "total_s": plan.total_seconds, "ops_s": plan.op_seconds,
        "transforms_s": None if plan.bound else plan.transform_seconds, "bound": plan.bound}
    if not plan.bound:
        document["ops"] = _steps_json(plan)
        document["output_transform"] = (_transform_json(plan.output_transform)
                                        if plan.output_transform else None)
    return document


def plan_json(plan: Plan, alternatives: dict[str, Plan | str], *, suite: str,
              hosts: tuple[str, ...], threads: int, cache: str,
              estimated: list[dict[str, Any]], suite_path: str | None = None,
              suite_text: str | None = None, reference_s: float | None = None,
              left_out: dict[str, Any] | None = None) -> dict[str, Any]:
    """plan.json: the chosen candidate per conv, every transform, the predicted totals, and
    the suite's own text (so the network pass runs the graph the plan was made for, whether
    or not the suite file still exists or changed since); ``reference_s``, the in-run
    reference's median while the conv costs were measured (null where unknown), lets the
    network pass scale the prediction to its own machine speed; ``left_out``: how many
    measured candidates the plan could not consider, and the untimed layouts why."""
    return {
        "format_version": FORMAT_VERSION, "suite": suite, "host": ", ".join(hosts),
        "threads": threads, "cache": cache,
        "suite_path": suite_path, "suite_yaml": suite_text,
        "ops": _steps_json(plan),
        "output_transform": (_transform_json(plan.output_transform)
                             if plan.output_transform else None),
        "transforms": [_transform_json(t) for t in plan.transforms],
        "estimated_transforms": estimated,
        "left_out_candidates": left_out or {"candidates": 0, "layouts": []},
        "predicted": {"total_s": plan.total_seconds, "ops_s": plan.op_seconds,
                      "transforms_s": plan.transform_seconds},
        "reference_s": reference_s if reference_s is not None and math.isfinite(reference_s)
        else None,
        "alternatives": {label: _alternative_json(p) for label, p in alternatives.items()},
    }
