"""What `neuron_migrate.analysis.flow` must know of a file before its walk, gathered in one
pass over the tree: the functions and classes (a call above its `def` is followed too), the
attribute and item names stored anywhere, and the calls under each test's branches (a test
whose branch picks the device marks the comparisons in it).

One iterative depth-first walk replaces the several `ast.walk`s this took: the walk visits
every node `ast.walk` visits except the ones that can hold nothing asked for (a load or store
context, an operator, an import's names), so it finds the same things. Depth first, the calls
under a node are a contiguous run of `calls`, which lets the builder ask "does a call in
this branch pick the device?" without walking the branch again for every test around it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

__all__ = ["DEFAULTS", "OPTION", "Index", "definitions", "index_file", "option_dest"]

OPTION = frozenset({"add_argument"})
DEFAULTS = frozenset({"set_defaults"})

_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "name", "arg", "kind", "level",
                          "module", "type_comment", "is_async", "conversion", "simple", "rest",
                          "kwd_attrs", "tag", "asname"})
"""Fields that hold a string, a number, a context or an operator: nothing the walk asks for."""
_FIELDS: dict[type, tuple[str, ...]] = {}


@dataclass
class Index:
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=list)
    classes: list[ast.ClassDef] = field(default_factory=list)
    attributes: set[str] = field(default_factory=set)
    calls: list[ast.Call] = field(default_factory=list)  # in depth-first order
    # an `if`, `while`, conditional expression or `case` (by id) -> the run of `calls` in
    # its branches (its test or guard excluded)
    branches: dict[int, tuple[int, int]] = field(default_factory=dict)


def child_fields(kind: type) -> tuple[str, ...]:
    """The fields of a node type that can hold other nodes, in `_fields` order (the order
    `ast.iter_child_nodes` yields them)."""
    found = _FIELDS.get(kind)
    if found is None:
        found = _FIELDS[kind] = tuple(
            name for name in getattr(kind, "_fields", ())
            if name not in _LEAF_FIELDS
            and not (name == "value" and kind in (ast.Constant, ast.MatchSingleton))
            and not (name == "names" and kind in (ast.Import, ast.ImportFrom, ast.Global,
                                                  ast.Nonlocal)))
    return found


def children(node: ast.AST) -> list[ast.AST]:
    """`ast.iter_child_nodes(node)` without contexts and operators, as a list: the walk's
    hot loop, at a fraction of the generator's cost."""
    found: list[ast.AST] = []
    for name in child_fields(type(node)):
        value = getattr(node, name, None)
        if type(value) is list:
            found.extend(v for v in value if isinstance(v, ast.AST))
        elif isinstance(value, ast.AST):
            found.append(value)
    return found


_BRANCHED = {ast.If: "test", ast.While: "test", ast.IfExp: "test", ast.match_case: "guard"}
"""The field after which a node's branches start, for the nodes whose test may be marked."""


def index_file(tree: ast.Module) -> Index:
    """Everything `Index` holds, in one walk (and `definitions`' walk over statements)."""
    found = definitions(tree)
    stack: list[ast.AST] = [tree]
    pop, push = stack.pop, stack.append
    calls, branches, attributes = found.calls, found.branches, found.attributes
    special, reversed_fields, leaves = _SPECIAL, _REVERSED, _LEAVES
    while stack:
        node = pop()
        kind = type(node)
        what = special.get(kind)
        split = None
        if what is not None:
            if what == _ATTRIBUTE:
                if type(node.ctx) is ast.Store:  # type: ignore[attr-defined]
                    attributes.add(node.attr)  # type: ignore[attr-defined]
            elif what == _CALL:
                calls.append(node)  # type: ignore[arg-type]
                if type(node.func) is ast.Attribute:  # type: ignore[attr-defined]
                    _note(found, node, kind)
            elif what == _NOTE:
                _note(found, node, kind)
            elif what == _MARKS:
                key = id(node.node)  # type: ignore[attr-defined]
                if node.end:  # type: ignore[attr-defined]
                    branches[key] = (branches[key][0], len(calls))
                else:  # the test is walked: the branches' calls start here
                    branches[key] = (len(calls), -1)
                continue
            else:
                split = _BRANCHED[kind]
                push(_Mark(node, True))
        fields = reversed_fields.get(kind)
        if fields is None:
            fields = reversed_fields[kind] = tuple(reversed(child_fields(kind)))
        for name in fields:
            if name == split:
                push(_Mark(node, False))  # popped after the test, before the branches
            value = getattr(node, name, None)
            if type(value) is list:
                for item in reversed(value):
                    if item is not None and type(item) not in leaves:
                        push(item)
            elif value is not None and type(value) not in leaves:
                push(value)
    return found


