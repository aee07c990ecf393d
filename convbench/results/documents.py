"""manifest.json and environment.json as the rest of convbench may trust them.

Each check raises ValueError with one line naming the field and what it holds; the loader
adds the file's name.  Only the fields something reads are checked (an unknown field is
kept as written, for the report's environment table); the machine limits are checked as
:mod:`convbench.machine.store` reads them for the roofline figure.
"""

from __future__ import annotations

import math
from typing import Any

# Deeper than this is not something convbench wrote; the report and compare walk the
# environment recursively, so a hostile depth would end in RecursionError.
MAX_DEPTH = 32

# field -> the JSON types it may hold (absent is fine for every one of them); the format
# version is the upgrade's to judge (convbench.results.upgrade says which versions it reads)
MANIFEST_FIELDS: dict[str, tuple[type, ...]] = {
    "status": (str,), "suite": (str,), "created": (str,),
    "updated": (str,), "finished": (str,), "convbench_version": (str,), "planned": (list,),
    "counted": (list,), "done": (int,), "options": (dict,), "upgraded_from": (int,),
}


_WANT = {int: "an integer", str: "text", list: "a list", dict: "an object"}


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false",
            type(None): "null"}.get(type(value), "a number")


def _depth(value: Any) -> int:
    """Nesting depth of a JSON value, without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            break
        if isinstance(item, dict):
            todo += [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            todo += [(v, depth + 1) for v in item]
    return deepest


def _object(data: Any, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ValueError(f"{what} should be a JSON object, is {_kind(data)}")
    if _depth(data) > MAX_DEPTH:
        raise ValueError(f"{what} is nested deeper than {MAX_DEPTH} levels")
    return data


def check_manifest(data: Any) -> dict[str, Any]:
    """The manifest, with every field convbench reads of the type it expects."""
    manifest = _object(data, "the manifest")
    for field, kinds in MANIFEST_FIELDS.items():
        value = manifest.get(field)
        if field in manifest and (not isinstance(value, kinds) or isinstance(value, bool)):
            raise ValueError(f"{field} should be {_WANT[kinds[0]]}, is {_kind(value)}")
    for field in ("planned", "counted"):
        odd = [v for v in manifest.get(field, []) if not isinstance(v, str)]
        if odd:
            raise ValueError(f"{field} should list case ids (text), holds {_kind(odd[0])}")
    return manifest


def _figure(value: Any, allow_null: bool) -> bool:
    if value is None:
        return allow_null
    return isinstance(value, int | float) and not isinstance(value, bool) and not (
        isinstance(value, float) and math.isnan(value))


def _two_levels(machine: dict[str, Any], field: str, allow_null: bool) -> None:
    """``{key: {key: number}}``, as peak_gflops (thread count -> width -> GFLOP/s) and
    bandwidth_gbs (level -> thread count -> GB/s) are written."""
    table = machine.get(field)
    if table is None:
        return
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise ValueError(f"machine.{field} should be an object of objects")
    for outer, inner in table.items():
        for key, value in inner.items():
            if not _figure(value, allow_null):
                raise ValueError(f"machine.{field}.{outer}.{key} should be a number, is "
                                 f"{_kind(value)}")


def check_environment(data: Any) -> dict[str, Any]:
    """The environment, with the machine limits (when recorded) in the shape the roofline
    figure reads."""
    environment = _object(data, "the environment")
    machine = environment.get("machine")
    if machine is not None:
        if not isinstance(machine, dict):
            raise ValueError(f"machine should be an object or null, is {_kind(machine)}")
        _two_levels(machine, "peak_gflops", allow_null=False)
        _two_levels(machine, "bandwidth_gbs", allow_null=True)
    return environment
