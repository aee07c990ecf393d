"""Reading both sides of a comparison and pairing their variants by identity.

A side is a results directory (``convbench run``) or a pyperf JSON file.  Both pair on the
case key of :mod:`convbench.identity` (layer, variant, threads, vector width), and a pair
must measure the same problem: a layer that kept its name but changed its shape is a
different problem, and comparing it would report a false change, so :func:`match` refuses
(a ConvbenchError naming the layers: exit 2).  Variants found on one side only are kept
and listed, never dropped; a different host or different library versions give warnings
that name what differs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from convbench.errors import ConvbenchError
from convbench.identity import CaseKey, parse_case_id, parse_pyperf_name
from convbench.results import schema
from convbench.status import Status

# The column of simulated instructions per call (callgrind's Ir) that deterministic mode
# compares.  The first of these present in both runs is used; --instructions-column
# overrides.  The sim backend (harness/counters/sim.py) writes callgrind's Ir as sim_ir.
INSTRUCTION_COLUMN = "sim_ir"
INSTRUCTION_COLUMNS = (INSTRUCTION_COLUMN, "sim_instructions", "ctr_Ir", "ctr_instructions")

# Environment entries whose difference between the runs deserves a warning: the host and
# anything that looks like a version.  Everything else (load, time, clock) may differ.
HOST_KEYS = ("host", "hostname", "cpu", "cpu_model", "cpu_model_name", "cores", "machine",
             "arch", "platform", "kernel")
# compare's BASELINE may name a history root: its last stable level is the baseline
HISTORY_PREFIX = "history:"
PYPERF_HOST_KEYS = ("hostname", "cpu_model_name", "cpu_count", "platform", "python_version",
                    "python_implementation", "perf_version")


@dataclass(frozen=True, eq=False)  # holds arrays: compared by identity
class Sample:
    """One variant of one run: its per-call values and what identifies it."""

    key: tuple[Any, ...]
    case_id: str
    suite: str
    layer: str
    variant: str
    threads: int | None
    vector_width: str
    status: str
    reason: str = ""
    values: np.ndarray = field(default_factory=lambda: np.empty(0))
    normalised: np.ndarray | None = None   # value / ref_value per round, when measured
    processes: np.ndarray | None = None    # worker process of each value, when recorded
    instructions: float = float("nan")     # per call, from INSTRUCTION_COLUMNS
    descriptor: str = ""                   # the problem measured ("" when not recorded)
    kernel_version: str = ""               # hash of the kernel's code ("" when unknown)
    cache_model: str = ""                  # whose caches sim counts model ("" unknown)
    vector_code: str = ""                  # static profile line, asm_profile ("" unknown)

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    @property
    def label(self) -> str:
        """How reports name the variant: the case id."""
        return self.case_id


@dataclass
class Side:
    """One run as compare sees it."""

    path: Path
    kind: str                             # "results" or "pyperf"
    samples: dict[tuple[Any, ...], Sample]
    environment: dict[str, Any]           # flattened entries worth a warning when they differ
    suite_copy: Path | None = None        # the suite the run was made from (for --confirm)
    instruction_column: str | None = None

    @property
    def name(self) -> str:
        return self.path.name


@dataclass
class Matching:
    pairs: list[tuple[Sample, Sample]]
    only_baseline: list[Sample]
    only_current: list[Sample]
    warnings: list[str]


def _flatten(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, f"{name}.")
        else:
            yield name, value


def _watched(key: str) -> bool:
    """Host identity, library versions and numba's code settings (a worker's numba_config:
    NUMBA_OPT and the like): differences there change what a time means."""
    parts = key.lower().split(".")
    return (parts[-1] in HOST_KEYS or "version" in parts[-1]
            or any(p in ("versions", "libraries", "library_versions", "packages",
                         "numba_config") for p in parts[:-1]))


def _text(x: Any) -> str:
    """A string cell; missing (None, pandas NA) as ""."""
    return x if isinstance(x, str) else ""


def _as_float(x: Any) -> float:
    """A table cell as float; missing (None, pandas NA) as NaN."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def pick_instruction_column(base_columns: Any, cur_columns: Any,
                            preferred: str | None = None) -> str | None:
    """The instruction column deterministic mode uses: ``preferred`` if given, else the first
    of :data:`INSTRUCTION_COLUMNS` present in both runs."""
    candidates = (preferred,) if preferred else INSTRUCTION_COLUMNS
    for column in candidates:
        if column in base_columns and column in cur_columns:
            return column
    return None


