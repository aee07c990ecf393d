"""The successive-halving schedule of ``convbench tune``: rounds, their timing, survivors.

Pure functions over counts and scores; :mod:`.session` measures what they say.

Round 0 measures every candidate of a layer group briefly; each round keeps the best third
(:data:`KEEP`, at least one) of the candidates that ran ok and measures them longer; the
round that starts with one or two candidates is the final one, at the suite's own timing
(its values and worker processes), so the tuned variant's figure is as good as a run's.
Thirds (Hyperband's eta = 3) because a third of a short round's ranking is safe: the
grid's best is far from the cut unless the short measurement is off by the gap between
the best and the third-best, which the longer rounds then correct.

A halving round k rounds before the final one times each value for ``min_time /
SHORTEN**k`` with 3 + its index values (at most the suite's) in one worker process:
three times fewer candidates, three times longer each, so every round costs about the
same and the final round, 1-2 candidates at full timing, the most.  For 30 candidates at
the default timing that is 30, 10, 4 and 2 candidates, a tenth of the time the full grid
takes at the suite's timing (:func:`cost`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from convbench.spec.sweep import TimingOptions

KEEP = 3          # a round keeps ceil(n / KEEP) of its n candidates that ran ok
SHORTEN = 3       # each round before the final is this much shorter than the next
FIRST_VALUES = 3  # values of round 0; one more per round, up to the suite's

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Round:
    """One round of a group's halving: its index, candidates and timing."""

    index: int
    candidates: int
    timing: TimingOptions
    final: bool


def survivors(n: int) -> int:
    """How many of ``n`` candidates that ran ok go on to the next round."""
    return max(1, math.ceil(n / KEEP))


def sizes(n: int) -> list[int]:
    """Candidates per round when none fails: n, ceil(n / 3), ... down to one or two."""
    counts = [n]
    while counts[-1] > 2:
        counts.append(survivors(counts[-1]))
    return counts


def round_timing(final: TimingOptions, index: int, rounds_after: int) -> TimingOptions:
    """The timing of round ``index`` with ``rounds_after`` rounds still to come."""
    if rounds_after == 0:
        return final
    return dataclasses.replace(final, min_time=final.min_time / SHORTEN ** rounds_after,
                               values=min(final.values, FIRST_VALUES + index), processes=1)


def rounds(n: int, final: TimingOptions, first_index: int = 0) -> list[Round]:
    """The rounds ahead of ``n`` candidates, numbered from ``first_index`` (a session
    recomputes them after each round: failures shrink the field faster)."""
    counts = sizes(n)
    return [Round(first_index + i, count,
                  round_timing(final, first_index + i, len(counts) - 1 - i),
                  final=i == len(counts) - 1)
            for i, count in enumerate(counts)]


def grid(n: int, final: TimingOptions, first_index: int = 0) -> list[Round]:
    """No halving: all ``n`` candidates in one final round at the suite's timing -- the
    exhaustive search (``tune --exhaustive``) the halving's choice is judged against."""
    return [Round(first_index, n, final, final=True)]


def select(scores: Mapping[K, float | None]) -> list[K]:
    """The candidates that go on: the best third (lowest scores, at least one) of those
    with a finite score; a candidate without one (it failed) is dropped.  Ties keep the
    order given."""
    ok = [k for k, v in scores.items() if v is not None and math.isfinite(v)]
    ranked = sorted(ok, key=lambda k: scores[k])  # type: ignore[arg-type, return-value]
    return ranked[:survivors(len(ranked))] if ranked else []


def cost(plan: Sequence[Round]) -> float:
    """Seconds of timed values the rounds take (candidates x min_time x values x
    processes): what halving saves over the full grid, calibration and compiles aside."""
    return sum(r.candidates * r.timing.min_time * r.timing.values * r.timing.processes
               for r in plan)


def measurements(plan: Sequence[Round]) -> int:
    """Candidate measurements (one candidate in one round) the rounds take."""
    return sum(r.candidates for r in plan)


def measurements_for(n: int) -> int:
    """Candidate measurements a halving of ``n`` candidates takes when none fails."""
    return sum(sizes(n))
