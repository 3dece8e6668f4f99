"""Pairing LibCST statements with `ast` statements.

The two trees agree statement for statement (a LibCST line of `a; b` is two `ast` statements),
so the rewriter walks them side by side: `paired_units` yields the pairs of a block,
`map_blocks` applies a function to every block of a compound statement.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import libcst as cst

from neuron_migrate.engine.mask import hidden_units, is_placeholder

_Node = TypeVar("_Node", bound=cst.CSTNode)
SuiteFn = Callable[[cst.BaseSuite, list[ast.stmt]], cst.BaseSuite]
ElifFn = Callable[[cst.If, ast.If], cst.If]


class StructureMismatch(Exception):
    """LibCST and `ast` disagree about the statements of a file (a bug, never user error)."""


def paired_units(statements: Sequence[cst.CSTNode], body: list[ast.stmt],
           suite: bool = False) -> Iterator[tuple[cst.CSTNode, ast.stmt, bool]]:
    """(LibCST unit, ast statement, whether the unit is alone on its line, or can be); the
    statements a placeholder hides are skipped (none is on the path)."""
    position = 0
    for statement in statements:
        hidden = hidden_units(statement)
        if hidden:
            position += hidden
            continue
        line = isinstance(statement, cst.SimpleStatementLine)
        parts = statement.body if line else [statement]
        for part in parts:
            if position >= len(body):
                raise StructureMismatch("more LibCST statements than ast statements")
            check_pair(part, body[position])
            yield part, body[position], (line and len(parts) == 1) or suite
            position += 1
    if position != len(body):
        raise StructureMismatch("fewer LibCST statements than ast statements")


def unit_count(statement: cst.CSTNode) -> int:
    """How many `ast` statements a LibCST statement stands for."""
    if isinstance(statement, cst.SimpleStatementLine):
        return hidden_units(statement) or len(statement.body)
    return 1


_SAME = {"Del": "Delete"}
_PAIRS: set[tuple[type, type]] = set()  # the pairs of node types found to agree


def check_pair(node: cst.CSTNode, unit: ast.stmt) -> None:
    if (type(node), type(unit)) in _PAIRS or is_placeholder(node):
        return
    expected = _SAME.get(type(node).__name__, type(node).__name__)
    actual = type(unit).__name__.removeprefix("Async")
    if expected != actual:
        raise StructureMismatch(f"LibCST {type(node).__name__} paired with ast {actual} "
                                f"at line {unit.lineno}")
    _PAIRS.add((type(node), type(unit)))


def _with(node: _Node, **changes: object) -> _Node:
    """`node.with_changes(...)`, or `node` itself when nothing changes (while planning, no
    block changes)."""
    if all(_same(getattr(node, name), value) for name, value in changes.items()):
        return node
    return node.with_changes(**changes)


def _same(old: object, new: object) -> bool:
    if old is new:
        return True
    return (isinstance(old, (list, tuple)) and isinstance(new, (list, tuple))
            and len(old) == len(new) and all(a is b for a, b in zip(old, new)))


def _else(node: cst.Else | None, body: list[ast.stmt], suite: SuiteFn) -> cst.Else | None:
    return _with(node, body=suite(node.body, body)) if node is not None else None


def map_blocks(node: cst.BaseCompoundStatement, unit: ast.stmt, suite: SuiteFn,
                elif_: ElifFn) -> cst.BaseCompoundStatement:
    """Apply `suite` to every block of a compound statement (and `elif_` to an elif)."""
    if isinstance(node, cst.If):
        assert isinstance(unit, ast.If)
        orelse = node.orelse
        if isinstance(orelse, cst.If):
            orelse = elif_(orelse, unit.orelse[0])  # type: ignore[arg-type]
        else:
            orelse = _else(orelse, unit.orelse, suite)
        return _with(node, body=suite(node.body, unit.body), orelse=orelse)
    if isinstance(node, (cst.For, cst.While)):
        return _with(node, body=suite(node.body, unit.body),  # type: ignore[attr-defined]
                     orelse=_else(node.orelse, unit.orelse, suite))  # type: ignore[attr-defined]
    if isinstance(node, (cst.Try, cst.TryStar)):
        handlers = [_with(h, body=suite(h.body, a.body))
                    for h, a in zip(node.handlers, unit.handlers)]  # type: ignore[attr-defined]
        final = node.finalbody
        return _with(
            node,
            body=suite(node.body, unit.body),  # type: ignore[attr-defined]
            handlers=handlers,
            orelse=_else(node.orelse, unit.orelse, suite),  # type: ignore[attr-defined]
            finalbody=_with(final, body=suite(final.body, unit.finalbody))  # type: ignore[attr-defined]
            if final is not None else None,
        )
    if isinstance(node, cst.Match):
        cases = [_with(c, body=suite(c.body, a.body))
                 for c, a in zip(node.cases, unit.cases)]  # type: ignore[attr-defined]
        return _with(node, cases=cases)
    return _with(node, body=suite(node.body, unit.body))  # type: ignore[attr-defined]