def definitions(tree: ast.Module, found: Index | None = None) -> Index:
    """Functions and classes in the order `ast.walk` (breadth first) meets them, the order
    the builder always used. They sit only in statement lists, so the walk goes through
    those alone."""
    found = found if found is not None else Index()
    queue: list[ast.AST] = [tree]
    for node in queue:  # grows while read: breadth first
        kind = type(node)
        if kind is ast.ClassDef:
            _note(found, node, kind)
            found.classes.append(node)  # type: ignore[arg-type]
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            found.functions.append(node)  # type: ignore[arg-type]
        for name in _BODIES.get(kind, ()):
            queue.extend(getattr(node, name))
    return found


_BODIES: dict[type, tuple[str, ...]] = {
    ast.Module: ("body",), ast.FunctionDef: ("body",), ast.AsyncFunctionDef: ("body",),
    ast.ClassDef: ("body",), ast.If: ("body", "orelse"), ast.While: ("body", "orelse"),
    ast.For: ("body", "orelse"), ast.AsyncFor: ("body", "orelse"), ast.With: ("body",),
    ast.AsyncWith: ("body",), ast.Try: ("body", "handlers", "orelse", "finalbody"),
    ast.ExceptHandler: ("body",), ast.Match: ("cases",), ast.match_case: ("body",),
}
"""The fields that hold statements (or the handlers and cases that hold them), in `_fields`
order."""
if hasattr(ast, "TryStar"):  # Python 3.11+
    _BODIES[ast.TryStar] = _BODIES[ast.Try]


class _Mark:
    """A stack entry that closes a node's test, or (`end`) its branches."""

    __slots__ = ("end", "node")

    def __init__(self, node: ast.AST, end: bool) -> None:
        self.node, self.end = node, end


_ATTRIBUTE, _CALL, _NOTE, _BRANCH, _MARKS = 1, 2, 3, 4, 5
_SPECIAL: dict[type, int] = {
    _Mark: _MARKS, ast.Call: _CALL, ast.Attribute: _ATTRIBUTE,
    ast.Subscript: _NOTE, ast.Dict: _NOTE,
    ast.If: _BRANCH, ast.While: _BRANCH, ast.IfExp: _BRANCH, ast.match_case: _BRANCH,
}
_REVERSED: dict[type, tuple[str, ...]] = {}
_LEAVES = frozenset({ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del, ast.alias,
                     ast.Pass, ast.Break, ast.Continue, ast.Global, ast.Nonlocal})
"""Nodes with nothing under them that the walk asks for: never pushed."""


def _note(found: Index, node: ast.AST, kind: type) -> None:
    """The names a value can be stored under: attributes, items, argparse destinations."""
    if kind is ast.Attribute:
        if type(node.ctx) is ast.Store:  # type: ignore[attr-defined]
            found.attributes.add(node.attr)  # type: ignore[attr-defined]
    elif kind is ast.Subscript:
        index_ = node.slice  # type: ignore[attr-defined]
        if type(node.ctx) is ast.Store and isinstance(index_, ast.Constant) and \
                isinstance(index_.value, str):  # type: ignore[attr-defined]
            found.attributes.add(index_.value)  # `kwargs["device_type"] = ...`
    elif kind is ast.Call:
        func = node.func  # type: ignore[attr-defined]
        if isinstance(func, ast.Attribute):
            if func.attr in OPTION:
                dest = option_dest(node)  # type: ignore[arg-type]
                if dest is not None:
                    found.attributes.add(dest)
            elif func.attr in DEFAULTS:
                found.attributes.update(k.arg for k in node.keywords if k.arg)  # type: ignore[attr-defined]
    elif kind is ast.Dict:
        found.attributes.update(k.value for k in node.keys  # type: ignore[attr-defined]
                                if isinstance(k, ast.Constant) and isinstance(k.value, str))
    elif kind is ast.ClassDef:
        for stmt in node.body:  # type: ignore[attr-defined]
            found.attributes.update(_stored_names(stmt))


def _stored_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []


def option_dest(node: ast.Call) -> str | None:
    """The attribute argparse stores an option in: `dest=`, else the first long flag, else
    the first flag or the positional name."""
    for keyword in node.keywords:
        if keyword.arg == "dest":
            value = keyword.value
            return value.value if isinstance(value, ast.Constant) and \
                isinstance(value.value, str) else None
    flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not flags or len(flags) != len(node.args):
        return None
    chosen = next((f for f in flags if f.startswith("--")), flags[0])
    return chosen.lstrip("-").replace("-", "_") or None
