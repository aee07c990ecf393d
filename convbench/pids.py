"""Whether the process that left something behind (a scratch folder, a half-built results
directory, a temporary file) is still alive, so that only a dead owner's leftovers go."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)   # signal 0: the existence check, nothing is sent
    except ProcessLookupError:
        return False
    except PermissionError:
        return True       # someone else's live process
    return True