def results_side(run: Any, instruction_column: str | None) -> Side:
    """A side from a loaded :class:`convbench.results.load.Results`."""
    path, table, values = run.path, run.table, run.values
    by_case = {cid: group for cid, group in values.groupby("case_id", sort=False)}
    samples = {}
    for row in table.to_dict("records"):
        key = tuple(row[c] for c in schema.IDENTITY)
        if key in samples:
            raise ConvbenchError(f"{path}: variant {row['case_id']} appears twice")
        group = by_case.get(row["case_id"])
        raw = normalised = np.empty(0)
        processes = None
        if group is not None and row["status"] == Status.OK:
            group = group.sort_values(["process", "round"] if "process" in group
                                      else "round")
            raw = group["value"].to_numpy(dtype=float)
            if "process" in group:
                processes = group["process"].to_numpy(dtype=int)
            if "ref_value" in group:
                ref = group["ref_value"].to_numpy(dtype=float)
                with np.errstate(divide="ignore", invalid="ignore"):  # judged just below
                    normalised = raw / ref
        has_ref = normalised.size > 0 and bool(np.all(np.isfinite(normalised)))
        samples[key] = Sample(
            key=key, case_id=str(row["case_id"]), suite=str(row.get("suite") or ""),
            layer=str(row["layer"]), variant=str(row["variant"]),
            threads=int(row["threads"]), vector_width=str(row["vector_width"]),
            status=str(row["status"]), reason=str(row.get("reason") or ""), values=raw,
            normalised=normalised if has_ref else None, processes=processes,
            instructions=_as_float(row.get(instruction_column)) if instruction_column
            else float("nan"), descriptor=_text(row.get("descriptor")),
            kernel_version=_text(row.get("kernel_version")),
            cache_model=_text(row.get("cache_model")),
            vector_code=_text(row.get("asm_profile")))
    env = {k: v for k, v in _flatten(run.environment) if _watched(k)}
    env.update({f"manifest.{k}": v for k, v in run.manifest.items() if "version" in k})
    suite_copy = path / schema.SUITE_COPY
    return Side(path, "results", samples, env, suite_copy if suite_copy.is_file() else None,
                instruction_column)


def _load_pyperf_side(path: Path) -> Side:
    from convbench.results.load import read_pyperf

    suite = read_pyperf(path)
    samples = {}
    env: dict[str, Any] = {}
    for bench in suite.get_benchmarks():
        name = bench.get_name()
        meta = bench.get_metadata()
        # convbench's pyperf.json names benchmarks layer/variant/t1/vauto; case ids work too
        key = parse_pyperf_name(name) or parse_case_id(name) or CaseKey(name, "", 0, "")
        runs = [run.values for run in bench.get_runs() if run.values]   # a run: a process
        samples[(name,)] = Sample(key=(name,), case_id=name, suite="", layer=key.layer,
                                  variant=key.variant, threads=key.threads or None,
                                  vector_width=key.vector_width, status=Status.OK,
                                  values=np.asarray([v for r in runs for v in r], float),
                                  processes=np.repeat(np.arange(len(runs)),
                                                      [len(r) for r in runs]),
                                  descriptor=str(meta.get("descriptor", "")),
                                  kernel_version=str(meta.get("kernel_version", "")))
        env.update({k: meta[k] for k in PYPERF_HOST_KEYS if k in meta})
    return Side(path, "pyperf", samples, env)


def _kind(path: Path) -> str:
    if path.is_dir():
        return "results"
    if path.is_file() and path.name.endswith((".json", ".json.gz")):
        return "pyperf"
    raise ConvbenchError(f"{path}: neither a results directory nor a pyperf JSON file")


