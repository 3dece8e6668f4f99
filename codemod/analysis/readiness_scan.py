"""The one walk over a file's `ast` that `readiness_facts.facts_of` reads everything from.

One walk, rather than `ast.walk` over every node (through generators) plus a walk per
function and per loop to find which of them call `backward()`, since each of those costs
about a walk of the tree. This walk visits each node once, statements by recursion (which knows the scope and the loop it is in) and
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
from collections.abc import Callable, Iterable
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


CHILDREN = _Children()
_RECORDED = frozenset({ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef,
                       ast.AsyncFunctionDef, ast.Assign, ast.AnnAssign})


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
    scanner = _Scanner(found)
    scanner.block(tree.body, scanner.loose, None, 1)
    for roots, owner in scanner.groups:
        scanner.expressions(roots, owner)
    return found


class _Scanner:
    """Statements first, by recursion (recording what `Scan.recorded` keeps); their
    expressions are gathered by the body they belong to and walked at the end, a few
    long walks rather than one per statement."""

    def __init__(self, found: Scan) -> None:
        self.found = found
        self.loose: list[ast.AST] = []
        """Expressions that are in no function's or loop's body (or not directly)."""
        self.groups: list[tuple[list[ast.AST], Body | None]] = [(self.loose, None)]

    def block(self, body: Iterable[ast.stmt], roots: list[ast.AST], owner: Body | None,
              depth: int) -> None:
        recorded = self.found.recorded
        for node in body:
            kind = type(node)
            if kind in _RECORDED:
                recorded.append((depth, node))
            compound = _COMPOUND.get(kind)
            if compound is None:
                roots.append(node)  # a simple statement: all of it is expressions
            else:
                compound(self, node, roots, owner, depth)

    def body(self, node: ast.AST) -> tuple[list[ast.AST], Body]:
        body = self.found.bodies[id(node)] = Body()
        roots: list[ast.AST] = []
        self.groups.append((roots, body))
        return roots, body

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, roots: list[ast.AST],
                 owner: Body | None, depth: int) -> None:
        self.loose.extend(node.decorator_list)
        self.loose.append(node.args)
        if node.returns is not None:
            self.loose.append(node.returns)
        self.loose.extend(getattr(node, "type_params", ()))
        self.block(node.body, *self.body(node), depth + 1)

    def cls(self, node: ast.ClassDef, roots: list[ast.AST], owner: Body | None,
            depth: int) -> None:
        self.loose.extend((*node.decorator_list, *node.bases, *node.keywords,
                           *getattr(node, "type_params", ())))
        self.block(node.body, self.loose, None, depth + 1)

    def loop(self, node: ast.For | ast.AsyncFor | ast.While, roots: list[ast.AST],
             owner: Body | None, depth: int) -> None:
        self.found.loops.append(node)
        if isinstance(node, ast.While):
            self.loose.append(node.test)
        else:
            self.loose.extend((node.target, node.iter))
        self.block(node.body, *self.body(node), depth + 1)
        self.block(node.orelse, self.loose, None, depth + 1)

    def branch(self, node: ast.If, roots: list[ast.AST], owner: Body | None,
               depth: int) -> None:
        roots.append(node.test)
        self.block(node.body, roots, owner, depth + 1)
        self.block(node.orelse, roots, owner, depth + 1)

    def with_(self, node: ast.With | ast.AsyncWith, roots: list[ast.AST], owner: Body | None,
              depth: int) -> None:
        roots.extend(node.items)
        self.block(node.body, roots, owner, depth + 1)

    def try_(self, node: ast.Try, roots: list[ast.AST], owner: Body | None,
             depth: int) -> None:
        self.block(node.body, roots, owner, depth + 1)
        for handler in node.handlers:
            if handler.type is not None:
                roots.append(handler.type)
            self.block(handler.body, roots, owner, depth + 2)
        self.block(node.orelse, roots, owner, depth + 1)
        self.block(node.finalbody, roots, owner, depth + 1)

    def match(self, node: ast.Match, roots: list[ast.AST], owner: Body | None,
              depth: int) -> None:
        roots.append(node.subject)
        for case in node.cases:
            roots.append(case.pattern)
            if case.guard is not None:
                roots.append(case.guard)
            self.block(case.body, roots, owner, depth + 2)

    def expressions(self, roots: Iterable[ast.AST], owner: Body | None) -> None:
        """Every call under `roots`; those outside lambdas are `owner`'s too."""
        found = self.found
        calls, named = found.calls, found.named
        children = CHILDREN
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
        if lambdas:  # nested scopes: their calls are no body's
            self.expressions([part for f in lambdas for part in (f.args, f.body)], None)


_COMPOUND: dict[type, Callable[..., None]] = {
    ast.FunctionDef: _Scanner.function, ast.AsyncFunctionDef: _Scanner.function,
    ast.ClassDef: _Scanner.cls,
    ast.For: _Scanner.loop, ast.AsyncFor: _Scanner.loop, ast.While: _Scanner.loop,
    ast.If: _Scanner.branch, ast.With: _Scanner.with_, ast.AsyncWith: _Scanner.with_,
    ast.Try: _Scanner.try_, ast.Match: _Scanner.match,
}
"""The statements that hold statements (any other is expressions only)."""
if hasattr(ast, "TryStar"):
    _COMPOUND[ast.TryStar] = _Scanner.try_
