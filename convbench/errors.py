"""The one user-facing error type: caught once in the CLI, printed without traceback, exit 2."""

from __future__ import annotations


class ConvbenchError(Exception):
    """Bad input from the user (a suite, a descriptor, a results directory, an option).

    Anything else that escapes is a bug and keeps its traceback.
    """

    exit_code = 2


class SuiteError(ConvbenchError):
    """A suite file that cannot be used; the message names file, layer, field and expectation."""
