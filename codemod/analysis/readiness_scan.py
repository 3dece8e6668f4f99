"""The one walk over a file's `ast` that `readiness_facts.facts_of` reads everything from.

The readiness facts used to come from `ast.walk` (every node, through generators) plus a
walk per function and per loop to find which of them call `backward()`. This walk visits
each node once, statements by recursion (which knows the scope and the loop it is in) and
expressions with a plain stack over the fields that can hold a call (not names, operators
or load/store contexts), and it files each call under the function or loop body it is
directly in. That is what `trains` and `steps` asked of `_shallow` (code in a nested
function, class, lambda or loop, and a loop's header and `else`, do not count), answered
for every body at once.

What `ast.walk` decided by its order (breadth first: a later import of a name wins, the
order of a name's functions and assignments) is kept: statements are recorded with their
depth in the tree, and `Scan.statements` sorts them the way `ast.walk` meets them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field

_NOT_NODES = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "name", "names", "kind",
                        "conversion", "is_async", "type_comment", "simple", "level", "module",
                        "kwd_attrs", "type_ignores"})
"""Fields that hold no call: identifiers, flags, operators, load/store contexts (a `name`
field is an identifier, or in `type X = ...` a plain `Name`)."""


class _Children(dict):  # type: ignore[type-arg]
    """Node type -> the fields of it that may hold a call. Anything that is not a node (an
    identifier in a list, a None in `Dict.keys`) has none."""

    def __missing__(self, kind: type) -> tuple[str, ...]:
        fields: tuple[str, ...] = ()
        if isinstance(kind, type) and issubclass(kind, ast.AST) and kind is not ast.Constant:
            fields = tuple(f for f in kind._fields if f not in _NOT_NODES)
        self[kind] = fields
        return fields


_CHILDREN = _Children()
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_RECORDED = (ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef,
             ast.Assign, ast.AnnAssign)
_TRY = tuple(t for t in (ast.Try, getattr(ast, "TryStar", None)) if t is not None)


@dataclass
class Body:
    """The calls directly in a function's or loop's body (`_shallow(body, loops=False)`)."""

    calls: list[ast.Call] = field(default_factory=list)
    trains: bool = False
    """One of them is `x.backward(...)`."""


@dataclass
class Scan:
    calls: list[ast.Call] = field(default_factory=list)
    """Every call of the file (in no particular order)."""
    named: dict[str, list[ast.Call]] = field(default_factory=dict)
    """A call's callee name (`f` in `f(...)`, `m` in `x.m(...)`) -> the calls."""
    bodies: dict[int, Body] = field(default_factory=dict)
    """id of a function or loop -> its body's calls."""
    loops: list[ast.For | ast.AsyncFor | ast.While] = field(default_factory=list)
    backward: bool = False
    recorded: list[tuple[int, ast.stmt]] = field(default_factory=list)

    def statements(self) -> list[ast.stmt]:
        """Imports, classes, functions and assignments in `ast.walk`'s order: by depth, then
        in source order (what a breadth-first walk does within one depth)."""
        return [s for _, s in sorted(self.recorded, key=lambda item: item[0])]


def scan(tree: ast.Module) -> Scan:
    found = Scan()
    _Scanner(found).block(tree.body, None, 1)
    return found


class _Scanner:
    def __init__(self, found: Scan) -> None:
        self.found = found

    def block(self, body: Iterable[ast.stmt], owner: Body | None, depth: int) -> None:
        for statement in body:
            self.statement(statement, owner, depth)

    def statement(self, node: ast.stmt, owner: Body | None, depth: int) -> None:
        if isinstance(node, _RECORDED):
            self.found.recorded.append((depth, node))
        if isinstance(node, _FUNCTIONS):
            headers: list[ast.AST] = [*node.decorator_list, node.args]
            if node.returns is not None:
                headers.append(node.returns)
            headers.extend(getattr(node, "type_params", ()))
            self.expressions(headers, None)
            self.block(node.body, self.body(node), depth + 1)
        elif isinstance(node, ast.ClassDef):
            self.expressions([*node.decorator_list, *node.bases, *node.keywords,
                              *getattr(node, "type_params", ())], None)
            self.block(node.body, None, depth + 1)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            self.found.loops.append(node)
            self.expressions([node.test] if isinstance(node, ast.While)
                             else [node.target, node.iter], None)
            self.block(node.body, self.body(node), depth + 1)
            self.block(node.orelse, None, depth + 1)
        elif isinstance(node, ast.If):
            self.expressions([node.test], owner)
            self.block(node.body, owner, depth + 1)
            self.block(node.orelse, owner, depth + 1)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            self.expressions(node.items, owner)
            self.block(node.body, owner, depth + 1)
        elif isinstance(node, _TRY):
            self.block(node.body, owner, depth + 1)  # type: ignore[attr-defined]
            for handler in node.handlers:  # type: ignore[attr-defined]
                if handler.type is not None:
                    self.expressions([handler.type], owner)
                self.block(handler.body, owner, depth + 2)
            self.block(node.orelse, owner, depth + 1)  # type: ignore[attr-defined]
            self.block(node.finalbody, owner, depth + 1)  # type: ignore[attr-defined]
        elif isinstance(node, ast.Match):
            self.expressions([node.subject], owner)
            for case in node.cases:
                self.expressions([case.pattern] if case.guard is None
                                 else [case.pattern, case.guard], owner)
                self.block(case.body, owner, depth + 2)
        else:  # a simple statement: all of it is expressions
            self.expressions([node], owner)

    def body(self, node: ast.AST) -> Body:
        body = self.found.bodies[id(node)] = Body()
        return body

    def expressions(self, roots: Iterable[ast.AST], owner: Body | None) -> None:
        """Every call under `roots`; those outside lambdas are `owner`'s too."""
        found = self.found
        calls, named = found.calls, found.named
        children = _CHILDREN
        call_type, lambda_type = ast.Call, ast.Lambda
        attribute_type, name_type = ast.Attribute, ast.Name
        lambdas: list[ast.Lambda] = []
        pending = list(roots)
        pop, push, extend = pending.pop, pending.append, pending.extend
        while pending:
            node = pop()
            kind = type(node)
            if kind is call_type:
                calls.append(node)  # type: ignore[arg-type]
                func = node.func  # type: ignore[attr-defined]
                func_type = type(func)
                if func_type is attribute_type:
                    callee = func.attr
                    if callee == "backward":
                        found.backward = True
                        if owner is not None:
                            owner.trains = True
                elif func_type is name_type:
                    callee = func.id
                else:
                    callee = None
                if callee is not None:
                    group = named.get(callee)
                    if group is None:
                        named[callee] = [node]  # type: ignore[list-item]
                    else:
                        group.append(node)  # type: ignore[arg-type]
                if owner is not None:
                    owner.calls.append(node)  # type: ignore[arg-type]
            elif kind is lambda_type:
                lambdas.append(node)  # type: ignore[arg-type]
                continue
            for name in children[kind]:
                value = getattr(node, name)
                if type(value) is list:
                    extend(value)
                elif value is not None:
                    push(value)
        for function in lambdas:  # a nested scope: its calls are no body's
            self.expressions([function.args, function.body], None)
