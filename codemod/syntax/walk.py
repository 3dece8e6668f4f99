"""Walking LibCST trees faster than LibCST's visitors do.

A LibCST visitor rebuilds every node it passes, whitespace and punctuation included, and
checks each result against an abstract base class: for the statements the rewriter visits,
that was most of the cost of migrating a file. These walks enter only the fields that can hold
code (never whitespace, commas or parentheses), in the order LibCST itself visits them (learnt
once per node type, so positions still count in source order), and rebuild a node only when
one of its children changed.

A visitor here is any object with `on_visit(node) -> bool` (enter the children?) and
`on_leave(original, updated)`, which returns the node to use (or `REMOVE`) in `transform` and
is called for its side effects in `walk`.
"""

from __future__ import annotations

from typing import Any, Protocol

import libcst as cst

REMOVE = cst.RemovalSentinel.REMOVE

# Fields that never hold code: whitespace, punctuation, operators, comments, flags.
_NOT_CODE = frozenset({
    "lpar", "rpar", "comma", "dot", "semicolon", "equal", "colon", "first_colon",
    "second_colon", "star", "star_tok", "leading_lines", "lines_after_decorators", "header",
    "footer", "newline", "trailing_whitespace", "lbracket", "rbracket", "lbrace", "rbrace",
    "lsqb", "rsqb", "asynchronous", "operator", "arrow", "walrus", "indent",
    "encoding", "default_indent", "default_newline", "has_trailing_newline", "prefix",
    "start", "end", "quote", "value_quote",
})
_SCALARS = frozenset({str, bool, int, cst.MaybeSentinel})
_FIELDS: dict[type, tuple[str, ...]] = {}


class Visitor(Protocol):
    def on_visit(self, node: cst.CSTNode) -> bool: ...

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> Any: ...


class _Order(cst.CSTVisitor):
    """Records the fields LibCST visits on one node, in its order, without going deeper."""

    def __init__(self, root: cst.CSTNode) -> None:
        super().__init__()
        self.root = root
        self.fields: list[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return node is self.root

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if node is self.root:
            self.fields.append(attribute)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass


def code_fields(node: cst.CSTNode) -> tuple[str, ...]:
    kind = type(node)
    fields = _FIELDS.get(kind)
    if fields is None:
        order = _Order(node)
        node.visit(order)
        fields = _FIELDS[kind] = tuple(
            name for name in order.fields
            if name not in _NOT_CODE and not name.startswith("whitespace"))
    return fields


def walk(node: cst.CSTNode, visitor: Visitor) -> None:
    """Visit `node` and what it contains, reading only."""
    if visitor.on_visit(node):
        for name in _FIELDS.get(type(node)) or code_fields(node):
            value = getattr(node, name)
            kind = value.__class__
            if kind is tuple or kind is list:
                for item in value:
                    walk(item, visitor)
            elif value is not None and kind not in _SCALARS:
                walk(value, visitor)
    visitor.on_leave(node, node)


def transform(node: cst.CSTNode, visitor: Visitor) -> Any:
    """Visit `node` bottom-up, replacing what `on_leave` returns; untouched nodes are kept,
    not copied."""
    updated = node
    if visitor.on_visit(node):
        changes: dict[str, Any] = {}
        for name in _FIELDS.get(type(node)) or code_fields(node):
            value = getattr(node, name)
            kind = value.__class__
            if kind is tuple or kind is list:
                items: list[Any] = []
                changed = False
                for item in value:
                    new = transform(item, visitor)
                    if new is not item:
                        changed = True
                    if isinstance(new, cst.FlattenSentinel):
                        items.extend(new)
                    elif new is not REMOVE:
                        items.append(new)
                if changed:
                    changes[name] = tuple(items)
            elif value is not None and kind not in _SCALARS:
                new = transform(value, visitor)
                if new is REMOVE:
                    raise TypeError(f"{type(value).__name__} cannot be removed from "
                                    f"{type(node).__name__}.{name}")
                if new is not value:
                    changes[name] = new
        if changes:
            updated = node.with_changes(**changes)
    return visitor.on_leave(node, updated)
