"""The gate: every variant's verdicts, and which of them fail the build.

:func:`compare_runs` loads and matches both sides, decides each pair (timing and, where
both runs carry them, instruction counts) and returns a :class:`Comparison`;
:meth:`Comparison.regressions` says what fails under ``--fail-on``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from convbench import stats
from convbench.compare.decision import (
    DEFAULT_ALPHA,
    FASTER,
    NO_CHANGE,
    SLOWER,
    InstructionDecision,
    TimeDecision,
    decide_instructions,
    decide_time,
)
from convbench.compare.match import Sample, load_pair, match
from convbench.compare.thresholds import Thresholds
from convbench.status import Status

FAIL_ON = ("time", "instructions", "either")

# Per-variant states beyond the statistical verdicts.
BROKEN = "broken"                     # ok in the baseline, fails/errors now: always fails
ONLY_BASELINE = "only in baseline"
ONLY_CURRENT = "only in current"
NOT_MEASURED = "not measured"         # not ok in the baseline (nothing to compare against)


@dataclass
class Confirmation:
    """The re-measurement of a variant first flagged slower (``--confirm``)."""

    confirmed: bool
    decision: TimeDecision


@dataclass(eq=False)
class VariantResult:
    """Everything the reports say about one variant."""

    baseline: Sample | None
    current: Sample | None
    state: str                                   # a verdict (compare.decision), or one of the above
    time: TimeDecision | None = None
    instructions: InstructionDecision | None = None
    confirmation: Confirmation | None = None

    @property
    def sample(self) -> Sample:
        return self.current if self.current is not None else self.baseline  # type: ignore

    @property
    def time_verdict(self) -> str | None:
        """The timing verdict after confirmation (a dropped flag reads "no significant change")."""
        if self.time is None:
            return None
        if self.confirmation is not None and not self.confirmation.confirmed:
            return NO_CHANGE
        return self.time.verdict

    @property
    def code_changed(self) -> bool | None:
        """Whether the kernel's code differs between the runs (None: a side lacks the
        version, e.g. a results directory of format 1 or a one-sided variant)."""
        if self.baseline is None or self.current is None:
            return None
        versions = self.baseline.kernel_version, self.current.kernel_version
        return None if not all(versions) else versions[0] != versions[1]

    @property
    def vector_code_changed(self) -> bool | None:
        """Whether the static profile of the code differs between the runs (packed FMAs by
        width, scalar FP, the verdict): a numba or LLVM upgrade that stopped vectorising a
        loop shows here with the kernel's own source unchanged.  None: a side lacks it
        (runs before the asm_* columns, a library baseline, pyperf files)."""
        if self.baseline is None or self.current is None:
            return None
        profiles = self.baseline.vector_code, self.current.vector_code
        return None if not all(profiles) else profiles[0] != profiles[1]

    @property
    def instruction_verdict(self) -> str | None:
        return self.instructions.verdict if self.instructions else None

    def fails(self, fail_on: str) -> bool:
        """Whether this variant fails the build under ``fail_on``."""
        if self.state == BROKEN:
            return True
        time_bad = self.time_verdict == SLOWER
        instr_bad = self.instruction_verdict == SLOWER
        return {"time": time_bad, "instructions": instr_bad,
                "either": time_bad or instr_bad}[fail_on]

    def severity(self, fail_on: str) -> tuple[int, float]:
        """Sort key, most severe first: broken, failing, slower, one-sided, unchanged, faster."""
        ratio = max(self.time.ratio if self.time and self.time.ratio == self.time.ratio
                    else 0.0, self.instructions.ratio if self.instructions else 0.0)
        if self.state == BROKEN:
            rank = 0
        elif self.fails(fail_on):
            rank = 1
        elif SLOWER in (self.time and self.time.verdict, self.instruction_verdict):
            rank = 2
        elif self.state in (ONLY_BASELINE, ONLY_CURRENT, NOT_MEASURED):
            rank = 3
        elif FASTER in (self.time_verdict, self.instruction_verdict):
            rank = 5
        else:
            rank = 4
        return rank, -ratio


@dataclass
class Comparison:
    baseline: Path
    current: Path
    kind: str
    results: list[VariantResult]
    warnings: list[str]
    alpha: float
    thresholds: Thresholds
    instruction_column: str | None
    confirmed_run: Path | None = None
    notes: list[str] = field(default_factory=list)

    def regressions(self, fail_on: str) -> list[VariantResult]:
        return [r for r in self.results if r.fails(fail_on)]

    def sorted(self, fail_on: str) -> list[VariantResult]:
        return sorted(self.results, key=lambda r: r.severity(fail_on))

    def counts(self) -> dict[str, int]:
        """How many variants ended in each timing verdict / state."""
        out: dict[str, int] = {}
        for r in self.results:
            key = r.time_verdict if r.time is not None else r.state
            out[key] = out.get(key, 0) + 1
        return out


def decide_pair(base: Sample, cur: Sample, *, thresholds: Thresholds, alpha: float,
                instruction_column: str | None, use_reference: bool = True,
                resamples: int = stats.BOOTSTRAP_RESAMPLES) -> VariantResult:
    """Verdicts for one matched variant."""
    if not base.ok:
        return VariantResult(base, cur, NOT_MEASURED)
    if not cur.ok:
        state = BROKEN if Status.of(cur.status).broken else NOT_MEASURED
        return VariantResult(base, cur, state)
    normalised = use_reference and base.normalised is not None and cur.normalised is not None
    time = decide_time(base.normalised if normalised else base.values,
                       cur.normalised if normalised else cur.values,
                       threshold=thresholds.for_variant(cur.suite, cur.layer, cur.variant),
                       alpha=alpha, basis="ref-normalised" if normalised else "raw",
                       resamples=resamples, baseline_processes=base.processes,
                       current_processes=cur.processes)
    instructions = None
    if instruction_column:
        instructions = decide_instructions(base.instructions, cur.instructions,
                                           column=instruction_column,
                                           threshold=thresholds.instructions)
    return VariantResult(base, cur, time.verdict, time, instructions)


def compare_runs(baseline: str | Path, current: str | Path, *,
                 thresholds: Thresholds | None = None, alpha: float = DEFAULT_ALPHA,
                 instruction_column: str | None = None, use_reference: bool = True,
                 ) -> Comparison:
    """Compare two results directories (or two pyperf JSON files) variant by variant."""
    thresholds = thresholds or Thresholds()
    base_side, cur_side = load_pair(baseline, current, instruction_column)
    matching = match(base_side, cur_side)
    column = base_side.instruction_column
    results = [decide_pair(b, c, thresholds=thresholds, alpha=alpha,
                           instruction_column=column, use_reference=use_reference)
               for b, c in matching.pairs]
    results += [VariantResult(s, None, ONLY_BASELINE) for s in matching.only_baseline]
    results += [VariantResult(None, s, ONLY_CURRENT) for s in matching.only_current]
    comparison = Comparison(Path(baseline), Path(current), base_side.kind, results,
                            matching.warnings, alpha, thresholds, column)
    if column is None and base_side.kind == "results":
        comparison.notes.append("no simulated instruction counts in both runs: "
                                "deterministic mode off")
    comparison.notes += [f"{r.sample.case_id}: vector code changed: "
                         f"{r.baseline.vector_code} -> {r.current.vector_code}"
                         for r in results if r.vector_code_changed]
    return comparison


def with_confirmation(result: VariantResult, decision: TimeDecision) -> VariantResult:
    """The result with its re-measured verdict attached."""
    return replace(result, confirmation=Confirmation(decision.verdict == SLOWER,
                                                     decision))

