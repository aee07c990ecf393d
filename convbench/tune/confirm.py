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
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from convbench.errors import ConvbenchError
from convbench.tune import records
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
    last = records.last_per_variant(records.of_group(known, key))
    return {v for v in variants
            if v in last and last[v]["status"] == records.OK and not last[v]["final"]}


def final_round(known: Iterable[Mapping[str, Any]], key: GroupKey) -> int | None:
    """The index of the group's final round, None while it has none."""
    finals = [r["round"] for r in records.of_group(known, key) if r["final"]]
    return max(finals) if finals else None
