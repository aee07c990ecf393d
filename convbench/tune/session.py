"""A tuning session: every layer group's successive halving, measured the ordinary way.

Each round of a group is one :meth:`Runner.run_group` over the round's candidates with the
round's timing (:mod:`.schedule`): the same worker processes as ``convbench run`` --
verified first, then timed round-robin with the in-run reference, a crash or wrong answer
costing only its case.  Every row the runner produces becomes a tuning record, appended
to the records file as it arrives (:mod:`.records`); failed candidates are recorded with
their reason and leave the halving.

``--resume`` reads the file first: a group whose final round is recorded is skipped; a
group tuned part way restarts its halving from round 0, reusing each round's records
(round k of the candidates the records' round k-1 kept) and measuring only the
candidates a round lacks -- so a kill mid-round costs the round's missing candidates,
nothing already written.

``--budget``: a round's candidates are measured in worker groups of at most :data:`CHUNK`,
and the elapsed time is checked before each; once it is spent nothing more starts, what is
recorded stays, and the outcome lists the groups left (``--resume`` measures what their
round lacks).  Checking only between rounds let ``--budget 30`` run 7.5 minutes: round 0 of
ResNet-18's conv1 had 211 candidates, most of them nchwc variants that each compile.

A round ranks by time (below: which), also when it is split over several workers.  It used to rank a
split round by the in-run reference ratio (to absorb drift between the workers), but the
reference itself was not stable across workers (OpenBLAS's slow state, settled at worker
start since: :mod:`convbench.harness.threads`): tuning ResNet-50 at 1 thread on the AMD host,
the in-run sgemm took ~0.9 ms in the worker of the first 32 candidates and ~3.2 ms in the
nchwc workers after it, so the ratio favoured nchwc 3.5x, and round 0 dropped the grid's best
(im2col with BLAS, the lowest round-0 median) on 9 of 23 layers (regret up to 53% against
``tune --exhaustive``).  Ranked by the same round-0 medians, the grid's best survives round 0
on all 23; with OpenBLAS settled too, the halving's pick came within 3% of the grid's best
on 18 of 23 layers at 1 thread (regret max 6.2%; 14 of 23 and 52.6% before) and at 2
threads (max 16.7%).  The ratio is still recorded.

Rounds before the final rank by each candidate's least value, not its median: a short
round has 3-5 values of ~1 ms, and at 2 threads on 2 CPUs anything else that runs stalls
one of the kernel's threads, which only ever adds time.  Tuning MobileNet V2 at 2 threads
(warm, Zen 3 host), round 0 of Conv_1 gave an nchwc variant values of 286, 1025 and 1274 us
(two stalled): by median it ranked 10th of 18 and was dropped; its least value was the
round's best.  In a later run at the suite's timing that variant took 270 us beside ONNX
Runtime's 266; the pick the median left ran 0.77x the fastest library in that session's
run (0.94x in two reruns).
Where no value stalls the two rank alike: on 7 MobileNet V2 layers at 2 threads, scored
against ``tune --exhaustive`` on the same records, round 0's kept third held the grid's best
(or one within 3.4%) by both rules, Spearman's rho with the grid's medians 0.75 for both.
The final round, at the suite's timing, picks by median.

``--transfer`` / ``--prior FILE`` cut round 0 to the candidates :mod:`.prior` ranks best
from other layer groups' round 0s (this session's earlier groups and the prior files),
so that the group's whole halving takes at most a fifth of its candidate count (plus the
best-ranked NCHW, NHWC and blocked candidates the top lacks, for the global plan, and the
best-ranked of each family known only from layers 2 octaves away or more, and of each of
its tile shapes and other categorical knob values); a group
with no evidence of its kernel size runs the full halving and becomes evidence.

``--exhaustive`` measures every candidate once at the suite's timing (one final round,
:func:`.schedule.grid`): the full grid's best, which the halving is meant to find with a
fraction of the measuring, so that claim can be checked (``tools/tune_vs_grid.py``).

``--confirm PLAN`` runs one round per group at the suite's timing over the conv variants
the plan and its alternatives use whose last record is from a short round, and their
neighbours one tile shape, order or bool away, numbered as the group's final round
(:mod:`.confirm`); groups without one are left alone.

``--cache auto`` (the default) tunes each thread count in the cache state a pass of the
suite's network gives its layers (:mod:`.cache_choice`).
"""

