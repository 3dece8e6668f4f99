"""The graph under `neuron_migrate.analysis.flow`: union-find over keys (a literal, a name's binding, an
attribute name, a function's return value), and what each key records (its literals, names,
ends and sources), gathered into one `Flow` per set at the end."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from neuron_migrate.analysis.analyse import Analysis, Use
from neuron_migrate.analysis.flow_index import Index
from neuron_migrate.analysis.scopes import Scope

Key = tuple[object, ...]


@dataclass(frozen=True)
class Source:
    """A value entering a flow from something the file does not show.

    `kind` is "expr" (an expression the flow does not follow: the rule judges `node`),
    "option" (a command-line option), "parameter" (a parameter of a function called from
    outside the file), "module" (a module-level name other modules can import), "class" (a
    class attribute, which they can read too), "enum" (an enum member's value, which lookups
    by value find it by) or "name" (a name bound outside the file, or by an import, loop or
    `with`)."""

    kind: str
    label: str
    line: int
    node: ast.AST | None = None
    scope: Scope | None = None
    owner: str = ""  # for "parameter": the function; for "enum": the class


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


class Record:
    """What one key records. Most keys record one thing (a fresh value's source, a place it
    ends), and most keys never meet a literal, so the containers are made when first needed
    and an end or a source stays a tuple until `Graph.flows` keeps it (see `Graph.end`)."""

    __slots__ = ("ends", "guards", "literals", "names", "sources", "units")

    def __init__(self) -> None:
        self.literals: list[ast.expr] | None = None
        self.names: set[str] | None = None
        self.ends: list[_End] | None = None
        self.sources: list[Source | _Opaque] | None = None
        self.guards: list[int] | None = None
        self.units: dict[int, ast.stmt] | None = None


_End = tuple[ast.AST, "Scope | None", "ast.AST | None", "ast.AST | None"]
"""A `Use`'s fields, made a `Use` only in a flow that holds a literal."""
_Opaque = tuple[str, str, int, ast.AST, "Scope | None"]
"""A `Source`'s fields from `Graph.opaque`, whose label (the expression's text) is only
written for a flow that holds a literal: unparsing every call of a file cost more than the
rest of the flow."""


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
        self.literal_keys: list[Key] = []  # the keys `literal_key` made, in order
        self.scope: Scope | None = None
        self.function: list[Function | None] = [None]
        self.class_body: ast.ClassDef | None = None  # the class whose body is walked
        self.class_enum: bool | None = None  # whether that class is an enum (None: not asked)
        self.locals: list[tuple[int, set[str]]] = []
        self.guard: int | None = None
        self.unit: ast.stmt | None = None  # the statement being walked
        self.index = Index()  # what the file holds (`flow_index`), found before the walk
        self._device_memo: dict[tuple[int, int], bool] = {}  # (scope, call) -> picks?
        self._literal_memo: dict[int, bool] = {}  # a call's position -> names the device?
        self._imported_memo: dict[tuple[int, str], bool] = {}  # (scope, name) -> an import?
        self._defined_memo: dict[tuple[int, str, bool], list[Function]] = {}
        self._name_memo: dict[tuple[int, str], object] = {}  # (scope, name) -> key or None
        self._tails = frozenset(q.rsplit(".", 1)[-1] for q in device_calls)

    def find(self, key: Key) -> Key:
        parent = self.parent  # a root has no entry: most keys are roots
        root = parent.get(key)
        if root is None:
            return key
        while (up := parent.get(root)) is not None:
            root = up
        while key != root:  # path compression
            parent[key], key = root, parent[key]
        return root

    def union(self, *keys: Key) -> Key:
        find = self.find
        first = find(keys[0])
        for key in keys[1:]:
            other = find(key)
            if other != first:
                self.parent[other] = first
        return first

    def record(self, key: Key) -> Record:
        record = self.records.get(key)
        if record is None:
            record = self.records[key] = Record()
        return record

    def add_name(self, key: Key, name: str) -> bool:
        """Records that `key` is (also) called `name`; False if it was already."""
        record = self.record(key)
        if record.names is None:
            record.names = {name}
        elif name in record.names:
            return False
        else:
            record.names.add(name)
        return True

    def add_source(self, key: Key, source: Source | _Opaque) -> None:
        record = self.record(key)
        if record.sources is None:
            record.sources = [source]
        else:
            record.sources.append(source)

    def add_guard(self, key: Key, line: int) -> None:
        record = self.record(key)
        if record.guards is None:
            record.guards = [line]
        else:
            record.guards.append(line)

    def new(self) -> Key:
        self.fresh += 1
        return ("value", self.fresh)

    def opaque(self, node: ast.AST, kind: str = "expr", label: str = "") -> Key:
        key = self.new()
        self.records[key] = record = Record()
        record.sources = [(kind, label, getattr(node, "lineno", 0), node, self.scope)]
        return key

    def end(self, key: Key, node: ast.AST, parent: ast.AST | None,
            grandparent: ast.AST | None = None) -> None:
        record = self.record(key)
        if record.ends is None:
            record.ends = [(node, self.scope, parent, grandparent)]
        else:
            record.ends.append((node, self.scope, parent, grandparent))

    def literal_key(self, node: ast.expr) -> Key:
        key = ("literal", id(node))
        record = self.record(key)
        if record.literals is None:
            record.literals = [node]
            self.literal_keys.append(key)
        else:
            record.literals.append(node)
        if self.unit is not None:
            if record.units is None:
                record.units = {}
            record.units[id(node)] = self.unit
        return key

    def parameter(self, function: Function, name: str) -> Key | None:
        bindings = function.scope.bindings.get(name) if function.scope is not None else None
        if not bindings:
            return None
        key = ("name", id(bindings))
        self.add_name(key, name)
        return key

    def _derive(self) -> None:
        """A string built from a flow's value (an f-string, `+`, `%`, `.format`) joins that
        flow: comparing it with a literal compares the flow's value."""
        changed = True
        while changed:
            changed = False
            holding = {self.find(k) for k in self.literal_keys}
            for key, parts in self.derived:
                for part in parts:
                    root = self.find(part)
                    if root in holding and root != self.find(key):
                        self.union(key, part)
                        changed = True
                        holding.add(self.find(key))

    def flows(self) -> dict[int, Flow]:
        """Each literal's flow, by the literal's id. Only sets that hold a literal become
        flows: what the other sets record is never asked for."""
        find = self.find
        holding = {find(k) for k in self.literal_keys}
        flows: dict[Key, Flow] = {}
        for key, record in self.records.items():
            root = find(key)
            if root not in holding:
                continue
            flow = flows.get(root)
            if flow is None:
                flow = flows[root] = Flow()
            if record.literals:
                flow.literals.extend(record.literals)
            if record.names:
                flow.names |= record.names
            if record.ends:
                flow.ends.extend(Use(*end) for end in record.ends)  # type: ignore[arg-type]
            if record.sources:
                flow.sources.extend(_source(s) for s in record.sources)
            if record.guards:
                flow.guards.extend(record.guards)
            if record.units:
                flow.units.update(record.units)
        return {id(literal): flow for flow in flows.values() for literal in flow.literals}


def _source(source: Source | _Opaque) -> Source:
    if isinstance(source, Source):
        return source
    kind, label, line, node, scope = source
    return Source(kind, label or _text(node), line, node, scope)


def _text(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # an ast the unparser does not know: name the kind
        return type(node).__name__
    return f"`{text}`" if len(text) <= 60 else f"`{text[:57]}...`"


def starred(elements: list[ast.expr]) -> bool:
    return any(isinstance(e, ast.Starred) for e in elements)
