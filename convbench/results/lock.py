"""One writer per results directory: an advisory ``flock`` on ``.lock`` inside it.

Two runs, or two resumes, writing one directory would interleave journals and both
believe they own the cases.  The lock is held for the whole run by the process writing
the directory; the kernel drops it when that process dies, however it dies, so a killed
run never leaves a stale lock behind (the pid in the file is only there to name the
holder in the error message).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from convbench.errors import ConvbenchError

LOCK = ".lock"


class DirectoryLock:
    """An exclusive lock on ``directory``, taken at once or refused with the holder's pid."""

    def __init__(self, directory: Path):
        self.path = directory / LOCK
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self.fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(self.fd)
            raise ConvbenchError(f"{directory}: another convbench process (pid {holder}) is "
                                 f"writing this results directory; wait for it to finish "
                                 f"or stop it") from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)   # closing the last descriptor drops the flock
            self.fd = -1