from __future__ import annotations

import dataclasses
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convbench.errors import ConvbenchError
from convbench.harness.options import RunOptions
from convbench.harness.plan import Case, Plan
from convbench.harness.runner import Runner
from convbench.kernels import registry
from convbench.results.store import now_utc
from convbench.spec.problem import ConvProblem
from convbench.tune import cache_choice, confirm, prior, records, schedule, space
from convbench.tune.records import GroupKey
from convbench.tune.space import group_label

CHUNK = 32   # candidates measured per worker group inside a round (the budget's grain)


@dataclass
class GroupOutcome:
    """What tuning did for one layer group."""

    label: str
    candidates: int
    not_applicable: int = 0
    measured: int = 0          # candidate measurements taken in this session
    reused: int = 0            # taken from the records (--resume)
    rounds: int = 0
    field: int | None = None   # round 0's candidates when the transfer prior chose them
    best: Mapping[str, Any] | None = None
    already_tuned: bool = False
    finished: bool = False

    def line(self) -> str:
        if self.already_tuned:
            head = f"{self.label}: already tuned"
        else:
            reused = f" (+{self.reused} from the records)" if self.reused else ""
            head = (f"{self.label}: {self.candidates} candidates"
                    + (f" ({self.not_applicable} not applicable)" if self.not_applicable
                       else "")
                    + (f", the prior's best {self.field} measured" if self.field is not None
                       else "")
                    + f", {self.measured} measurements{reused} in {self.rounds} rounds")
        if not self.finished and not self.already_tuned:
            return f"{head}; not finished"
        if self.best is None:
            return f"{head}; no candidate ran ok"
        return f"{head}; best {self.best['variant']} {self.best['median_s'] * 1e6:.1f} us"


@dataclass
class TuneOutcome:
    path: Path
    groups: list[GroupOutcome] = field(default_factory=list)
    left: list[str] = field(default_factory=list)   # groups not (fully) tuned
    budget_spent: bool = False
    interrupted: bool = False


class _RecordSink:
    """Stands in for the results store a :class:`Runner` writes to: each row it adds is
    handed to the session (a tuning record), nothing else is kept."""

    def __init__(self, environment: dict[str, Any], on_row: Callable[[dict[str, Any]], None]):
        self.environment = environment
        self.on_row = on_row
        self.manifest: dict[str, Any] = {}
        self.done: set[str] = set()

    def add(self, row: dict[str, Any], values: list[dict[str, Any]] | None = None) -> None:
        self.on_row(row)

    def update(self, case_id: str, figures: Mapping[str, Any]) -> None:
        pass

    def save_environment(self) -> None:
        pass


