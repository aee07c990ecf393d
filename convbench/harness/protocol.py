"""What the runner and a worker process say to each other: the job and the messages.

The runner writes a :class:`Job` (JSON file) and starts a worker on it; the worker answers
on a pipe, one JSON object per line, each tagged by ``type``:

    hello     Hello     settings as applied at start (threads, CPUs pinned to, vector width,
                        libraries)
    enter     Enter     which case runs now and in which phase (the runner's timeout clock)
    settings  Settings  figures known only after a kernel ran (threading layer)
    result    Result    a finished case: status, reason, figures, raw values
    counts    Counts    a counting pass's figures for a case recorded earlier
    restart   Restart   the worker compiled kernels and measured nothing: run the group
                        again in a fresh worker, which loads them (harness/compiled.py)

Every message is a small dataclass; :func:`decode` turns a line back into one, so the
runner never reads a bare dict.  Both ends import this module and nothing else of each
other.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from convbench.identity import WARM
from convbench.status import Status


@dataclass(frozen=True)
class CaseSpec:
    """One case of a job, as much as the worker needs to build its variant."""

    case_id: str
    algorithm: str
    layout: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Job:
    """One worker's work: the cases of one layer at one thread count and vector width."""

    threads: int
    vector_width: str
    problem: dict[str, Any]               # ConvProblem fields (shape and name)
    cases: tuple[CaseSpec, ...]
    timing: dict[str, Any]                # TimingOptions as a dict
    counters: str = "none"
    count_only: bool = False              # a separate counting pass (simulated counters)
    seed: int = 0
    cache: str = WARM                     # spec.suite.CACHE_MODES
    cold_bytes: int | None = None         # eviction pile size; None: from the host's LLC
    pass_bytes: int | None = None         # the network's conv weights per pass (coldcache)
    cpus: tuple[int, ...] = ()            # pin to these CPUs (harness.affinity); (): no pin
    restart_if_compiled: bool = True      # compiled code is not what later runs measure
    process: int = 0                      # which of the group's worker processes this is
    compile_width: str = ""               # the width compiled for; "": LLVM's default
    memory_limit: int | None = None       # RLIMIT_DATA bytes (harness.memory); None: none
    compile_only: bool = False            # verify (compiling), time nothing (harness.precompile)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Job:
        data = json.loads(text)
        data["cases"] = tuple(CaseSpec(**c) for c in data["cases"])
        data["cpus"] = tuple(data.get("cpus", ()))
        return cls(**data)


@dataclass(frozen=True)
class Message:
    """Base of the worker's messages; ``kind`` is the wire tag."""

    kind: ClassVar[str] = ""

    def encode(self) -> str:
        return json.dumps({"type": self.kind, **dataclasses.asdict(self)})


@dataclass(frozen=True)
class Hello(Message):
    kind: ClassVar[str] = "hello"
    settings: dict[str, Any]


@dataclass(frozen=True)
class Settings(Message):
    kind: ClassVar[str] = "settings"
    settings: dict[str, Any]


@dataclass(frozen=True)
class Enter(Message):
    """``case`` None: work charged to no case (start-up, the reference's calibration)."""

    kind: ClassVar[str] = "enter"
    case: str | None
    phase: str            # verify | calibrate | time | count


@dataclass(frozen=True)
class Result(Message):
    kind: ClassVar[str] = "result"
    case: str
    status: Status
    reason: str
    figures: dict[str, Any]               # verification, one-time costs, counters
    values: list[float] = field(default_factory=list)       # seconds per call, per round
    ref_values: list[float] = field(default_factory=list)   # the reference's, same rounds
    loops: int = 0                        # calls per value

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status.of(self.status))


@dataclass(frozen=True)
class Counts(Message):
    kind: ClassVar[str] = "counts"
    case: str
    figures: dict[str, Any]


@dataclass(frozen=True)
class Restart(Message):
    """The worker compiled ``compiled`` (cached numba functions) and stops before measuring."""

    kind: ClassVar[str] = "restart"
    compiled: list[str]


# A Settings key: the worker compiled a kernel (instead of loading it from numba's cache)
NUMBA_COMPILED = "numba_compiled"

MESSAGES: dict[str, type[Message]] = {m.kind: m for m in (Hello, Settings, Enter, Result,
                                                          Counts, Restart)}


class ProtocolError(ValueError):
    """A line from a worker that is not a message of this protocol."""


def decode(line: bytes | str) -> Message:
    """The message on one line from a worker."""
    try:
        data = json.loads(line)
        kind = data.pop("type")
        return MESSAGES[kind](**data)
    except (ValueError, KeyError, TypeError) as exc:
        raise ProtocolError(f"unreadable worker message {line[:200]!r}: {exc}") from None
