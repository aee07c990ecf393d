"""``convbench run --records FILE``: a run's plan with each tuned layer group reduced to its
tuned variant, as AutoTVM's ``apply_history_best`` does for a compile.

For each group of the plan (a layer at one thread count, vector width and cache mode) the
best record of this host with the same descriptor, threads, vector width and cache mode
(:func:`records.best`) decides: the group measures that variant -- whether or not the
sweep's grid has it (nchwc's tuned blocks usually are not in the grid) -- plus the
sweep's library baselines, so the comparison stays.  A group without one runs its full
sweep.  Records of another host are never applied (the machine that made them is not this
one): one warning says so.  When nothing of this host matches, the run is refused.

The path and the decisions go into environment.json (``records``); the path is in the
manifest's options, so ``run --resume`` applies the same file again (and refuses, as for
any changed plan, when the file now decides differently).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convbench.errors import ConvbenchError
from convbench.harness.plan import Case, Plan
from convbench.kernels import registry
from convbench.tune import records
from convbench.tune.space import group_label


@dataclass(frozen=True)
class Applied:
    """What a records file decided for a run."""

    path: str
    host: str
    decided: dict[str, str]          # group label -> the tuned variant it runs
    full_sweep: tuple[str, ...]      # groups without a usable record
    other_hosts: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "host": self.host, "layers_decided": len(self.decided),
                "decided": dict(self.decided), "full_sweep": list(self.full_sweep),
                "other_hosts": list(self.other_hosts)}

    def line(self) -> str:
        """One line for the user: how many groups the records decided, which did not."""
        total = len(self.decided) + len(self.full_sweep)
        text = (f"records {self.path}: {len(self.decided)} of {total} layer groups run "
                "their tuned variant")
        if self.full_sweep:
            shown = ", ".join(self.full_sweep[:5])
            more = f" and {len(self.full_sweep) - 5} more" if len(self.full_sweep) > 5 else ""
            text += f"; no record, full sweep: {shown}{more}"
        return text


def tuned_case(group_case: Case, record: Mapping[str, Any]) -> Case | None:
    """The case measuring ``record``'s variant in ``group_case``'s group; None when this
    convbench cannot run it (an algorithm, layout or knob value it no longer has)."""
    alg = registry.algorithms().get(record["algorithm"])
    if alg is None or alg.layout_refusal(record["layout"]):
        return None
    params = alg.complete(record["params"])
    names = {p.name for p in alg.params}
    if set(params) != names or any(alg.param(k).rejects(v) for k, v in params.items()):
        return None
    if alg.applies(group_case.problem, record["layout"], params) is not None:
        return None
    return dataclasses.replace(group_case, variant=alg.variant(record["layout"], params),
                               skip_reason=None, baseline=alg.baseline,
                               kernel_version=registry.kernel_version(alg.name))


def apply(plan: Plan, path: str | Path, host: str) -> tuple[Plan, Applied]:
    """``plan`` with every group that has a usable record of ``host`` reduced to its tuned
    variant and the group's baselines.  ConvbenchError when no group has one."""
    found = records.read(path)
    others = tuple(sorted({r["host"] for r in found if r["host"] != host}))
    if others:
        warnings.warn(f"{path}: records of host {', '.join(others)} are not applied: this "
                      f"host is {host}", stacklevel=2)
    cases: list[Case] = []
    decided: dict[str, str] = {}
    full: list[str] = []
    for group in plan.groups():
        first = group[0]
        best = records.best(found, records.GroupKey.of_case(first, host))
        case = tuned_case(first, best) if best is not None else None
        if case is None:
            cases += group
            full.append(group_label(first))
            continue
        cases.append(case)
        cases += [c for c in group if c.baseline and c.case_id != case.case_id]
        decided[group_label(first)] = case.variant.id
    if not decided:
        mine = [r for r in found if r["host"] == host]
        held = (f"; this host's records are for cache mode(s) "
                f"{', '.join(sorted({r['cache'] for r in mine}))} (--cache)" if mine else "")
        raise ConvbenchError(f"{path}: no record of this host ({host}) matches a layer of the "
                             f"plan (same descriptor, threads, vector width and cache mode)"
                             f"{held}")
    return (dataclasses.replace(plan, cases=tuple(cases)),
            Applied(str(path), host, decided, tuple(full), others))


def this_host() -> str:
    """The host fingerprint records carry (machine.store.host_identity()'s key)."""
    from convbench.machine.store import host_identity

    return str(host_identity()["key"])


def for_run(plan: Plan, records_path: str | None) -> tuple[Plan, Applied | None]:
    """A run's plan with its ``--records`` applied (unchanged without)."""
    if not records_path:
        return plan, None
    return apply(plan, records_path, this_host())