def load_pair(baseline: str | Path, current: str | Path,
              instruction_column: str | None = None) -> tuple[Side, Side]:
    """Load both sides; they must be of the same kind (two results dirs or two pyperf files).
    A baseline ``history:ROOT`` is the last stable level of the current run's host in the
    runs under ROOT (:mod:`convbench.history.baseline`)."""
    if str(baseline).startswith(HISTORY_PREFIX):
        from convbench.history.baseline import history_side
        from convbench.results.load import load_results

        if _kind(Path(current)) != "results":
            raise ConvbenchError(f"{current}: a history baseline gates a results directory")
        cur_run = load_results(current)
        column = instruction_column if instruction_column in cur_run.table.columns else None
        return (history_side(Path(str(baseline)[len(HISTORY_PREFIX):]), cur_run, column),
                results_side(cur_run, column))
    base_path, cur_path = Path(baseline), Path(current)
    kinds = _kind(base_path), _kind(cur_path)
    if kinds[0] != kinds[1]:
        raise ConvbenchError(f"cannot compare a {kinds[0]} input ({base_path}) with a "
                             f"{kinds[1]} input ({cur_path}); give two of the same kind")
    if kinds[0] == "pyperf":
        return _load_pyperf_side(base_path), _load_pyperf_side(cur_path)
    from convbench.results.load import load_results

    base_run, cur_run = load_results(base_path), load_results(cur_path)
    column = pick_instruction_column(base_run.table.columns, cur_run.table.columns,
                                     instruction_column)
    if instruction_column and column is None:
        raise ConvbenchError(f"instruction column {instruction_column!r} is not in both "
                             f"{base_path} and {cur_path}")
    return results_side(base_run, column), results_side(cur_run, column)


def environment_warnings(base: Side, cur: Side) -> list[str]:
    """One warning per watched environment entry that differs (or exists on one side only)."""
    warnings = []
    for key in sorted(set(base.environment) | set(cur.environment)):
        a, b = base.environment.get(key), cur.environment.get(key)
        setting = ".numba_config." in key.lower()
        if a != b and not (setting and None in (a, b)):  # runs before it was recorded
            what = ("host" if key.split(".")[-1].lower() in HOST_KEYS
                    else "numba setting" if setting else "version")
            warnings.append(f"different {what}: {key} is {a!r} in the baseline, {b!r} in the "
                            f"current run")
    return warnings


def different_problems(pairs: list[tuple[Sample, Sample]]) -> dict[str, tuple[str, str]]:
    """Layers whose paired cases measured different problems: layer -> (baseline, current)
    descriptors.  A side that did not record its descriptor cannot disagree."""
    changed: dict[str, tuple[str, str]] = {}
    for b, c in pairs:
        if b.descriptor and c.descriptor and b.descriptor != c.descriptor:
            changed.setdefault(b.layer, (b.descriptor, c.descriptor))
    return changed


def different_cache_models(pairs: list[tuple[Sample, Sample]]) -> list[str]:
    """A warning when paired variants' simulated counts model different caches.

    callgrind's instruction counts do not depend on the cache geometry, so the
    deterministic gate on them still holds; its miss counts do, and a D1 miss rate under
    Cortex-A72's 32 KiB is no regression from one under Apple M1's 128 KiB."""
    seen = {(b.cache_model, c.cache_model) for b, c in pairs
            if b.cache_model and c.cache_model and b.cache_model != c.cache_model}
    return [f"different cache models: simulated cache counts come from {b!r} in the "
            f"baseline and {c!r} in the current run; their miss counts and rates are not "
            f"comparable (instruction counts are)" for b, c in sorted(seen)]


def match(base: Side, cur: Side) -> Matching:
    """Pair the variants of both sides; list the ones found on one side only.  Refuses
    (ConvbenchError) when a paired layer measured different problems."""
    pairs = [(base.samples[k], cur.samples[k]) for k in base.samples if k in cur.samples]
    changed = different_problems(pairs)
    if changed:
        what = "; ".join(f"layer {layer!r} is {b} in the baseline and {c} in the current run"
                         for layer, (b, c) in changed.items())
        raise ConvbenchError(f"{base.path} and {cur.path} measured different problems under "
                             f"the same name: {what}; rename the layer or compare runs of "
                             f"the same suite")
    only_base = [s for k, s in base.samples.items() if k not in cur.samples]
    only_cur = [s for k, s in cur.samples.items() if k not in base.samples]
    warnings = environment_warnings(base, cur) + different_cache_models(pairs)
    if only_base:
        warnings.append(f"{len(only_base)} variant(s) only in the baseline")
    if only_cur:
        warnings.append(f"{len(only_cur)} variant(s) only in the current run")
    if not pairs:
        raise ConvbenchError(f"{base.path} and {cur.path} have no variant in common; "
                             "nothing to compare")
    return Matching(pairs, only_base, only_cur, warnings)
