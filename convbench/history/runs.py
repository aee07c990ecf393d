"""The runs under a history root: complete results directories, in run order, labelled.

A run is any complete results directory below the root (a farm's host directories
included).  Runs are ordered by their manifest's ``created`` time (UTC ISO text sorts in
time order), then by path.  A run's label is ``--label`` when the run was given one, else
the git commit of the checkout it ran from, else the directory's name.  Its host
fingerprint is the host name with a hash of the CPU model, core count and architecture,
so a host whose CPU changed starts new series.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convbench.errors import ConvbenchError
from convbench.results import schema


@dataclass(frozen=True)
class Run:
    path: Path
    created: str
    label: str
    fingerprint: str


def fingerprint(environment: dict[str, Any]) -> str:
    """``<host>-<hash of CPU model, cores, architecture>`` from environment.json."""
    facts = "|".join(str(environment.get(k, "")) for k in ("cpu_model", "cores", "arch"))
    return f"{environment.get('host', 'unknown')}-{hashlib.sha1(facts.encode()).hexdigest()[:8]}"


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def find_runs(root: Path) -> list[Run]:
    """Every complete results directory under ``root``, in run order.  Running, killed and
    interrupted runs are left out (their tables are not final)."""
    root = Path(root)
    if not root.is_dir():
        raise ConvbenchError(f"{root}: no such directory")
    runs = []
    for manifest_path in root.rglob(schema.MANIFEST):
        path = manifest_path.parent
        manifest = _json(manifest_path)
        if manifest.get("status") != "complete" or not (path / schema.RESULTS_PARQUET).is_file():
            continue
        environment = _json(path / schema.ENVIRONMENT_JSON)
        options = manifest.get("options") if isinstance(manifest.get("options"), dict) else {}
        label = options.get("label") or environment.get("git_commit") or path.name
        runs.append(Run(path, str(manifest.get("created", "")), str(label),
                        fingerprint(environment)))
    runs.sort(key=lambda r: (r.created, str(r.path)))
    if not runs:
        raise ConvbenchError(f"{root}: no complete results directory below it")
    return runs
