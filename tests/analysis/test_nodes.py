"""The fast whole-tree walks find what `ast.walk` finds, contexts aside."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import pytest

from neuron_migrate.analysis.nodes import (every_node, in_walk_order, nodes_on_lines, parents_by_id,
                                           walked)
from tests.conftest import FIXTURES, SOURCES, source_id

_SHARED = (ast.expr_context, ast.operator, ast.boolop, ast.cmpop, ast.unaryop)
"""Nodes the parser shares between their holders: none has one parent."""
EVERY_SYNTAX = '''
import a.b as c
from .d import (e as f, g)
from h import *
async def i(j, /, k=1, *l, m: int = 2, **n) -> "o":
    global p
    async with q as (r, s), t:
        async for u in v:
            await w
    return [x async for x in y if x]
@dec(1)
class C(B, metaclass=M):
    def f(self):
        nonlocal_value = lambda z=1, *a, **k: z
        try:
            pass
        except (E, F) as err:
            raise G from err
        else:
            del self.x[1:2, ::3]
        finally:
            x: list[int] = {**d, 1: 2}
        match self:
            case [1, *rest] | {"k": v, **kw} | Point(x=0, y=_) as whole if whole:
                pass
            case None:
                yield from f"{x!r:>{w}}"
        return (a if b else c) + -d * e @ f < g is not h, not i and j or k, {1, 2}, ...
'''


def _walked(tree: ast.AST) -> collections.Counter[int]:
    return collections.Counter(id(n) for n in ast.walk(tree)
                               if not isinstance(n, ast.expr_context))


@pytest.mark.parametrize("source", SOURCES[::7], ids=source_id)
def test_every_node_is_what_ast_walk_yields_without_contexts(source: Path) -> None:
    tree = ast.parse(source.read_bytes())
    assert collections.Counter(id(n) for n in every_node(tree)) == _walked(tree)


def test_every_node_of_every_kind_of_syntax() -> None:
    tree = ast.parse(EVERY_SYNTAX)
    assert collections.Counter(id(n) for n in every_node(tree)) == _walked(tree)
    assert not any(isinstance(n, ast.expr_context) for n in every_node(tree))
    inner = tree.body[-1].body[0]  # type: ignore[attr-defined]
    assert collections.Counter(id(n) for n in every_node(inner)) == _walked(inner)


def _walk_order(tree: ast.AST) -> list[int]:
    return [id(n) for n in ast.walk(tree) if not isinstance(n, ast.expr_context)]


@pytest.mark.parametrize("source", SOURCES[::7], ids=source_id)
def test_walk_order_is_ast_walk_s_without_contexts(source: Path) -> None:
    tree = ast.parse(source.read_bytes())
    assert [id(n) for n in in_walk_order(tree)] == _walk_order(tree)


def test_walk_order_of_every_kind_of_syntax() -> None:
    tree = ast.parse(EVERY_SYNTAX)
    assert [id(n) for n in in_walk_order(tree)] == _walk_order(tree)


def test_a_module_s_nodes_are_walked_once_in_ast_walk_s_order() -> None:
    tree = ast.parse(EVERY_SYNTAX)
    assert [id(n) for n in walked(tree)] == _walk_order(tree)
    assert walked(tree) is walked(tree)  # asked by several analyses of the file: kept
    other = ast.parse(EVERY_SYNTAX)
    assert [type(n) for n in walked(other)] == [type(n) for n in walked(tree)]
    assert walked(other)[0] is other and walked(tree)[0] is tree  # each module its own


@pytest.mark.parametrize("source", [*SOURCES[::7], *sorted((FIXTURES / "cuda").glob("*.py"))],
                         ids=source_id)
def test_each_node_s_parent_is_the_node_holding_it(source: Path) -> None:
    _same_parents(ast.parse(source.read_bytes()))


def test_each_node_s_parent_in_every_kind_of_syntax() -> None:
    _same_parents(ast.parse(EVERY_SYNTAX))


def _same_parents(tree: ast.Module) -> None:
    expected = {id(child): node for node in ast.walk(tree)
                for child in ast.iter_child_nodes(node) if not isinstance(child, _SHARED)}
    found = parents_by_id(tree)
    assert {key: found.get(key) for key in expected} == expected
    assert set(found) - set(expected) <= {id(n) for n in ast.walk(tree)
                                          if isinstance(n, _SHARED)}


@pytest.mark.parametrize("source", SOURCES[::7], ids=source_id)
def test_the_nodes_on_some_lines_include_every_node_written_there(source: Path) -> None:
    _every_node_on_lines(ast.parse(source.read_bytes()))


def test_the_nodes_on_some_lines_in_every_kind_of_syntax() -> None:
    _every_node_on_lines(ast.parse(EVERY_SYNTAX))


def _every_node_on_lines(tree: ast.Module) -> None:
    last = max(getattr(n, "end_lineno", 0) or 0 for n in ast.walk(tree))
    for step in (3, 7):
        for start in range(step):
            lines = list(range(1 + start, last + 1, step))
            found = {id(n) for n in nodes_on_lines(tree.body, lines)}
            for node in every_node(tree):
                first = getattr(node, "lineno", None)
                if first is not None and any(first <= line <= node.end_lineno  # type: ignore[attr-defined]
                                             for line in lines):
                    assert id(node) in found, ast.dump(node)[:80]
            assert not any(isinstance(n, ast.expr_context) for n in nodes_on_lines(tree.body,
                                                                                   lines))
