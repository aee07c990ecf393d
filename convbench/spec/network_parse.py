"""Reading a suite's ``network:`` field into a :class:`~convbench.spec.network.Network`.

``network`` is either the network's title (a string, as before) or a mapping::

    network:
      title: "ResNet-50 v1.5"
      input: {c: 3, h: 224, w: 224}     # the tensor named `input`; mb is the layers' mb
      ops:                              # execution order
        - {op: conv, layer: conv1}      # `name` defaults to <op>_<index>, `from` to the
        - {op: relu}                    #   previous op's output (`input` for the first)
        - {name: pool1, op: maxpool, k: 3, s: 2, p: 1}
        - {name: b1, op: conv, layer: res2a_branch1, from: pool1}
        - {op: add, from: [res2a_branch2c, b1]}
        - {op: avgpool, k: 7}           # global average pool: k = the input's height

Ops: ``conv`` (``layer``: a layer of the suite), ``relu``, ``relu6``, ``maxpool`` and
``avgpool`` (``k``, optional ``s`` = 1 and ``p`` = 0), ``add`` (``from``: two or more
tensors).  Every conv layer's ``count`` must equal its occurrences in ``ops``.  Errors are
one line naming the file, the line, the op (``network.ops[7] ('res2b')``) and the field.
"""

from __future__ import annotations

import re
from typing import Any

from convbench.errors import SuiteError
from convbench.spec.limits import MAX_DIMENSION, MAX_NETWORK_OPS, shown
from convbench.spec.network import INPUT, KINDS, POOLS, Network, NetworkError, Op
from convbench.spec.where import Where, key, one_line

NETWORK_KEYS = ("title", "input", "ops")
INPUT_KEYS = ("c", "h", "w")
OP_KEYS = ("op", "name", "from", "layer", "k", "s", "p")
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


class _OpWhere:
    """Located errors about ``network.ops[i]``: the line of the op's entry, its name, a field."""

    def __init__(self, where: Where, lines: list[int]):
        self.where = where
        self.lines = lines

    def error(self, message: str, index: int, name: str = "", fld: str | None = None
              ) -> SuiteError:
        loc = str(self.where.path)
        if index < len(self.lines):
            loc += f":{self.lines[index]}"
        loc += f": network.ops[{index}]" + (f" ({shown(name)})" if name else "")
        if fld:
            loc += f": field '{fld}'"
        return SuiteError(one_line(f"{loc}: {message}"))


def _op_lines(root: Any) -> list[int]:
    """1-based line of each item of ``network.ops``."""
    import yaml

    node = root
    for name in ("network", "ops"):
        if not isinstance(node, yaml.MappingNode):
            return []
        node = next((v for k, v in node.value if getattr(k, "value", None) == name), None)
    if not isinstance(node, yaml.SequenceNode):
        return []
    return [item.start_mark.line + 1 for item in node.value]


def op_field(network: Any, index: int) -> str | None:
    """``network.ops[i]`` (with the op's field when known) around character ``index`` of the
    text, for YAML errors inside an op (a duplicate key); None outside the ops."""
    import yaml

    def inside(node: Any) -> bool:
        return node.start_mark.index <= index < max(node.end_mark.index,
                                                     node.start_mark.index + 1)

    if not isinstance(network, yaml.MappingNode):
        return None
    ops = next((v for k, v in network.value if getattr(k, "value", None) == "ops"), None)
    if not isinstance(ops, yaml.SequenceNode):
        return None
    for i, item in enumerate(ops.value):
        if inside(item):
            fields = [key(k.value) for k, v in getattr(item, "value", ())
                      if isinstance(k, yaml.ScalarNode) and (inside(k) or inside(v))]
            return f"network.ops[{i}]" + (f".{fields[0]}" if fields else "")
    return None


def _int(value: Any, least: int) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)
            and least <= value <= MAX_DIMENSION)


def _parse_op(raw: Any, index: int, previous: str, at: _OpWhere) -> Op:
    if not isinstance(raw, dict):
        raise at.error(f"expected a mapping such as {{op: conv, layer: conv1}}, got "
                       f"{shown(raw)}", index)
    kind = raw.get("op")
    given = raw.get("name")
    label = given if isinstance(given, str) else ""
    if not isinstance(kind, str) or kind not in KINDS:
        raise at.error(f"expected one of {', '.join(KINDS)}, got {shown(kind)}", index, label,
                       "op")
    unknown = sorted(key(k) for k in set(raw) - set(OP_KEYS))
    if unknown:
        raise at.error(f"unknown field(s) {', '.join(unknown)}; expected "
                       f"{', '.join(OP_KEYS)}", index, label)
    if "name" in raw and (not isinstance(given, str) or not _NAME.fullmatch(given)):
        raise at.error(f"expected up to 64 letters, digits, '_', '.', '-', got {shown(given)}",
                       index, label, "name")
    name = given if "name" in raw else f"{kind}_{index}"
    sources = raw.get("from", previous)
    if isinstance(sources, str):
        sources = [sources]
    if (not isinstance(sources, list) or not sources
            or not all(isinstance(s, str) and s for s in sources)):
        raise at.error(f"expected a tensor name or a list of them, got "
                       f"{shown(raw.get('from'))}", index, name, "from")
    layer = raw.get("layer")
    if kind == "conv" and not isinstance(layer, str):
        raise at.error(f"a conv names the suite layer it runs, got {shown(layer)}", index,
                       name, "layer")
    if kind != "conv" and "layer" in raw:
        raise at.error(f"only a conv names a layer, not a {kind}", index, name, "layer")
    window: dict[str, int] = {}
    for fld, default, least in (("k", None, 1), ("s", 1, 1), ("p", 0, 0)):
        if kind not in POOLS:
            if fld in raw:
                raise at.error(f"only a pool has '{fld}', not a {kind}", index, name, fld)
            continue
        value = raw.get(fld, default)
        if value is None:
            raise at.error("missing: a pool's window size (global pool: the input's height)",
                           index, name, fld)
        if not _int(value, least):
            raise at.error(f"expected an integer from {least} to {MAX_DIMENSION}, got "
                           f"{shown(value)}", index, name, fld)
        window[fld] = value
    return Op(name=name, kind=kind, inputs=tuple(sources), layer=layer, **window)


