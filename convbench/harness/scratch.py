"""The run's scratch directory: worker job files and logs, simulated-counter dumps.

Everything a run puts in the system's temporary directory lives under one
``convbench-run-XXXXXXXX`` folder that names its owner's pid.  The run removes it when it
stops; a run that was killed cannot, so every run first removes the folders of owners
that are no longer alive.  (Its path has a fixed length, like ``mkdtemp``'s own: what a
simulated worker reads before its region must not vary between runs.)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from convbench.pids import alive

PREFIX = "convbench-run-"
OWNER = "owner.pid"


def remove_stale(root: Path | None = None) -> list[Path]:
    """Scratch folders whose owner died; removed, and returned."""
    root = Path(root or tempfile.gettempdir())
    removed = []
    for folder in root.glob(f"{PREFIX}*"):
        try:
            pid = int((folder / OWNER).read_text())
        except (OSError, ValueError):
            continue   # being created right now, or not ours
        if not alive(pid):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


class Scratch:
    """This run's scratch folder: ``new(prefix)`` makes a subfolder for one worker."""

    def __init__(self) -> None:
        remove_stale()
        self.path = Path(tempfile.mkdtemp(prefix=PREFIX))
        (self.path / OWNER).write_text(f"{os.getpid()}\n")

    def new(self, prefix: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.path))

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