class Session:
    """Tunes a plan's layer groups into a records file."""

    def __init__(self, plan: Plan, options: RunOptions, path: Path, host: str,
                 environment: dict[str, Any], resume: bool = False,
                 budget_s: float | None = None, quiet: bool = False,
                 say: Callable[[str], None] | None = None, chunk: int = CHUNK,
                 exhaustive: bool = False, transfer: bool = False,
                 prior_records: Sequence[Mapping[str, Any]] = (),
                 confirm_variants: Mapping[str, set[str]] | None = None):
        self.plan = plan
        # --confirm: layer -> the plan's variants to measure at the final round's timing
        self.confirm_variants = confirm_variants
        self.transfer = transfer
        self.prior_records = list(prior_records)
        confirming = confirm_variants is not None   # one round, at the final's timing
        self.schedule = schedule.grid if exhaustive or confirming else schedule.rounds
        self.chunk = chunk
        self.options = options
        self.path = path
        self.host = host
        self.budget_s = budget_s
        self.quiet = quiet
        self.say = say or _say
        resume = resume or confirming   # it adds to tuned records
        self.resume = resume
        self.known = records.read(path) if resume and path.exists() else []
        self.sink = _RecordSink(environment, self.on_row)
        self.runner = Runner(plan, self.sink, options, quiet=True)  # type: ignore[arg-type]
        self.started = time.monotonic()
        self.round: schedule.Round | None = None
        self.got: dict[str, Mapping[str, Any]] = {}

    def key(self, case: Case) -> GroupKey:
        return GroupKey.of_case(case, self.host)

    def out_of_budget(self) -> bool:
        return self.budget_s is not None and time.monotonic() - self.started >= self.budget_s

    def on_row(self, row: dict[str, Any]) -> None:
        assert self.round is not None
        record = records.from_row(row, host=self.host, round_index=self.round.index,
                                  final=self.round.final, min_time=self.round.timing.min_time,
                                  time=now_utc())
        self.writer.write(record)
        self.known.append(record)
        self.got[record["variant"]] = record

    def run(self) -> TuneOutcome:
        from tqdm import tqdm

        outcome = TuneOutcome(self.path)
        work = []
        for group in self.plan.groups():
            key = self.key(group[0])
            if self.confirm_variants is not None:
                found = self.to_confirm(group, key)
                if found.cases:
                    work.append((group, found))
                continue
            if self.resume and records.finished(self.known, key):
                outcome.groups.append(GroupOutcome(
                    group_label(group[0]), 0, already_tuned=True, finished=True,
                    best=records.best(self.known, key)))
                self.say(outcome.groups[-1].line())
                continue
            found = space.candidates(group, self.options.only, self.options.exclude)
            if found.cases or found.not_applicable:   # else a variant glob left it nothing
                work.append((group, found))
        if self.confirm_variants is not None and not work:
            self.say("every conv variant of the plan has a final-round record: nothing "
                     "to confirm")
            return outcome
        if not work and not outcome.groups:
            raise ConvbenchError(f"suite {self.plan.suite.name}: the filters leave no "
                                 "candidate to tune")
        total = sum(schedule.measurements(self.schedule(len(c.cases), self.plan.timing))
                    for _, c in work if c.cases)
        bar = tqdm(total=total, file=sys.stderr, disable=self.quiet, unit="measurement",
                   dynamic_ncols=True)
        self.runner.bar = bar

        def on_term(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGTERM, on_term)
        self.writer = records.Writer(self.path)
        try:
            with self.runner.measuring():
                for i, (group, found) in enumerate(work):
                    result = self.tune_group(group, found, bar)
                    if result.rounds or result.finished:   # not one the budget never began
                        outcome.groups.append(result)
                        self.say(result.line())
                    if not result.finished:
                        outcome.budget_spent = True
                        outcome.left = [group_label(g[0]) for g, _ in work[i:]]
                        break
        except KeyboardInterrupt:
            outcome.interrupted = True
            done = {g.label for g in outcome.groups if g.finished}
            outcome.left = [group_label(g[0]) for g, _ in work
                            if group_label(g[0]) not in done]
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.writer.close()
            bar.close()
        return outcome

    def tune_group(self, group: Sequence[Case], found: space.Candidates,
                   bar: Any) -> GroupOutcome:
        first = group[0]
        result = GroupOutcome(group_label(first), len(found.cases), found.not_applicable)
        key = self.key(first)
        earlier = records.of_group(self.known, key) if self.resume else []
        alive = list(found.cases)
        if self.transfer:
            timing = self.plan.timing
            alive = self.transfer_field(first, alive, key)
            if len(alive) < len(found.cases):
                result.field = len(alive)
                bar.total -= (schedule.measurements(self.schedule(len(found.cases), timing))
                              - schedule.measurements(self.schedule(len(alive), timing)))
                bar.refresh()
        index = 0
        if self.confirm_variants is not None:   # recorded as the group's final round
            index = confirm.final_round(self.known, key) or 0
        while alive:
            self.round = self.schedule(len(alive), self.plan.timing, index)[0]
            if self.out_of_budget():
                return result
            # this round's records from an earlier session (later lines win: measured again)
            have = {r["variant"]: r for r in earlier if r["round"] == index}
            todo = [c for c in alive if c.variant.id not in have]
            bar.update(len(alive) - len(todo))
            self.got = dict(have)
            self.runner.plan = dataclasses.replace(self.plan, timing=self.round.timing)
            result.reused += len(alive) - len(todo)
            for start in range(0, len(todo), self.chunk):
                if start and self.out_of_budget():
                    return result          # a partial round: --resume measures the rest
                self.runner.run_group(todo[start:start + self.chunk])
                result.measured += len(todo[start:start + self.chunk])
            result.rounds += 1
            if self.round.final:
                break
            scores = _scores(alive, self.got)
            keep = set(schedule.select(scores))
            alive = [c for c in alive if c.variant.id in keep]
            index += 1
        result.finished = True
        result.best = records.best(self.known, key)
        return result

    def to_confirm(self, group: Sequence[Case], key: GroupKey) -> space.Candidates:
        """``--confirm``: the group's candidates the plan runs whose last record is from a
        short round, and their categorical neighbours (:mod:`.confirm`); none where the
        group has no final round yet."""
        if confirm.final_round(self.known, key) is None:
            return space.Candidates((), 0)
        found = space.candidates(group, self.options.only, self.options.exclude)
        wanted = confirm.to_measure(self.known, key,
                                    self.confirm_variants.get(group[0].layer, ()),
                                    [c.variant for c in found.cases])
        return space.Candidates(tuple(c for c in found.cases if c.variant.id in wanted), 0)

    def transfer_field(self, first: Case, alive: list[Case], key: GroupKey) -> list[Case]:
        """Round 0's candidates under the transfer prior (:mod:`.prior`): the best-ranked
        few, in their own order, from the round 0s of other groups at the same thread count,
        width and cache mode (this session's and ``--prior``'s); all of them without any."""
        def comparable(r: Mapping[str, Any]) -> bool:
            return ((r["threads"], r["vector_width"], r["cache"])
                    == (key.threads, key.vector_width, key.cache)
                    and GroupKey.of(r) != key)

        known = prior.evidence(r for r in [*self.prior_records, *self.known] if comparable(r))
        configs = [prior.Config.of(c.variant.algorithm, c.variant.layout,
                                   dict(c.variant.params)) for c in alive]
        ranked = prior.rank(first.problem, configs, known, work_of)
        if ranked is None:
            return alive
        algorithms = registry.algorithms()
        layouts = [algorithms[c.variant.algorithm].activation_layouts(c.variant.layout,
                                                                      c.variant.param_dict)
                   for c in alive]
        keep = set(prior.layout_cover(ranked.order, layouts, prior.field_size(len(alive)),
                                      ranked.exploring, self.neighbour_layouts(comparable),
                                      ranked.unsure))
        return [c for i, c in enumerate(alive) if i in keep]

    def neighbour_layouts(self, comparable: Callable[[Mapping[str, Any]], bool]) -> set[str]:
        """The layouts the tuned variants of this session's other finished groups (those
        ``comparable`` keeps) read or write: a layer covering them can join its
        neighbours' layout without a transform (:func:`.prior.layout_cover`)."""
        algorithms = registry.algorithms()
        out: set[str] = set()
        for key in {GroupKey.of(r) for r in self.known if r["final"] and comparable(r)}:
            tuned = records.best(self.known, key)
            if tuned is not None and tuned["algorithm"] in algorithms:
                out.update(algorithms[tuned["algorithm"]].activation_layouts(
                    tuned["layout"], tuned["params"]))
        return out


