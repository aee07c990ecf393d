"""plan.json as the network pass reads it: the suite the plan was made for, and per runnable
plan (the chosen one, the best all-NCHW, all-NHWC and all-NCHW[x]c, the two local plans)
every op's variant and layouts and every transform, with its predicted time.

``convbench plan`` writes the suite's own text into plan.json, so the pass runs the graph
the plan was made for; a plan.json written before that names the suite only, which is then
loaded by name or path.  The same :class:`PassSpec` comes from an in-memory
:class:`convbench.plan.layouts.Plan` (:func:`from_plan`), for code that plans and runs in
one process.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convbench.errors import ConvbenchError
from convbench.plan.layouts import EdgeTransform, Plan
from convbench.spec.suite import Suite, load_suite, parse_suite

PLAN = "plan"
# runnable alternatives, pass label -> plan.json key: the best single-layout plans, and the
# local plans (each conv's own fastest variant, no global step: convbench.plan.layouts)
SINGLE_LAYOUT = {"all-nchw": "all-nchw", "all-nhwc": "all-nhwc", "all-nchwxc": "all-nchwxc"}
LOCAL = {"local-best": "local-best", "local-best-nchw-glue": "local-best-nchw-glue"}
ALTERNATIVES = {**SINGLE_LAYOUT, **LOCAL}
BOUND_KEY = "per-layer bound"


class PlanFileError(ConvbenchError):
    """A plan.json the pass cannot run: unreadable, or not a plan of this suite's graph."""


@dataclass(frozen=True)
class TransformSpec:
    """``tensor`` converted from ``src`` to ``dst`` before ``consumer`` runs."""

    tensor: str
    consumer: str
    src: str
    dst: str
    seconds: float = math.nan


@dataclass(frozen=True)
class StepSpec:
    """One op of a pass: the variant a conv runs (None for glue), the layout it reads (a
    conv's in_layout; a glue op's inputs) and the one it writes, transforms before it."""

    op: str
    kind: str
    variant: str | None
    in_layout: str
    layout: str
    transforms: tuple[TransformSpec, ...] = ()
    seconds: float = math.nan   # the op's predicted time (plan.json)


@dataclass(frozen=True)
class PassSpec:
    """A runnable plan: steps in the network's op order, the output's transform to NCHW."""

    label: str
    steps: tuple[StepSpec, ...]
    output_transform: TransformSpec | None
    predicted_s: float

    @property
    def variants(self) -> tuple[str, ...]:
        return tuple(s.variant for s in self.steps if s.variant is not None)


@dataclass(frozen=True)
class PlanFile:
    """What the pass needs from plan.json: the suite, the passes (or why one is missing),
    the per-layer bound's predicted total and the plan's threads and cache mode."""

    suite: Suite
    passes: dict[str, PassSpec | str]
    bound_s: float
    threads: int
    cache: str
    document: Mapping[str, Any]
    reference_s: float = math.nan   # the in-run reference while the costs were measured


def _transform(raw: Mapping[str, Any]) -> TransformSpec:
    return TransformSpec(str(raw["tensor"]), str(raw["consumer"]), str(raw["from_layout"]),
                         str(raw["to_layout"]), float(raw.get("seconds", math.nan)))


def _steps(raw_ops: list[Mapping[str, Any]]) -> tuple[StepSpec, ...]:
    return tuple(StepSpec(str(o["op"]), str(o["kind"]), o.get("variant"),
                          str(o["in_layout"]), str(o["out_layout"]),
                          tuple(_transform(t) for t in o.get("transforms", ())),
                          float(o.get("seconds", math.nan)))
                 for o in raw_ops)


def _output_transform(document: Mapping[str, Any]) -> TransformSpec | None:
    if "output_transform" in document:
        raw = document["output_transform"]
        return None if raw is None else _transform(raw)
    # plan.json before output_transform: the top-level list ends with it, if paid
    tail = [t for t in document.get("transforms", ()) if t.get("consumer") == "output"]
    return _transform(tail[0]) if tail else None


def _suite(document: Mapping[str, Any], path: Path) -> Suite:
    text = document.get("suite_yaml")
    if text:
        return parse_suite(text, Path(document.get("suite_path") or f"{path} (suite_yaml)"))
    try:
        return load_suite(document["suite"])
    except ConvbenchError as exc:
        raise PlanFileError(f"{path}: the plan holds no suite text (made by an older "
                            f"convbench plan) and its suite {document['suite']!r} cannot be "
                            f"loaded: {exc}") from None


def from_document(document: Mapping[str, Any], path: Path) -> PlanFile:
    """A parsed plan.json (``path`` for messages and an older plan's suite lookup)."""
    try:
        suite = _suite(document, path)
        passes: dict[str, PassSpec | str] = {
            PLAN: PassSpec(PLAN, _steps(document["ops"]), _output_transform(document),
                           float(document["predicted"]["total_s"]))}
        alternatives = document.get("alternatives", {})
        for label, key in ALTERNATIVES.items():
            alt = alternatives.get(key)
            if alt is None:
                passes[label] = (f"plan.json has no {key} alternative (made by an older "
                                 "convbench plan: plan again)")
            elif "unavailable" in alt:
                passes[label] = f"unavailable: {alt['unavailable']}"
            elif "ops" not in alt:
                passes[label] = (f"plan.json lists only the total of {key}, not its steps "
                                 "(made by an older convbench plan: plan again)")
            else:
                passes[label] = PassSpec(label, _steps(alt["ops"]), _output_transform(alt),
                                         float(alt["total_s"]))
        bound = alternatives.get(BOUND_KEY, {})
        bound_s = float(bound.get("total_s", math.nan)) if "unavailable" not in bound \
            else math.nan
        threads, cache = int(document["threads"]), str(document["cache"])
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanFileError(f"{path}: not a plan.json of convbench plan "
                            f"({type(exc).__name__}: {exc})") from None
    if suite.graph is None:
        raise PlanFileError(f"{path}: suite {suite.name} has no network graph")
    names = [op.name for op in suite.graph.ops]
    for spec in passes.values():
        if isinstance(spec, PassSpec) and [s.op for s in spec.steps] != names:
            raise PlanFileError(f"{path}: the {spec.label} pass's ops are not the ops of "
                                f"suite {suite.name}'s network, in order")
    reference = document.get("reference_s")
    return PlanFile(suite, passes, bound_s, threads, cache, document,
                    float(reference) if isinstance(reference, (int, float)) else math.nan)


def read_plan(path: Path) -> PlanFile:
    """plan.json from ``convbench plan -o``."""
    try:
        document = json.loads(Path(path).read_text())
    except OSError as exc:
        raise PlanFileError(f"{path}: cannot read the plan ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise PlanFileError(f"{path}: not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise PlanFileError(f"{path}: not a plan.json of convbench plan")
    return from_document(document, Path(path))


def _edge(t: EdgeTransform) -> TransformSpec:
    return TransformSpec(t.tensor, t.consumer, t.src, t.dst, t.seconds)


def from_plan(plan: Plan, label: str = PLAN) -> PassSpec:
    """The pass of an in-memory plan (not the per-layer bound: it runs nothing real)."""
    if plan.bound:
        raise PlanFileError("the per-layer bound is no runnable plan")
    steps = tuple(StepSpec(s.op, s.kind, s.candidate.variant_id if s.candidate else None,
                           s.candidate.in_layout if s.candidate else s.layout, s.layout,
                           tuple(map(_edge, s.transforms)))
                  for s in plan.steps)
    tail = _edge(plan.output_transform) if plan.output_transform else None
    return PassSpec(label, steps, tail, plan.total_seconds)
