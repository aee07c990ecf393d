"""Suites: YAML files naming conv layers (with occurrence counts) and the sweep to run on them.

Suites arrive in pull requests, so they are untrusted: read as plain YAML only
(:mod:`convbench.spec.safe_yaml`: no tags, duplicate keys, aliases or deep nesting), bounded
in size (:mod:`convbench.spec.limits`), every field checked (the sweep by
:mod:`convbench.spec.sweep`), and every error is one line naming the file, the line, the
layer and the field (:mod:`convbench.spec.where`).

Format::

    name: resnet50                 # required, [A-Za-z0-9_.-]+, at most 64 characters
    description: ...               # required, say where the shapes come from
    network: ResNet-50 v1.5        # optional: the title, or the graph (network_parse):
    #   network: {title: ..., input: {c: 3, h: 224, w: 224}, ops: [{op: conv, layer: conv1}, ...]}
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
import re
import warnings
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from convbench.errors import SuiteError
from convbench.spec import safe_yaml
from convbench.spec.descriptor import DescriptorError, parse_descriptor
from convbench.spec.limits import (
    MAX_DIMENSION,
    MAX_LAYER_NAME,
    MAX_SUITE_BYTES,
    MAX_SUITE_NAME,
    shown,
)
from convbench.spec.network import Network
from convbench.spec.network_parse import op_field, parse_network
from convbench.spec.problem import SHAPE_FIELDS, ConvProblem, ProblemError
from convbench.spec.sweep import (  # noqa: F401  (re-exported: the suite's vocabulary)
    CACHE_MODES,
    SWEEP_KEYS,
    TIMING_KEYS,
    VECTOR_WIDTHS,
    SweepSpec,
    TimingOptions,
    parse_sweep,
)
from convbench.spec.where import Where, key, one_line
from convbench.textsafe import terminal

SUITE_KEYS = {"name", "description", "network", "reference", "layers", "sweep"}
LAYER_KEYS = {"name", "shape", "count", *SHAPE_FIELDS}
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


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
    sweep: SweepSpec = field(default_factory=SweepSpec)
    network: str = ""                # the network's title
    reference: Reference | None = None
    path: Path | None = None
    # Lines of the file's fields, for errors found later (the planner's); not identity.
    where: Where | None = field(default=None, compare=False, repr=False)
    # The layers in execution order with the ops between them; None when the suite's
    # `network` is only a title.
    graph: Network | None = None

    def layer(self, name: str) -> Layer:
        """The layer named ``name``; KeyError if the suite has none."""
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)

    @property
    def total_macs(self) -> int:
        """Conv MACs of the whole network: sum of count * MACs per layer."""
        return sum(layer.count * layer.problem.macs for layer in self.layers)

    @property
    def total_flops(self) -> int:
        return 2 * self.total_macs

    @property
    def pass_weight_bytes(self) -> int | None:
        """Float32 conv weight bytes one pass of the suite's network streams (each layer's
        weights times its occurrences); None when the suite names no network."""
        if self.graph is None and not self.network:
            return None
        return sum(layer.count * layer.problem.weight_bytes for layer in self.layers)

    def error(self, message: str, fld: str) -> SuiteError:
        """A located error about field ``fld`` found after loading (by the planner)."""
        where = self.where or Where(self.path or f"suite {self.name}")
        return where.error(message, fld=fld)


def _layer_lines(root: Any) -> list[int]:
    """1-based line of each item of the top-level ``layers`` list."""
    import yaml

    if isinstance(root, yaml.MappingNode):
        for k, value in root.value:
            if getattr(k, "value", None) == "layers" and isinstance(value, yaml.SequenceNode):
                return [item.start_mark.line + 1 for item in value.value]
    return []


def _locate(root: Any, index: int) -> tuple[int | None, str, str | None]:
    """Layer index, layer name and field around character ``index`` of the text (best
    effort), for YAML errors found while constructing values (a rejected ``!!python/...``
    tag, a duplicate key): the text composed, so the node tree says where the error sits."""
    import yaml

    if not isinstance(root, yaml.MappingNode):
        return None, "", None

    def inside(node: Any) -> bool:
        start, end = node.start_mark.index, node.end_mark.index
        return start <= index < max(end, start + 1)

    for k, value in root.value:
        if not (inside(k) or inside(value)):
            continue
        top = key(getattr(k, "value", "")) or None
        if top == "network":
            return None, "", op_field(value, index) or top
        if top != "layers" or not isinstance(value, yaml.SequenceNode):
            return None, "", top
        for i, item in enumerate(value.value):
            if not inside(item):
                continue
            name, fld = "", None
            if isinstance(item, yaml.MappingNode):
                for ik, iv in item.value:
                    if not isinstance(ik, yaml.ScalarNode):
                        continue
                    if ik.value == "name" and isinstance(iv, yaml.ScalarNode):
                        name = iv.value
                    if fld is None and (inside(ik) or inside(iv)):
                        fld = key(ik.value)
            return i, name, fld
        return None, "", top
    return None, "", None


_MB_GIVEN = re.compile(r"(?<![a-z])mb\d")


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _parse_layer(raw: Any, index: int, where: Where) -> Layer:
    if not isinstance(raw, dict):
        raise where.error(f"expected a mapping with name, shape and count, got {shown(raw)}",
                          index)
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise where.error("expected a non-empty string", index, fld="name")
    # a layer name reaches terminals, file names and figures: printable text of sane length
    if len(name) > MAX_LAYER_NAME or terminal(name) != name:
        raise where.error(f"expected at most {MAX_LAYER_NAME} printable characters (no "
                          f"control characters), got {shown(name)}", index, fld="name")
    unknown = sorted(key(k) for k in set(raw) - LAYER_KEYS)
    if unknown:
        raise where.error(f"unknown field(s) {', '.join(unknown)}; expected name, "
                          f"shape, count or {', '.join(SHAPE_FIELDS)}", index, name)
    count = raw.get("count", 1)
    if not _positive_int(count) or count > MAX_DIMENSION:
        raise where.error(f"expected a positive integer up to {MAX_DIMENSION}, got "
                          f"{shown(count)}", index, name, "count")
    explicit = {k: v for k, v in raw.items() if k in SHAPE_FIELDS}
    if "shape" in raw:
        if explicit:
            raise where.error(f"give either 'shape' or explicit fields, not both "
                              f"({', '.join(sorted(explicit))})", index, name)
        if not isinstance(raw["shape"], str):
            raise where.error(f"expected a benchdnn descriptor string, got "
                              f"{shown(raw['shape'])}", index, name, "shape")
        try:
            problem = parse_descriptor(raw["shape"])
        except DescriptorError as exc:
            raise where.error(str(exc), index, name, "shape") from None
        if problem.name and problem.name != name:
            raise where.error(f"descriptor names the layer {shown(problem.name)} but 'name' "
                              f"is {shown(name)}", index, name, "shape")
        problem = problem.replace(name=name)
        if not _MB_GIVEN.search(raw["shape"]):
            warnings.warn(one_line(f"{where.locate(index, name, 'shape')}: no mb in the "
                                   f"descriptor, so batch {problem.mb} (benchdnn's default); "
                                   f"write mb1 for batch 1"), stacklevel=2)
    else:
        if not explicit:
            raise where.error("missing: give 'shape' (a benchdnn descriptor such as "
                              "mb1ic64ih56oc64oh56kh3ph1) or the explicit fields ic, ih, oc, kh "
                              "(and optionally the others)", index, name, "shape")
        try:
            problem = ConvProblem.make(**explicit, name=name)
        except ProblemError as exc:
            raise where.error(str(exc), index, name, exc.field) from None
    return Layer(problem=problem, count=count)


def _text(raw: dict[str, Any], name: str, where: Where, default: str = "") -> str:
    """An optional free-text field: a string (a number is read as its text)."""
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise where.error(f"expected text, got {shown(value)}", fld=name)
    return str(value)


def _parse_reference(ref: Any, where: Where) -> Reference:
    if not isinstance(ref, dict) or "macs" not in ref or "source" not in ref:
        raise where.error("expected a mapping with 'macs' and 'source'", fld="reference")
    macs = ref["macs"]
    if isinstance(macs, str):  # YAML 1.1 reads 4.09e9 (no dot in exponent) as a string
        with contextlib.suppress(ValueError):
            macs = float(macs)
    if (isinstance(macs, bool) or not isinstance(macs, (int, float)) or not macs > 0
            or macs == float("inf")):
        raise where.error(f"expected a positive number, got {shown(macs)}",
                          fld="reference.macs")
    return Reference(macs=float(macs), source=_text(ref, "source", where),
                     note=_text(ref, "note", where))


def _yaml_error(exc: safe_yaml.YamlError, path: Path) -> SuiteError:
    """A YAML error as the loader's other errors read: file:line:column, layer, field."""
    loc = f":{exc.line}:{exc.column}" if exc.line is not None else ""
    if exc.index is not None and exc.root is not None:
        layer, name, fld = _locate(exc.root, exc.index)
        if layer is not None:
            loc += f": layer {layer}" + (f" ({shown(name)})" if name else "")
        if fld:
            loc += f": field '{fld}'"
    return SuiteError(one_line(f"{path}{loc}: not valid YAML: {exc.problem[:300]}"))


