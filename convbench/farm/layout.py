"""The farm directory: ``farm.json``, the suite, and one ordinary results directory per host.

::

    farm.json          format, mode ("every-host" | "shard"), scheduler, suite, created,
                       status ("running" | "complete" | "incomplete" | "interrupted"),
                       planned case ids, hosts (every-host: the hosts that run the whole
                       plan), the run options, every finished task (host, dask worker,
                       group, cases, wall-clock start and end), lost groups (host, group,
                       cases, reason; --resume runs them), and the workers that left the
                       scheduler during the run (departed: host, UTC time)
    suite.yaml         a copy of the suite
    hosts/<host>/      a results directory (convbench.results.schema) of the cases that host
                       ran: every-host, the whole plan; shard, the groups it was given

``report`` and ``compare`` take the farm directory and read its hosts side by side.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from convbench.errors import ConvbenchError

FARM_JSON = "farm.json"
HOSTS = "hosts"
FORMAT = 1
MODES = ("every-host", "shard")


def is_farm(path: Path) -> bool:
    return (Path(path) / FARM_JSON).is_file()


def host_dir_name(label: str) -> str:
    """A host's label as a directory name: anything outside ``A-Za-z0-9_.-`` becomes _."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", label).strip(".") or "host"


def host_dirs(path: Path) -> dict[str, Path]:
    """The farm's host directories by name, sorted."""
    root = Path(path) / HOSTS
    if not root.is_dir():
        return {}
    return {p.name: p for p in sorted(root.iterdir()) if p.is_dir()}


def read(path: Path) -> dict[str, Any]:
    """farm.json of ``path``, checked enough to be trusted by the farm's own code."""
    from convbench.results.load import read_json

    def check(data: Any) -> dict[str, Any]:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a farm manifest of format {FORMAT}")
        if data.get("mode") not in MODES:
            raise ValueError(f"mode {data.get('mode')!r} is not one of {', '.join(MODES)}")
        for name, kind in (("planned", list), ("hosts", list), ("options", dict),
                           ("tasks", list), ("lost", list)):
            if not isinstance(data.get(name), kind):
                raise ValueError(f"{name} is not a {kind.__name__}")
        return data

    return read_json(Path(path) / FARM_JSON, check)


def write(path: Path, data: dict[str, Any]) -> None:
    from convbench.results.store import write_json

    try:
        write_json(Path(path) / FARM_JSON, data)
    except OSError as exc:
        raise ConvbenchError(f"{path}/{FARM_JSON}: cannot write: "
                             f"{exc.strerror or exc}") from None


def expand(paths: list[Path]) -> list[tuple[str, Path]]:
    """(label, results directory) for each path: a farm directory stands for its hosts,
    labelled ``<farm>/<host>``; any other directory for itself."""
    out: list[tuple[str, Path]] = []
    for path in map(Path, paths):
        if is_farm(path):
            hosts = host_dirs(path)
            if not hosts:
                raise ConvbenchError(f"{path}: a farm run with no host results yet")
            out += [(f"{path.name}/{name}", host) for name, host in hosts.items()]
        else:
            out.append((path.name, path))
    return out


def pairs(baseline: str | Path, current: Path) -> list[tuple[str, str | Path, Path]]:
    """What ``compare`` gates when a side is a farm: (host, baseline, current) per host.

    Two farms pair their hosts by name (a host on one side only is refused); a farm
    against one results directory compares that directory with each host.  Neither a
    farm: the one pair, labelled ""."""
    base_hosts = host_dirs(Path(baseline)) if is_farm(Path(baseline)) else None
    cur_hosts = host_dirs(current) if is_farm(current) else None
    if base_hosts is None and cur_hosts is None:
        return [("", baseline, Path(current))]   # history:ROOT stays a string
    if base_hosts is not None and cur_hosts is not None:
        odd = sorted(set(base_hosts) ^ set(cur_hosts))
        if odd:
            raise ConvbenchError(f"{baseline} and {current} ran on different hosts "
                                 f"({', '.join(odd)} on one side only); compare host "
                                 "directories (FARM/hosts/NAME) one by one")
        return [(h, base_hosts[h], cur_hosts[h]) for h in base_hosts]
    if base_hosts is not None:
        return [(h, p, Path(current)) for h, p in base_hosts.items()]
    assert cur_hosts is not None
    return [(h, baseline, p) for h, p in cur_hosts.items()]
