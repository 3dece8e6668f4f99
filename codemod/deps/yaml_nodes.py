"""PyYAML node trees with positions: composing (not constructing) keeps every scalar's marks,
which give the span to edit and the line to report."""

from __future__ import annotations

import re
from collections.abc import Iterator

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from neuron_migrate.deps.entries import Unparsable, line_at


_SURROGATE = re.compile("[\udc80-\udcff]")
_BASE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BASE_LOADER):  # type: ignore[misc,valid-type]
    """libyaml's loader where PyYAML was built with it: same nodes and marks, several times
    faster. A node is composed, never constructed, and no reader here looks at its tag, so a
    plain scalar is not matched against YAML's implicit types (a regular expression or more
    per scalar, a fifth of composing): every scalar is tagged a string. A tag the file writes
    (`!!int 5`, `!Ref x`) is kept as written."""

    def resolve(self, kind: type, value: object, implicit: object) -> str:
        if kind is ScalarNode:
            return "tag:yaml.org,2002:str"
        return super().resolve(kind, value, implicit)


LOADER = _Loader


_COMPOSED: list[tuple[str, list[Node]]] = []
"""The last text composed, with its nodes: a workflow is read for its Python (python_env)
and then for its pins, a conda file likewise, and nothing changes the nodes."""


def compose(text: str) -> list[Node]:
    if _COMPOSED and _COMPOSED[0][0] == text:
        return list(_COMPOSED[0][1])
    documents = _compose(text)
    _COMPOSED[:] = [(text, documents)]
    return list(documents)


def _compose(text: str) -> list[Node]:
    undecodable = _SURROGATE.search(text)  # bytes that are not UTF-8, kept as surrogates
    if undecodable is not None:
        byte = ord(undecodable.group()) & 0xFF
        raise Unparsable(line_at(text, undecodable.start()),
                         f"not valid YAML (not UTF-8: byte 0x{byte:02X})")
    try:
        return [n for n in yaml.compose_all(text, Loader=LOADER) if n is not None]
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        raise Unparsable(mark.line + 1 if mark else 0,
                         f"not valid YAML ({' '.join(str(error.problem or error).split())})"
                         ) from None
    except yaml.reader.ReaderError as error:  # a character YAML does not allow
        raise Unparsable(line_at(text, error.position),
                         f"not valid YAML (character U+{_code(error.character):04X} is not "
                         "allowed)") from None
    except yaml.YAMLError as error:
        raise Unparsable(0, f"not valid YAML ({' '.join(str(error).split())})") from None


def _code(character: int | str) -> int:
    return character if isinstance(character, int) else ord(character[:1] or "\0")


def pairs(node: Node) -> Iterator[tuple[ScalarNode, Node]]:
    if isinstance(node, MappingNode):
        for key, value in node.value:
            if isinstance(key, ScalarNode):
                yield key, value


def mappings(node: Node) -> Iterator[MappingNode]:
    """The mapping nodes of the tree, in document order: only they hold keys to read.

    Each node once: an alias is the node its anchor wrote, not a copy, and a file of a few
    hundred bytes whose aliases name lists of aliases (a "billion laughs") stands for
    billions of nodes when followed. Walked with a stack, so that deep nesting needs no
    recursion."""
    seen: set[int] = set()
    stack: list[Iterator[Node]] = [iter((node,))]
    while stack:
        current = next(stack[-1], None)
        if current is None:
            stack.pop()
        elif id(current) not in seen and isinstance(current, (MappingNode, SequenceNode)):
            seen.add(id(current))
            if isinstance(current, MappingNode):
                yield current
                stack.append(child for pair in current.value for child in pair)
            else:
                stack.append(iter(current.value))



def scalar(node: Node) -> str | None:
    return node.value if isinstance(node, ScalarNode) and isinstance(node.value, str) else None


def inner_span(node: ScalarNode) -> tuple[int, int] | None:
    """The span of a one-line scalar's text, inside its quotes; None for block scalars."""
    if node.style not in (None, "", "'", '"') or node.start_mark.line != node.end_mark.line:
        return None  # (libyaml's loader says "" for plain where PyYAML's says None)
    quoted = 1 if node.style else 0
    return node.start_mark.index + quoted, node.end_mark.index - quoted
