"""Minimum effect sizes: global, per suite, per layer and per variant (glob patterns).

A thresholds file (YAML or JSON; fractions or percent strings)::

    time: 0.05              # global timing threshold (``--threshold`` overrides it)
    instructions: 0.01      # global instruction-count threshold
    suites:   {resnet50: 0.07}
    layers:   {"conv1*": 10%, "*dw*": 0.08}
    variants: {"direct/*": 0.10}

The most specific entry wins (variant, then layer, then suite, then global); within a
section the first pattern that matches, in file order.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from convbench.compare.decision import DEFAULT_INSTRUCTION_THRESHOLD, DEFAULT_THRESHOLD
from convbench.errors import ConvbenchError

FILE_KEYS = ("time", "instructions", "suites", "layers", "variants")


def parse_threshold(value: Any, where: str) -> float:
    """0.05, "0.05" or "5%" -> 0.05; anything else, or outside [0, 10], is an error."""
    text = str(value).strip()
    try:
        number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ConvbenchError(f"{where}: threshold {value!r} is not a number or a percentage"
                             ) from None
    if not 0.0 <= number <= 10.0:
        raise ConvbenchError(f"{where}: threshold {value!r} is outside 0..10 (0%..1000%)")
    return number


@dataclass(frozen=True)
class Thresholds:
    """Where each variant's minimum effect comes from."""

    time: float = DEFAULT_THRESHOLD
    instructions: float = DEFAULT_INSTRUCTION_THRESHOLD
    suites: tuple[tuple[str, float], ...] = ()
    layers: tuple[tuple[str, float], ...] = ()
    variants: tuple[tuple[str, float], ...] = ()

    def for_variant(self, suite: str, layer: str, variant: str) -> float:
        """The timing threshold of one variant."""
        for patterns, name in ((self.variants, variant), (self.layers, layer),
                               (self.suites, suite)):
            for pattern, value in patterns:
                if fnmatchcase(name, pattern):
                    return value
        return self.time

    @classmethod
    def load(cls, path: str | Path | None = None, *, time: float | None = None,
             instructions: float | None = None) -> Thresholds:
        """From a thresholds file (optional), with the command line's globals on top."""
        data: dict[str, Any] = {}
        if path is not None:
            data = _read(Path(path))
        sections = {}
        for section in ("suites", "layers", "variants"):
            entries = data.get(section) or {}
            if not isinstance(entries, dict):
                raise ConvbenchError(f"{path}: {section} must map patterns to thresholds")
            sections[section] = tuple((str(k), parse_threshold(v, f"{path}: {section}.{k}"))
                                      for k, v in entries.items())
        return cls(
            time=time if time is not None else
            parse_threshold(data.get("time", DEFAULT_THRESHOLD), f"{path}: time"),
            instructions=instructions if instructions is not None else
            parse_threshold(data.get("instructions", DEFAULT_INSTRUCTION_THRESHOLD),
                            f"{path}: instructions"),
            **sections)


def _read(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text())  # JSON is YAML too
    except OSError as exc:
        raise ConvbenchError(f"{path}: cannot read thresholds file ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ConvbenchError(f"{path}: not valid YAML/JSON ({exc})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConvbenchError(f"{path}: a thresholds file is a mapping with keys "
                             f"{', '.join(FILE_KEYS)}")
    unknown = sorted(set(data) - set(FILE_KEYS))
    if unknown:
        raise ConvbenchError(f"{path}: unknown key(s) {', '.join(unknown)}; expected "
                             f"{', '.join(FILE_KEYS)}")
    return data