def work_of(config: prior.Config, problem: ConvProblem) -> float:
    """The prior's :data:`.prior.Work`: the algorithm's ``work_ratio`` (1 without one)."""
    alg = registry.algorithms().get(config.algorithm)
    if alg is None or alg.work_ratio is None:
        return 1.0
    return alg.work_ratio(problem, dict(config.params))


def _say(line: str) -> None:
    """A line on stdout that leaves the progress bar (stderr) intact."""
    from tqdm import tqdm

    tqdm.write(line, file=sys.stdout)


def _scores(alive: Sequence[Case], got: Mapping[str, Mapping[str, Any]]
            ) -> dict[str, float | None]:
    """A short round's score per candidate (:func:`.records.short_round_score`; None when
    it left no record)."""
    return {case.variant.id: records.short_round_score(got.get(case.variant.id) or {})
            for case in alive}


def tune_suite(suite_path: str | Path, options: RunOptions, records_path: Path | None = None,
               resume: bool = False, budget_s: float | None = None, quiet: bool = False,
               measure_machine: bool | None = None, chunk: int = CHUNK,
               exhaustive: bool = False, transfer: bool = False,
               prior_paths: Sequence[Path] = (), cache_auto: bool = False,
               confirm_plan: Path | None = None) -> TuneOutcome:
    """Tune a suite's plan (``options``: its overrides and filters) into a records file.

    Without ``resume`` the file must not hold records yet: appending a second tuning to
    the first would mix their rounds (``records.best`` takes each variant's last one).
    ``transfer``: round 0 measures only what :mod:`.prior` ranks best from other groups'
    records (this session's and those of ``prior_paths``, which imply it).
    ``cache_auto``: each thread count in the mode :mod:`.cache_choice` chooses (said on
    stderr), in place of ``options.cache``.  ``confirm_plan``: measure, at the suite's
    timing, the conv variants of that plan (and of its alternatives) whose records come
    from short rounds, into the records the plan was made from (:mod:`.confirm`); the
    plan's thread count and cache mode replace ``options``'."""
    from convbench.harness import affinity
    from convbench.harness.options import make_plan
    from convbench.machine.first_use import limits_for_run
    from convbench.spec.suite import load_suite
    from convbench.tune.apply import this_host

    suite = load_suite(suite_path)
    confirm_variants = None
    if confirm_plan is not None:
        if not records_path or not Path(records_path).is_file():
            raise ConvbenchError("--confirm adds to the records the plan was made from: "
                                 "give them with --records")
        threads, cache, confirm_variants = confirm.plan_variants(confirm_plan)
        options = dataclasses.replace(options, threads=(threads,), cache=(cache,))
        cache_auto = False
    tell = (lambda line: None) if quiet else (lambda line: print(line, file=sys.stderr))
    # the plan first: a bad filter or thread count is refused before any machine measuring;
    # variant globs filter the tuner's candidates, not the sweep's grid (space.sweep_filters)
    only, exclude = space.sweep_filters(options.only, options.exclude)
    plan = make_plan(suite, dataclasses.replace(options, only=only, exclude=exclude))
    thread_counts = {c.threads for c in plan.cases}
    # the limits give `auto` widths the same compile width a run uses (runner.compile_width)
    limits = limits_for_run(thread_counts, measure_machine, tell)
    if cache_auto:
        modes: dict[int, str] = {}
        for threads in sorted(thread_counts):
            choice = cache_choice.choose(suite, threads)
            modes[threads] = choice.mode
            # said even with --quiet (which only drops the bar): the records mean nothing
            # without the cache state they were measured in
            print(f"cache mode at {threads} thread(s): {choice.mode} ({choice.reason})",
                  file=sys.stderr)
        options = dataclasses.replace(options, cache=tuple(sorted(set(modes.values()))))
        plan = make_plan(suite, dataclasses.replace(options, only=only, exclude=exclude))
        plan = dataclasses.replace(plan, cases=tuple(
            c for c in plan.cases if c.cache == modes[c.threads]))
    options = dataclasses.replace(options, cpus=affinity.resolve_pool(options.cpus))
    host = this_host()
    path = Path(records_path) if records_path else records.default_path(suite.name, host)
    if not resume and confirm_plan is None and path.exists() and path.stat().st_size > 0:
        raise ConvbenchError(f"{path}: holds tuning records already; --resume continues "
                             f"them (or give another --records)")
    prior_records = [r for p in prior_paths for r in records.read(p)]
    session = Session(plan, options, path, host, {"machine": limits}, resume=resume,
                      budget_s=budget_s, quiet=quiet, chunk=chunk, exhaustive=exhaustive,
                      transfer=transfer or bool(prior_paths), prior_records=prior_records,
                      confirm_variants=confirm_variants)
    return session.run()
