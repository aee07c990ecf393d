"""Suites: YAML files naming conv layers (with occurrence counts) and the sweep to run on them.

Suites arrive in pull requests, so they are untrusted: parsed with ``yaml.SafeLoader`` only
(plus a check that rejects duplicate keys), every field checked, and every error names the
file, the line, the layer and the field.

Format::

    name: resnet50                 # required, [A-Za-z0-9_.-]+
    description: ...               # required, say where the shapes come from
    network: ResNet-50 v1.5        # optional
    reference:                     # optional: published conv MACs to check totals against
      macs: 4.09e9
      source: "He et al. 2016, Table 1"
      note: "..."
    layers:                        # required, non-empty
      - name: res2a_branch2b
        shape: mb1ic64ih56oc64oh56kh3ph1     # a benchdnn descriptor, or the fields below
        count: 3                   # occurrences in the network, default 1
      - {name: fc_as_conv, ic: 2048, ih: 1, oc: 1000, kh: 1}   # explicit fields, mb defaults to 1
    sweep:                         # optional, consumed by the planner (see SweepSpec)
      algorithms: [direct, im2col]
      layouts: [nchw, nhwc]
      threads: [1, 2]
      vector_widths: [auto]
      params: {im2col: {gemm: [blas]}}
      timing: {min_time: 0.02, values: 5, warmups: 1, timeout: 120, processes: 3}
"""

from __future__ import annotations

import contextlib
import functools
import re
import warnings
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from convbench.errors import SuiteError
from convbench.identity import WARM
from convbench.spec.descriptor import DescriptorError, parse_descriptor
from convbench.spec.problem import SHAPE_FIELDS, ConvProblem, ProblemError

SUITE_KEYS = {"name", "description", "network", "reference", "layers", "sweep"}
LAYER_KEYS = {"name", "shape", "count", *SHAPE_FIELDS}
SWEEP_KEYS = {"algorithms", "layouts", "threads", "vector_widths", "cache", "params",
              "timing", "tolerance"}
TIMING_KEYS = ("min_time", "values", "warmups", "timeout", "processes")
VECTOR_WIDTHS = ("auto", "256", "512")
# Cache state a layer is timed in: warm (its buffers stay in cache between calls), cold
# weights (the kernel's packed weights evicted before each call), cold (everything evicted).
CACHE_MODES = (WARM, "cold-weights", "cold")
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


@dataclass(frozen=True)
class TimingOptions:
    """How each variant is timed (see the harness timer)."""

    min_time: float = 0.02    # seconds one value must last at least (inner loop calibrated)
    values: int = 5           # timed values per variant in each worker process
    warmups: int = 1          # untimed values after the JIT-paying first call
    timeout: float = 120.0    # seconds a variant may take in total before it is killed
    # Worker processes per group, values pooled (pyperf's runs): one process can carry a
    # bias of its own (direct/nchw differed 5-10% between processes with identical buffers
    # on the Intel host), which no number of values inside it averages away.
    processes: int = 3


@dataclass(frozen=True)
class SweepSpec:
    """The sweep section as written; the planner expands it against the kernel registry.

    ``None`` for algorithms/layouts means "every registered / every supported one".
    """

    algorithms: tuple[str, ...] | None = None
    layouts: tuple[str, ...] | None = None
    threads: tuple[int, ...] = (1,)
    vector_widths: tuple[str, ...] = ("auto",)
    cache: tuple[str, ...] = ("warm",)
    params: dict[str, dict[str, tuple[Any, ...]]] = field(default_factory=dict)
    timing: TimingOptions = TimingOptions()


@dataclass(frozen=True)
class Layer:
    problem: ConvProblem
    count: int = 1

    @property
    def name(self) -> str:
        return self.problem.name


@dataclass(frozen=True)
class Reference:
    macs: float
    source: str
    note: str = ""


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    layers: tuple[Layer, ...]
    sweep: SweepSpec = SweepSpec()
    network: str = ""
    reference: Reference | None = None
    path: Path | None = None

    @property
    def total_macs(self) -> int:
        """Conv MACs of the whole network: sum of count * MACs per layer."""
        return sum(layer.count * layer.problem.macs for layer in self.layers)

    @property
    def total_flops(self) -> int:
        return 2 * self.total_macs


