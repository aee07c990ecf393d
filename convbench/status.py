"""The status of a case: one vocabulary for verification, check, the results and compare.

Every case the plan owes ends in exactly one status, recorded with a reason when it is not
ok.  ``verify`` and ``check`` say ``ok`` for a correct answer, as the results do (format 1
of the results directory had ``pass`` in verification and ``ok`` in the table).
"""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """How a case ended.  A ``str`` subclass: a status compares equal to its value, so
    tables (pandas, Parquet, JSON) hold the plain word."""

    OK = "ok"            # verified against the reference (and timed, in a run)
    FAIL = "fail"        # a wrong answer: outside the reference's error bound
    ERROR = "error"      # the kernel raised, or its worker exited with an error
    CRASH = "crash"      # its worker died by a signal
    TIMEOUT = "timeout"  # killed after exceeding the time limit
    SKIP = "skip"        # the variant does not apply to the problem (reason says why)

    def __str__(self) -> str:
        return self.value

    @property
    def broken(self) -> bool:
        """The kernel ran and misbehaved: what a run's exit code and the gate count."""
        return self in BROKEN

    @property
    def acceptable(self) -> bool:
        """Nothing wrong: a correct answer, or a variant that does not apply."""
        return not self.broken

    @classmethod
    def of(cls, value: str) -> Status:
        """The status named by a table cell; a clear error for anything else."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown status {value!r}; expected one of "
                             f"{', '.join(s.value for s in cls)}") from None


BROKEN = frozenset({Status.FAIL, Status.ERROR, Status.CRASH, Status.TIMEOUT})
STATUSES = tuple(s.value for s in Status)
