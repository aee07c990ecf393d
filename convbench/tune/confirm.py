"""What ``convbench tune --confirm PLAN`` measures: the conv variants a layout plan and its
alternatives use whose cost comes from a short halving round.

The halving measures each layer's winner at the suite's own timing, but the global plan
also prices the layer in every other layout, with the best candidate of that layout --
mostly one the halving dropped after round 0 (3 values of a third of the suite's time in
one process).  Such a cost is a ranking, not a figure: MobileNet V2's 1-thread all-NCHW16c
pass ran 0.81 of its prediction (Zen 3 host), its convs priced from round 0s on 19 of 30
layers, where one layer's round 0 and final medians differed by 2x (45.7 vs 94.9 us).  So
the plan's choice between layouts, and its claims against the single-layout plans, rested
on the short rounds.  Confirming measures exactly those variants once at the suite's
timing and records them as the group's final round, beside its winner: then every cost the
plan compares is a final-round median (and a confirmed variant that beats the winner
becomes the tuned variant, :func:`.records.best`).

It also measures each such variant's *categorical neighbours*: the layer's candidates one
tile shape, loop order or bool away (same algorithm, layout and numeric knobs), measured or
not.  A halving under ``--transfer`` covers a layout the plan needs with the one candidate
the prior ranks first there (:func:`.prior.layout_cover`), and the prior can only say
"equal or not" of two tiles, so a layout's cost could be a poor tile's.  MobileNet V2
tuned with --transfer (Zen 5 host, cold-weights): after confirming with the neighbours,
planning again changed 21 of the 2-thread plan's 52 convs (16 of them depthwise tiles) and
34 at 1 thread (12), e.g.
block_11_depthwise NCHW32c 1 x 4 -> 2 x 7, 21.8 -> 13.4 us (2 threads), 1 x 4 -> 1 x 7,
38.3 -> 25.3 us (1 thread); the 2-thread plan's prediction fell from 2.068 to 1.927 ms, and
its pass ran 1.920 ms warm (ONNX Runtime 2.037), for 352 final-round measurements (the
1-thread confirm: 376, 87 s with both plans).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from convbench.errors import ConvbenchError
from convbench.kernels.base import Variant
from convbench.tune import records
from convbench.tune.prior import graded
from convbench.tune.records import GroupKey


def plan_variants(path: Path) -> tuple[int, str, dict[str, set[str]]]:
    """A plan file's thread count, cache mode and, per conv layer, the variants its ops and
    its alternatives' ops run."""
    try:
        plan = json.loads(Path(path).read_text())
        passes = [plan, *plan.get("alternatives", {}).values()]
        wanted: dict[str, set[str]] = {}
        for each in passes:
            for op in each.get("ops", ()):
                if op.get("kind") == "conv":
                    wanted.setdefault(op["layer"], set()).add(op["variant"])
        return int(plan["threads"]), str(plan["cache"]), wanted
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConvbenchError(f"{path}: not a plan of convbench plan ({exc})") from None


def unconfirmed(known: Iterable[Mapping[str, Any]], key: GroupKey,
                variants: Iterable[str]) -> set[str]:
    """Of ``variants``, those whose last record in the group is an ok one from a round
    before the final (a failed one stays failed; one never measured is not the plan's)."""
    return _short_in(records.last_per_variant(records.of_group(known, key)), variants)


def _short_in(last: Mapping[str, Mapping[str, Any]], variants: Iterable[str]) -> set[str]:
    """:func:`unconfirmed` over the group's last record per variant."""
    return {v for v in variants if v in last and _short(last[v])}


def _short(last: Mapping[str, Any]) -> bool:
    """Whether a variant's last record is an ok one from a round before the final."""
    return last["status"] == records.OK and not last["final"]


def final_round(known: Iterable[Mapping[str, Any]], key: GroupKey) -> int | None:
    """The index of the group's final round, None while it has none."""
    finals = [r["round"] for r in records.of_group(known, key) if r["final"]]
    return max(finals) if finals else None


def neighbours(variants: Iterable[str], space: Iterable[Variant]) -> set[str]:
    """The ids of ``space``'s candidates one categorical knob (a value :func:`.prior.graded`
    does not grade: a tile, an order, a bool) away from one of ``variants`` (ids): the same
    algorithm, layout and every other knob."""
    wanted = [Variant.parse(v) for v in variants]
    found = set()
    for candidate in space:
        params = candidate.param_dict
        for v in wanted:
            if (v.algorithm, v.layout) != (candidate.algorithm, candidate.layout):
                continue
            theirs = v.param_dict
            differ = [k for k in params.keys() | theirs.keys() if params.get(k) != theirs.get(k)]
            # (a knob one side leaves out, quiet at its default, is graded if the other's is)
            if len(differ) == 1 and not any(graded(side.get(differ[0]))
                                            for side in (params, theirs)):
                found.add(candidate.id)
                break
    return found


def to_measure(known: Iterable[Mapping[str, Any]], key: GroupKey, variants: Iterable[str],
               space: Iterable[Variant]) -> set[str]:
    """What ``--confirm`` measures in a group: the plan's ``variants`` whose last record is
    from a short round (:func:`unconfirmed`) and their :func:`neighbours` in ``space`` that
    have no final-round record (never measured, or only in short rounds; a failed one stays
    failed)."""
    variants = set(variants)
    last = records.last_per_variant(records.of_group(known, key))
    near = {v for v in neighbours(variants, space) - variants
            if v not in last or _short(last[v])}
    return _short_in(last, variants) | near