def parse_suite(text: str, path: Path) -> Suite:
    """Validate suite YAML ``text`` (read from ``path``) into a :class:`Suite`."""
    try:
        raw, root = safe_yaml.load(text)
    except safe_yaml.YamlError as exc:
        raise _yaml_error(exc, path) from None
    where = Where(path, _layer_lines(root), safe_yaml.field_lines(root))
    if not isinstance(raw, dict):
        raise where.error(f"expected a mapping at the top level, got {type(raw).__name__}")
    unknown = sorted(key(k) for k in set(raw) - SUITE_KEYS)
    if unknown:
        raise where.error(f"unknown top-level field(s) {', '.join(unknown)}; expected "
                          f"{', '.join(sorted(SUITE_KEYS))}")
    for name in ("name", "description", "layers"):
        if name not in raw:
            raise where.error("missing required field", fld=name)
    name = raw["name"]
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > MAX_SUITE_NAME:
        raise where.error(f"expected up to {MAX_SUITE_NAME} letters, digits, '_', '.', '-' "
                          f"(it names the results directory), got {shown(name)}", fld="name")
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
    reference = _parse_reference(raw["reference"], where) if "reference" in raw else None
    title, graph = "", None
    if "network" in raw:
        title, graph = parse_network(raw["network"], layers, where, root)
    return Suite(name=name, description=raw["description"].strip(), layers=layers,
                 sweep=parse_sweep(raw.get("sweep"), where), network=title,
                 reference=reference, path=path, where=where, graph=graph)


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file; a shipped suite may be named without its path."""
    path = resolve_suite_path(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SUITE_BYTES + 1)
    except OSError as exc:
        raise SuiteError(one_line(f"{path}: cannot read suite: {exc.strerror}")) from None
    if len(data) > MAX_SUITE_BYTES:
        raise SuiteError(f"{path}: larger than {MAX_SUITE_BYTES} bytes, the limit of a suite "
                         f"file (convbench.spec.limits.MAX_SUITE_BYTES)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SuiteError(f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at "
                         f"offset {exc.start}); suites are UTF-8 YAML") from None
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
    if exists(p) or p.suffix:
        return p
    shipped = shipped_suites_dir() / f"{p.name}.yaml"
    return shipped if exists(shipped) else p


def exists(path: Path) -> bool:
    """``path.exists()``, False where the name cannot be a file at all (too long: a
    descriptor of 400 digits given where a suite or a descriptor may stand)."""
    try:
        return path.exists()
    except OSError:
        return False
