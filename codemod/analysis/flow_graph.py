"""The graph under `neuron_migrate.analysis.flow`: union-find over keys (a literal, a name's binding, an
attribute name, a function's return value), and what each key records (its literals, names,
ends and sources), gathered into one `Flow` per set at the end."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from neuron_migrate.analysis.analyse import Analysis, Use
from neuron_migrate.analysis.scopes import Scope

Key = tuple[object, ...]


@dataclass(frozen=True)
class Source:
    """A value entering a flow from something the file does not show.

    `kind` is "expr" (an expression the flow does not follow: the rule judges `node`),
    "option" (a command-line option), "parameter" (a parameter of a function called from
    outside the file), "module" (a module-level name other modules can import) or "name" (a
    name bound outside the file, or by an import, loop or `with`)."""

    kind: str
    label: str
    line: int
    node: ast.AST | None = None
    scope: Scope | None = None
    owner: str = ""  # for "parameter": the function


@dataclass(eq=False)
class Flow:
    """Everything one value meets. `literals` are the interesting string literals in it (the
    ones a rule rewrites all together or not at all)."""

    literals: list[ast.expr] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    ends: list[Use] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    guards: list[int] = field(default_factory=list)  # lines of tests that pick the XLA device
    units: dict[int, ast.stmt] = field(default_factory=dict)  # each literal's statement, by id
    memo: dict[str, object] = field(default_factory=dict)  # a rule's verdict, worked out once

    def lines(self) -> list[int]:
        return sorted({n.lineno for n in self.literals})


@dataclass
class Record:
    literals: list[ast.expr] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    ends: list[Use] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    guards: list[int] = field(default_factory=list)
    units: dict[int, ast.stmt] = field(default_factory=dict)


@dataclass
class Function:
    node: ast.FunctionDef | ast.AsyncFunctionDef
    scope: Scope | None  # the function's own scope (None for an empty body)
    offset: int = 0  # 1 for methods: `self` is not passed
    called: bool = False
    escapes: bool = False  # referenced other than by a call: called from elsewhere
    returns: list[ast.Return] = field(default_factory=list)
    tuple_returns: set[int] = field(default_factory=set)
    whole_used: bool = False


class Graph:
    """The union-find and what its keys record; the walks over statements and values are
    its subclasses (`flow_values.Values`, `flow._Builder`)."""

    def __init__(self, analysis: Analysis, literal: Callable[[ast.expr], bool],
                 device_calls: frozenset[str]) -> None:
        self.analysis = analysis
        self.literal = literal
        self.device_calls = device_calls
        self.parent: dict[Key, Key] = {}
        self.records: dict[Key, Record] = {}
        self.fresh = 0
        self.functions: dict[int, list[Function]] = {}  # by id of the name's bindings list
        self.classes: dict[int, list[Function]] = {}  # a class's __init__, by the same
        self.methods: dict[str, list[Function]] = {}
        self.by_node: dict[int, Function] = {}
        self.attributes: set[str] = set()  # attribute names stored somewhere in the file
        self.derived: list[tuple[Key, list[Key]]] = []
        self.scope: Scope | None = None
        self.function: list[Function | None] = [None]
        self.class_body = False
        self.locals: list[tuple[int, set[str]]] = []
        self.guard: int | None = None
        self.unit: ast.stmt | None = None  # the statement being walked

    def find(self, key: Key) -> Key:
        root = key
        while (up := self.parent.get(root, root)) != root:
            root = up
        while key != root:
            self.parent[key], key = root, self.parent.get(key, key)
        return root

    def union(self, *keys: Key) -> Key:
        roots = [self.find(k) for k in keys]
        first = roots[0]
        for other in roots[1:]:
            if other != first:
                self.parent[other] = first
        return first

    def record(self, key: Key) -> Record:
        record = self.records.get(key)
        if record is None:
            record = self.records[key] = Record()
        return record

    def new(self) -> Key:
        self.fresh += 1
        return ("value", self.fresh)

    def opaque(self, node: ast.AST, kind: str = "expr", label: str = "") -> Key:
        key = self.new()
        self.record(key).sources.append(Source(kind, label or _text(node),
                                               getattr(node, "lineno", 0), node, self.scope))
        return key

    def end(self, key: Key, node: ast.AST, parent: ast.AST | None,
            grandparent: ast.AST | None = None) -> None:
        self.record(key).ends.append(Use(node, self.scope, parent, grandparent))  # type: ignore[arg-type]

    def literal_key(self, node: ast.expr) -> Key:
        key = ("literal", id(node))
        self.record(key).literals.append(node)
        if self.unit is not None:
            self.record(key).units[id(node)] = self.unit
        return key

    def parameter(self, function: Function, name: str) -> Key | None:
        bindings = function.scope.bindings.get(name) if function.scope is not None else None
        if not bindings:
            return None
        key = ("name", id(bindings))
        self.record(key).names.add(name)
        return key

    def _derive(self) -> None:
        """A string built from a flow's value (an f-string, `+`, `%`, `.format`) joins that
        flow: comparing it with a literal compares the flow's value."""
        changed = True
        while changed:
            changed = False
            holding = {self.find(k) for k, r in self.records.items() if r.literals}
            for key, parts in self.derived:
                for part in parts:
                    root = self.find(part)
                    if root in holding and root != self.find(key):
                        self.union(key, part)
                        changed = True
                        holding.add(self.find(key))


    def flows(self) -> dict[int, Flow]:
        """Each literal's flow, by the literal's id."""
        flows: dict[Key, Flow] = {}
        for key, record in self.records.items():
            root = self.find(key)
            flow = flows.get(root)
            if flow is None:
                flow = flows[root] = Flow()
            flow.literals.extend(record.literals)
            flow.names |= record.names
            flow.ends.extend(record.ends)
            flow.sources.extend(record.sources)
            flow.guards.extend(record.guards)
            flow.units.update(record.units)
        return {id(literal): flow for flow in flows.values() for literal in flow.literals}


def _text(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # an ast the unparser does not know: name the kind
        return type(node).__name__
    return f"`{text}`" if len(text) <= 60 else f"`{text[:57]}...`"


def starred(elements: list[ast.expr]) -> bool:
    return any(isinstance(e, ast.Starred) for e in elements)