def _parse_input(raw: Any, mb: int, where: Where) -> tuple[int, int, int, int]:
    if not isinstance(raw, dict):
        raise where.error(f"expected a mapping {{c: 3, h: 224, w: 224}}, got {shown(raw)}",
                          fld="network.input")
    unknown = sorted(key(k) for k in set(raw) - set(INPUT_KEYS))
    if unknown:
        raise where.error(f"unknown field(s) {', '.join(unknown)}; expected c, h, w (mb is "
                          f"the layers' mb)", fld="network.input")
    for fld in INPUT_KEYS:
        if not _int(raw.get(fld), 1):
            raise where.error(f"expected a positive integer up to {MAX_DIMENSION}, got "
                              f"{shown(raw.get(fld))}", fld=f"network.input.{fld}")
    return (mb, raw["c"], raw["h"], raw["w"])


def parse_network(raw: Any, layers: tuple[Any, ...], where: Where, root: Any = None
                  ) -> tuple[str, Network | None]:
    """The ``network`` field: (title, graph); the graph is None when ``raw`` is a title.

    ``layers`` are the suite's :class:`~convbench.spec.suite.Layer` s (already validated);
    ``root`` is the YAML node tree, for the line of each op.
    """
    if isinstance(raw, (str, int, float)) and not isinstance(raw, bool):
        return str(raw), None
    if not isinstance(raw, dict):
        raise where.error(f"expected the network's title or a mapping with title, input "
                          f"and ops, got {shown(raw)}", fld="network")
    unknown = sorted(key(k) for k in set(raw) - set(NETWORK_KEYS))
    if unknown:
        raise where.error(f"unknown field(s) {', '.join(unknown)}; expected "
                          f"{', '.join(NETWORK_KEYS)}", fld="network")
    for fld in ("input", "ops"):
        if fld not in raw:
            raise where.error("missing required field", fld=f"network.{fld}")
    title = raw.get("title", "")
    if isinstance(title, bool) or not isinstance(title, (str, int, float)):
        raise where.error(f"expected text, got {shown(title)}", fld="network.title")
    mb = layers[0].problem.mb
    for i, layer in enumerate(layers):
        if layer.problem.mb != mb:
            raise where.error(f"mb {layer.problem.mb} differs from the first layer's mb {mb}: "
                              f"a network runs one batch size", i, layer.name, "shape")
    input_shape = _parse_input(raw["input"], mb, where)
    ops_raw = raw["ops"]
    if not isinstance(ops_raw, list) or not ops_raw:
        raise where.error("expected a non-empty list of ops", fld="network.ops")
    if len(ops_raw) > MAX_NETWORK_OPS:
        raise where.error(f"{len(ops_raw)} ops, more than the limit of {MAX_NETWORK_OPS} "
                          f"(convbench.spec.limits.MAX_NETWORK_OPS)", fld="network.ops")
    at = _OpWhere(where, _op_lines(root))
    ops: list[Op] = []
    for i, item in enumerate(ops_raw):
        ops.append(_parse_op(item, i, ops[-1].name if ops else INPUT, at))
    try:
        graph = Network(title=str(title), input_shape=input_shape, ops=tuple(ops),
                        layers=tuple(layer.problem for layer in layers))
    except NetworkError as exc:
        if exc.index is None:
            raise where.error(str(exc), fld="network.ops") from None
        raise at.error(str(exc), exc.index, ops[exc.index].name, exc.field) from None
    occurrences = graph.occurrences()
    for i, layer in enumerate(layers):
        if occurrences[layer.name] != layer.count:
            ran = [j for j, op in enumerate(ops) if op.layer == layer.name]
            listed = ", ".join(f"ops[{j}]" for j in ran[:6]) + (", ..." if len(ran) > 6 else "")
            raise where.error(f"count {layer.count} but network.ops runs the layer "
                              f"{occurrences[layer.name]} time(s)"
                              + (f" ({listed})" if listed else ""), i, layer.name, "count")
    return graph.title, graph
