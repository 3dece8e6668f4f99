"""Walking the statements of a tree and nothing else.

Expressions never hold a statement, so a question about statements alone (the imports of a
file, its `global` declarations) need not enter them: most of a tree's nodes are expressions.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

BLOCKS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})
"""The fields that hold statements, or the except handlers and match cases that hold them."""


def statements(body: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """The statements of `body` and of every block inside them (handlers and cases included),
    level by level and each node's blocks in field order, which is the order `ast.walk`
    meets them in: where the later of two imports of a name wins, the answer is the same."""
    level = list(body)
    while level:
        below: list[ast.AST] = []
        for node in level:
            yield node
            for field in node._fields:
                if field in BLOCKS:
                    value = getattr(node, field, None)
                    if isinstance(value, list):
                        below.extend(value)
        level = below