class _Where:
    """Builds error messages that name the file, the line and the layer."""

    def __init__(self, path: Path, layer_lines: list[int]):
        self.path = path
        self.layer_lines = layer_lines

    def locate(self, layer: int | None = None, name: str = "", fld: str | None = None) -> str:
        where = str(self.path)
        if layer is not None:
            if layer < len(self.layer_lines):
                where += f":{self.layer_lines[layer]}"
            where += f": layer {layer}" + (f" ({name!r})" if name else "")
        if fld:
            where += f": field '{fld}'"
        return where

    def error(self, message: str, layer: int | None = None, name: str = "",
              fld: str | None = None) -> SuiteError:
        return SuiteError(f"{self.locate(layer, name, fld)}: {message}")


def _layer_lines(text: str) -> list[int]:
    """1-based line of each item of the top-level ``layers`` list (best effort)."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return []
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if getattr(key, "value", None) == "layers" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []


@functools.lru_cache(maxsize=1)
def _strict_loader() -> type:
    """``yaml.SafeLoader`` that also rejects duplicate mapping keys.

    Plain PyYAML keeps the last of two equal keys silently, so ``count: 1`` followed by
    ``count: 4`` in one layer would go unnoticed.
    """
    import yaml

    class StrictSafeLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: set[tuple[str, str]] = set()
                for key_node, _ in node.value:
                    if not isinstance(key_node, yaml.ScalarNode):
                        continue
                    key = (key_node.tag, key_node.value)
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            "while constructing a mapping", node.start_mark,
                            f"duplicate key {key_node.value!r}", key_node.start_mark)
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return StrictSafeLoader


def _locate(text: str, index: int) -> tuple[int | None, str, str | None]:
    """Layer index, layer name and field around character ``index`` of ``text`` (best effort).

    Used for YAML errors found while constructing values (a rejected ``!!python/...`` tag, a
    duplicate key): the text still composes, so the node tree says where the error sits.
    """
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None, "", None
    if not isinstance(root, yaml.MappingNode):
        return None, "", None

    def inside(node: Any) -> bool:
        start, end = node.start_mark.index, node.end_mark.index
        return start <= index < max(end, start + 1)

    for key, value in root.value:
        if not (inside(key) or inside(value)):
            continue
        top = str(getattr(key, "value", "")) or None
        if top != "layers" or not isinstance(value, yaml.SequenceNode):
            return None, "", top
        for i, item in enumerate(value.value):
            if not inside(item):
                continue
            name, fld = "", None
            if isinstance(item, yaml.MappingNode):
                for k, v in item.value:
                    if not isinstance(k, yaml.ScalarNode):
                        continue
                    if k.value == "name" and isinstance(v, yaml.ScalarNode):
                        name = v.value
                    if fld is None and (inside(k) or inside(v)):
                        fld = k.value
            return i, name, fld
        return None, "", top
    return None, "", None


_MB_GIVEN = re.compile(r"(?<![a-z])mb\d")


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _parse_layer(raw: Any, index: int, where: _Where) -> Layer:
    if not isinstance(raw, dict):
        raise where.error(f"expected a mapping with name, shape and count, got {raw!r}", index)
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise where.error("expected a non-empty string", index, fld="name")
    unknown = sorted(set(raw) - LAYER_KEYS)
    if unknown:
        raise where.error(f"unknown field(s) {', '.join(map(str, unknown))}; expected name, "
                          f"shape, count or {', '.join(SHAPE_FIELDS)}", index, name)
    count = raw.get("count", 1)
    if not _positive_int(count):
        raise where.error(f"expected a positive integer, got {count!r}", index, name, "count")
    explicit = {k: v for k, v in raw.items() if k in SHAPE_FIELDS}
    if "shape" in raw:
        if explicit:
            raise where.error(f"give either 'shape' or explicit fields, not both "
                              f"({', '.join(sorted(explicit))})", index, name)
        if not isinstance(raw["shape"], str):
            raise where.error(f"expected a benchdnn descriptor string, got {raw['shape']!r}",
                              index, name, "shape")
        try:
            problem = parse_descriptor(raw["shape"])
        except DescriptorError as exc:
            raise where.error(str(exc), index, name, "shape") from None
        if problem.name and problem.name != name:
            raise where.error(f"descriptor names the layer {problem.name!r} but 'name' is "
                              f"{name!r}", index, name, "shape")
        problem = problem.replace(name=name)
        if not _MB_GIVEN.search(raw["shape"]):
            warnings.warn(f"{where.locate(index, name, 'shape')}: no mb in the descriptor, so "
                          f"batch {problem.mb} (benchdnn's default); write mb1 for batch 1",
                          stacklevel=2)
    else:
        if not explicit:
            raise where.error("missing: give 'shape' (a benchdnn descriptor such as "
                              "mb1ic64ih56oc64oh56kh3ph1) or the explicit fields ic, ih, oc, kh "
                              "(and optionally the others)", index, name, "shape")
        for k, v in explicit.items():
            if not isinstance(v, int) or isinstance(v, bool):
                raise where.error(f"expected an integer, got {v!r}", index, name, k)
        try:
            problem = ConvProblem.make(**explicit, name=name)
        except ProblemError as exc:
            raise where.error(str(exc), index, name, exc.field) from None
    return Layer(problem=problem, count=count)


def _str_list(value: Any, where: _Where, fld: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise where.error(f"expected a non-empty list of strings, got {value!r}", fld=fld)
    return tuple(value)


def _choices(value: Any, allowed: tuple[str, ...], where: _Where, fld: str) -> tuple[str, ...]:
    """A list (or one value) of words from ``allowed``, e.g. vector widths or cache modes."""
    values = [str(v) for v in (value if isinstance(value, list) else [value])]
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise where.error(f"expected a list of {', '.join(allowed)}, got {bad}", fld=fld)
    return tuple(values)


def _parse_sweep(raw: Any, where: _Where) -> SweepSpec:
    if raw is None:
        return SweepSpec()
    if not isinstance(raw, dict):
        raise where.error(f"expected a mapping, got {raw!r}", fld="sweep")
    unknown = sorted(set(raw) - SWEEP_KEYS)
    if unknown:
        raise where.error(f"unknown key(s) {', '.join(map(str, unknown))}; expected "
                          f"{', '.join(sorted(SWEEP_KEYS))}", fld="sweep")
    kwargs: dict[str, Any] = {}
    if "algorithms" in raw:
        kwargs["algorithms"] = _str_list(raw["algorithms"], where, "sweep.algorithms")
    if "layouts" in raw:
        kwargs["layouts"] = _str_list(raw["layouts"], where, "sweep.layouts")
    if "threads" in raw:
        threads = raw["threads"]
        if isinstance(threads, int):
            threads = [threads]
        if not isinstance(threads, list) or not threads or not all(map(_positive_int, threads)):
            raise where.error(f"expected a list of positive integers, got {threads!r}",
                              fld="sweep.threads")
        kwargs["threads"] = tuple(threads)
    for key, allowed in (("vector_widths", VECTOR_WIDTHS), ("cache", CACHE_MODES)):
        if key in raw:
            kwargs[key] = _choices(raw[key], allowed, where, f"sweep.{key}")
    if "params" in raw:
        params = raw["params"]
        if not isinstance(params, dict):
            raise where.error("expected a mapping algorithm -> {parameter: [values]}",
                              fld="sweep.params")
        parsed: dict[str, dict[str, tuple[Any, ...]]] = {}
        for alg, knobs in params.items():
            if not isinstance(knobs, dict):
                raise where.error(f"expected a mapping parameter -> [values], got {knobs!r}",
                                  fld=f"sweep.params.{alg}")
            parsed[str(alg)] = {}
            for knob, values in knobs.items():
                values = values if isinstance(values, list) else [values]
                if not values:
                    raise where.error("expected at least one value",
                                      fld=f"sweep.params.{alg}.{knob}")
                parsed[str(alg)][str(knob)] = tuple(values)
        kwargs["params"] = parsed
    if "timing" in raw:
        kwargs["timing"] = _parse_timing(raw["timing"], where)
    return SweepSpec(**kwargs)


def _parse_timing(raw: Any, where: _Where) -> TimingOptions:
    if not isinstance(raw, dict):
        raise where.error(f"expected a mapping, got {raw!r}", fld="sweep.timing")
    unknown = sorted(set(map(str, raw)) - set(TIMING_KEYS))
    if unknown:
        raise where.error(f"unknown key(s) {', '.join(unknown)}; expected "
                          f"{', '.join(TIMING_KEYS)}", fld="sweep.timing")
    out: dict[str, Any] = {}
    for key in ("min_time", "timeout"):
        if key in raw:
            v = raw[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                raise where.error(f"expected a positive number of seconds, got {v!r}",
                                  fld=f"sweep.timing.{key}")
            out[key] = float(v)
    if "values" in raw:
        if not _positive_int(raw["values"]) or raw["values"] < 3:
            raise where.error(f"expected an integer >= 3, got {raw['values']!r}",
                              fld="sweep.timing.values")
        out["values"] = raw["values"]
    if "processes" in raw:
        if not _positive_int(raw["processes"]):
            raise where.error(f"expected an integer >= 1, got {raw['processes']!r}",
                              fld="sweep.timing.processes")
        out["processes"] = raw["processes"]
    if "warmups" in raw:
        v = raw["warmups"]
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise where.error(f"expected an integer >= 0, got {v!r}", fld="sweep.timing.warmups")
        out["warmups"] = v
    return TimingOptions(**out)


def parse_suite(text: str, path: Path) -> Suite:
    """Validate suite YAML ``text`` (read from ``path``) into a :class:`Suite`."""
    import yaml

    where = _Where(path, _layer_lines(text))
    try:
        raw = yaml.load(text, Loader=_strict_loader())  # a SafeLoader: no arbitrary objects
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        loc = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        if "constructor for the tag" in problem:
            problem += " (suites are read with a safe loader: plain YAML only, no tags)"
        layer, name, fld = _locate(text, mark.index) if mark else (None, "", None)
        if layer is not None:
            loc += f": layer {layer}" + (f" ({name!r})" if name else "")
        if fld:
            loc += f": field '{fld}'"
        raise SuiteError(f"{path}{loc}: not valid YAML: {problem}") from None
    if not isinstance(raw, dict):
        raise where.error(f"expected a mapping at the top level, got {type(raw).__name__}")
    unknown = sorted(set(map(str, raw)) - SUITE_KEYS)
    if unknown:
        raise where.error(f"unknown top-level field(s) {', '.join(unknown)}; expected "
                          f"{', '.join(sorted(SUITE_KEYS))}")
    for key in ("name", "description", "layers"):
        if key not in raw:
            raise where.error("missing required field", fld=key)
    name = raw["name"]
    if not isinstance(name, str) or not _NAME.match(name):
        raise where.error(f"expected letters, digits, '_', '.', '-', got {name!r}", fld="name")
    if not isinstance(raw["description"], str) or not raw["description"].strip():
        raise where.error("expected a non-empty string", fld="description")
    layers_raw = raw["layers"]
    if not isinstance(layers_raw, list) or not layers_raw:
        raise where.error("expected a non-empty list of layers", fld="layers")
    layers = tuple(_parse_layer(item, i, where) for i, item in enumerate(layers_raw))
    seen: dict[str, int] = {}
    for i, layer in enumerate(layers):
        if layer.name in seen:
            raise where.error(f"duplicate layer name (first at layer {seen[layer.name]})",
                              i, layer.name, "name")
        seen[layer.name] = i
    reference = None
    if "reference" in raw:
        ref = raw["reference"]
        if not isinstance(ref, dict) or "macs" not in ref or "source" not in ref:
            raise where.error("expected a mapping with 'macs' and 'source'", fld="reference")
        macs = ref["macs"]
        if isinstance(macs, str):  # YAML 1.1 reads 4.09e9 (no dot in exponent) as a string
            with contextlib.suppress(ValueError):
                macs = float(macs)
        if isinstance(macs, bool) or not isinstance(macs, (int, float)) or macs <= 0:
            raise where.error(f"expected a positive number, got {macs!r}", fld="reference.macs")
        reference = Reference(macs=float(macs), source=str(ref["source"]),
                              note=str(ref.get("note", "")))
    return Suite(name=name, description=raw["description"].strip(), layers=layers,
                 sweep=_parse_sweep(raw.get("sweep"), where),
                 network=str(raw.get("network", "")), reference=reference, path=path)


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file; a shipped suite may be named without its path."""
    path = resolve_suite_path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read suite: {exc.strerror}") from None
    return parse_suite(text, path)


def shipped_suites_dir() -> Path:
    """The shipped suites: package data of ``convbench``, so an installed wheel has them too.

    convbench is always installed as files on disk (numba's ``cache=True`` needs its
    kernels' source files), so the resource is a plain directory.
    """
    return Path(str(resources.files("convbench") / "suites"))


def shipped_suites() -> list[Path]:
    return sorted(shipped_suites_dir().glob("*.yaml"))


def resolve_suite_path(path: str | Path) -> Path:
    """``path`` itself where it exists or has a suffix; else the shipped suite of that name
    (``resnet50`` -> the shipped ``resnet50.yaml``)."""
    p = Path(path)
    if p.exists() or p.suffix:
        return p
    shipped = shipped_suites_dir() / f"{p.name}.yaml"
    return shipped if shipped.exists() else p
