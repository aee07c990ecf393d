"""Where in a suite file a value sits, and the one-line errors that say so.

Every rejection of a suite names the file, the line, the layer (index and name) when it is
inside one, and the field, e.g. ``suites/x.yaml:12: field 'sweep.threads': ...``.  A
:class:`Where` travels with the parsed suite so the planner, which finds some errors only
against the host (more threads than CPUs) or the registry, can say where too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from convbench.errors import SuiteError
from convbench.spec.limits import shown

# A message past this many characters is cut: it already said where and what.
MAX_MESSAGE = 500


def one_line(text: str) -> str:
    """``text`` on one line (whitespace runs collapsed), at most :data:`MAX_MESSAGE` long."""
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 3] + "..."


def key(value: object) -> str:
    """A mapping key of the user's as a field name shows it (bounded, one line)."""
    text = value if isinstance(value, str) else shown(value)
    return one_line(text)[:40]


class Where:
    """Builds error messages that name the file, the line, the layer and the field."""

    def __init__(self, path: Path | str, layer_lines: Sequence[int] = (),
                 field_lines: Mapping[str, int] | None = None):
        self.path = path
        self.layer_lines = tuple(layer_lines)
        self.field_lines = dict(field_lines or {})

    def line_of(self, fld: str) -> int | None:
        """Line of field ``fld`` (dotted), or of the nearest enclosing field given."""
        parts = fld.split(".")
        while parts:
            line = self.field_lines.get(".".join(parts))
            if line is not None:
                return line
            parts.pop()
        return None

    def locate(self, layer: int | None = None, name: str = "", fld: str | None = None) -> str:
        where = str(self.path)
        if layer is not None:
            if layer < len(self.layer_lines):
                where += f":{self.layer_lines[layer]}"
            where += f": layer {layer}" + (f" ({shown(name)})" if name else "")
        elif fld and (line := self.line_of(fld)) is not None:
            where += f":{line}"
        if fld:
            where += f": field '{fld}'"
        return where

    def error(self, message: str, layer: int | None = None, name: str = "",
              fld: str | None = None) -> SuiteError:
        return SuiteError(one_line(f"{self.locate(layer, name, fld)}: {message}"))
