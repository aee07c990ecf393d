"""Reading untrusted YAML: plain data only, every key once, no aliases, bounded nesting.

Suites arrive in pull requests.  ``yaml.SafeLoader`` already refuses tags that construct
Python objects; on top of it this loader refuses

- duplicate mapping keys (plain PyYAML keeps the last of two silently, so ``count: 1``
  followed by ``count: 4`` would go unnoticed);
- aliases (``*name``): a suite has no use for them, and ten nested aliases of ten items
  each expand to 10^10 values ("billion laughs").  Refusing them outright is simpler and
  safer than counting the expansion, and the shipped suites use none;
- collections nested deeper than :data:`~convbench.spec.limits.MAX_YAML_DEPTH`: PyYAML
  composes recursively, so 10,000 ``[`` would end in a RecursionError.

Errors come out as one :class:`YamlError` with the position (``mark``) where the parser
stopped and, when the text composed, the node tree so the caller can say which layer and
field it sits in.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from convbench.spec.limits import MAX_YAML_DEPTH


@dataclass
class YamlError(Exception):
    """Text that is not a plain YAML document; ``line``/``column`` are 1-based."""

    problem: str
    line: int | None = None
    column: int | None = None
    index: int | None = None     # character offset of the error, for locating it in ``root``
    root: Any = None             # the composed node tree, when the text composed

    def __str__(self) -> str:
        return self.problem


@functools.lru_cache(maxsize=1)
def _loader() -> type:
    import yaml
    from yaml.composer import ComposerError
    from yaml.constructor import ConstructorError

    class SuiteLoader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                raise ComposerError(None, None, f"alias *{event.anchor} is not allowed "
                                    "(suites are plain data: write the value out)",
                                    event.start_mark)
            nests = isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent))
            if nests and self.depth >= MAX_YAML_DEPTH:
                raise ComposerError(None, None, f"collections nested more than "
                                    f"{MAX_YAML_DEPTH} deep", event.start_mark)
            self.depth += nests
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= nests

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: set[tuple[str, str]] = set()
                for key_node, _ in node.value:
                    if not isinstance(key_node, yaml.ScalarNode):
                        continue
                    key = (key_node.tag, key_node.value)
                    if key in seen:
                        raise ConstructorError(
                            "while constructing a mapping", node.start_mark,
                            f"duplicate key {key_node.value[:60]!r}", key_node.start_mark)
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

        def construct_object(self, node: Any, deep: bool = False) -> Any:
            try:
                return super().construct_object(node, deep=deep)
            except (ValueError, OverflowError) as exc:
                # int("9" * 5000) refuses past 4300 digits; say where, like any YAML error
                raise ConstructorError(None, None, f"cannot read this value ({exc})",
                                       node.start_mark) from None

    return SuiteLoader


def load(text: str) -> tuple[Any, Any]:
    """The document in ``text`` and its node tree (None, None for an empty document)."""
    import yaml

    loader, root = None, None
    try:
        loader = _loader()(text)   # checks the characters first
        root = loader.get_single_node()
        return (None if root is None else loader.construct_document(root)), root
    except yaml.reader.ReaderError as exc:   # a character YAML does not allow
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        raise YamlError(f"{exc.reason} (#x{exc.character:04x})" if isinstance(
            exc.character, int) else exc.reason, line, column, exc.position) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or type(exc).__name__
        if "constructor for the tag" in problem:
            problem += " (suites are read with a safe loader: plain YAML only, no tags)"
        if mark is None:
            raise YamlError(problem, root=root) from None
        raise YamlError(problem, mark.line + 1, mark.column + 1, mark.index, root) from None
    except yaml.YAMLError as exc:
        raise YamlError(" ".join(str(exc).split()), root=root) from None
    except RecursionError:   # not expected past the depth limit; never a traceback
        raise YamlError(f"nested too deeply (limit {MAX_YAML_DEPTH})", root=root) from None
    finally:
        if loader is not None:
            loader.dispose()


def field_lines(root: Any, prefix: str = "", depth: int = 3) -> dict[str, int]:
    """1-based line of every mapping key down to ``depth`` levels, by dotted path
    (``sweep.threads`` -> 12), so errors about a value can name its line."""
    import yaml

    lines: dict[str, int] = {}
    if depth == 0 or not isinstance(root, yaml.MappingNode):
        return lines
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode):
            path = f"{prefix}{key.value}"
            lines[path] = key.start_mark.line + 1
            lines.update(field_lines(value, path + ".", depth - 1))
    return lines
