"""Every node of a stdlib `ast` tree, found in a fraction of `ast.walk`'s time.

`ast.walk` runs two generators per node and asks every field of every node whether it holds a
node, the names and numbers included; it also yields the expression contexts (`Load`,
`Store`, `Del`), one in every name, attribute and subscript, which say nothing a reader of
the tree does not read from the node holding them. Questions about a whole file (every name it
binds, each node's parent) go through a plain loop here, which reads only the fields that can
hold nodes, and leaves the contexts out.
"""

from __future__ import annotations

import ast
import bisect
import collections
import functools
from collections.abc import Iterator

_SCALARS = frozenset({"ctx", "id", "attr", "arg", "module", "level", "asname", "is_async",
                      "conversion", "type_comment", "kind", "tag"})
"""Fields that never hold a node (their values are names, numbers or flags), and `ctx`, whose
node is left out."""
_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: ()}


def _fields(kind: type) -> tuple[str, ...]:
    found = _FIELDS.get(kind)
    if found is None:
        found = _FIELDS[kind] = tuple(name for name in kind._fields  # type: ignore[attr-defined]
                                      if name not in _SCALARS)
    return found


def every_node(root: ast.AST) -> list[ast.AST]:
    """`root` and every node under it, expression contexts left out, in no set order."""
    found: list[ast.AST] = []
    pending: list[ast.AST] = [root]
    while pending:
        node = pending.pop()
        found.append(node)
        _hold_children(node, pending)
    return found


def in_walk_order(root: ast.AST) -> Iterator[ast.AST]:
    """The nodes `ast.walk(root)` yields, in its order (breadth first, fields in their
    declared order), expression contexts left out: for a reader whose answer depends on
    which node comes first."""
    pending = collections.deque([root])
    while pending:
        node = pending.popleft()
        _hold_children(node, pending)
        yield node


@functools.lru_cache(maxsize=4)
def walked(tree: ast.Module) -> tuple[ast.AST, ...]:
    """Every node of a module in `ast.walk`'s order, expression contexts left out, found once
    per module: several analyses and rules each look through the whole module once per file
    (its imports, classes, calls, names), and each of those walks cost as much as the others
    together cost to read a list. The cache holds the trees, so no id is reused meanwhile."""
    return tuple(in_walk_order(tree))


def _hold_children(node: ast.AST, pending: list[ast.AST] | collections.deque[ast.AST],
                   node_type: type = ast.AST) -> None:
    """Add the nodes `node` holds to `pending`, in the order of its fields."""
    names = _FIELDS.get(type(node))
    for name in _fields(type(node)) if names is None else names:
        value = getattr(node, name, None)
        if type(value) is list:
            pending.extend(item for item in value if isinstance(item, node_type))
        elif isinstance(value, node_type):
            pending.append(value)


def parents_by_id(root: ast.AST) -> dict[int, ast.AST]:
    """The node holding each node under `root`, by id (expression contexts, and operators,
    which the parser shares between nodes, have none that means anything)."""
    held: dict[int, ast.AST] = {}
    pending: list[ast.AST] = [root]
    fields, known, node_type = _FIELDS, _fields, ast.AST
    while pending:
        node = pending.pop()
        names = fields.get(type(node))
        for name in known(type(node)) if names is None else names:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, node_type):
                        held[id(item)] = node
                        pending.append(item)
            elif isinstance(value, node_type):
                held[id(value)] = node
                pending.append(value)
    return held


_BODIES = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})


def nodes_on_lines(body: list[ast.stmt], lines: list[int]) -> Iterator[ast.AST]:
    """The nodes of the statements in `body` (and in theirs) that span one of the sorted
    `lines`, expression contexts left out: every node written on those lines is among them.
    A statement spans its decorators' lines; an `except` clause is read as a statement."""
    for statement in body:
        first = statement.lineno
        for decorator in getattr(statement, "decorator_list", ()):
            first = min(first, decorator.lineno)
        if not _meets(lines, first, statement.end_lineno or statement.lineno):
            continue
        yield statement
        for name in _fields(type(statement)):
            value = getattr(statement, name, None)
            if name in _BODIES:
                for item in value:  # type: ignore[union-attr]
                    if isinstance(item, ast.stmt):
                        yield from nodes_on_lines([item], lines)
                    elif isinstance(item, ast.ExceptHandler):
                        yield from _clause(item, lines)
                    else:  # a match case: no position of its own
                        yield item
                        for part in (item.pattern, item.guard):
                            if part is not None:
                                yield from every_node(part)
                        yield from nodes_on_lines(item.body, lines)
            elif type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        yield from every_node(item)
            elif isinstance(value, ast.AST):
                yield from every_node(value)


def _clause(handler: ast.ExceptHandler, lines: list[int]) -> Iterator[ast.AST]:
    if _meets(lines, handler.lineno, handler.end_lineno or handler.lineno):
        yield handler
        if handler.type is not None:
            yield from every_node(handler.type)
        yield from nodes_on_lines(handler.body, lines)


def _meets(lines: list[int], first: int, last: int) -> bool:
    index = bisect.bisect_left(lines, first)
    return index < len(lines) and lines[index] <= last
