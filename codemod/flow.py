"""Where string values flow: which literals, names, parameters, attributes and return values of
a file can hold the same value, so that a rule changes such a string everywhere it flows or
nowhere.

A comparison renamed without the value it compares (`if requested == "neuron":` while the
default stays "xla") silently takes the other branch. So the rule does not judge a literal
alone: it judges the literal's flow, the set of everything that value meets.

This is a small flow-insensitive data flow over the stdlib `ast` (union-find), built once per
file and only for files that hold a string a rule cares about. Names are keyed by their
binding in the analysis's scopes, so a module constant read in a function, a parameter and its
default, and the arguments of calls to a function defined in the file meet. Attributes stored
anywhere in the file (`self.device = ...`, an argparse option's `args.device`, a dict item
`{"device": ...}`) are keyed by their name alone: coarser than Python, never finer, so two
values that can meet always do. Comparisons (`==`, `in`, `startswith`), returns and strings
built from a flow (f-strings, `+`, `%`, `.format`) join flows too. Everything else a value
meets is recorded as an end (where it goes) or a source (where a value the file does not show
comes from), for the rule to judge.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from codemod.analyse import Analysis, Use
from codemod.locate import ast_dotted
from codemod.scopes import Scope

Key = tuple[object, ...]
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_SAME_TEXT = frozenset({"lower", "strip", "lstrip", "rstrip", "casefold"})
_COMPARED = frozenset({"startswith", "endswith", "__eq__"})
_ASSERTED = frozenset({"assertEqual", "assertNotEqual", "assertIn", "assertNotIn",
                       "assertEquals"})  # unittest's comparisons
_OPTION = frozenset({"add_argument"})
_DEFAULTS = frozenset({"set_defaults"})


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
    memo: dict[str, object] = field(default_factory=dict)  # a rule's verdict, worked out once

    def lines(self) -> list[int]:
        return sorted({n.lineno for n in self.literals})


class Flows:
    """The flows of one file, and the literal a rewriter is looking at mapped to its flow."""

    def __init__(self, of_literal: dict[int, Flow]) -> None:
        self._of = of_literal
        self._units: dict[int, dict[tuple[str, str | None], list[ast.expr]]] = {}

    def of(self, literal: ast.AST) -> Flow | None:
        return self._of.get(id(literal))

    def at(self, unit: ast.stmt, signature: tuple[str, str | None] | None,
           rank: int) -> Flow | None:
        """The flow of the `rank`-th string literal with this signature in `unit` (outside
        the statements nested in it), as `transform.signature` names LibCST strings."""
        index = self._units.get(id(unit))
        if index is None:
            index = self._units[id(unit)] = _strings(unit)
        found = index.get(signature, []) if signature is not None else []
        return self.of(found[rank]) if rank < len(found) else None


def _strings(unit: ast.stmt) -> dict[tuple[str, str | None], list[ast.expr]]:
    index: dict[tuple[str, str | None], list[ast.expr]] = {}

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                continue
            if isinstance(child, ast.JoinedStr):
                index.setdefault(("fstr", None), []).append(child)
                for part in child.values:  # the texts of an f-string are not strings of its own
                    if isinstance(part, ast.FormattedValue):
                        visit(part)
                continue
            if isinstance(child, ast.Constant) and isinstance(child.value, str):
                index.setdefault(("str", child.value), []).append(child)
            visit(child)

    visit(unit)
    for nodes in index.values():
        nodes.sort(key=lambda n: (n.lineno, n.col_offset))
    return index


def string_flows(analysis: Analysis, literal: Callable[[ast.expr], bool],
                 device_calls: frozenset[str]) -> Flows:
    """`literal` says which string constants and f-strings are the values followed;
    `device_calls` are the XLA device getters (a test whose branch calls one picks the
    device by the value it compares)."""
    builder = _Builder(analysis, literal, device_calls)
    builder.prepare(analysis.tree)
    builder.block(analysis.tree.body)
    return builder.finish()


@dataclass
class _Record:
    literals: list[ast.expr] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    ends: list[Use] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    guards: list[int] = field(default_factory=list)


@dataclass
class _Function:
    node: ast.FunctionDef | ast.AsyncFunctionDef
    scope: Scope | None  # the function's own scope (None for an empty body)
    offset: int = 0  # 1 for methods: `self` is not passed
    called: bool = False
    escapes: bool = False  # referenced other than by a call: called from elsewhere
    returns: list[ast.Return] = field(default_factory=list)
    tuple_returns: set[int] = field(default_factory=set)
    whole_used: bool = False


class _Builder:
    def __init__(self, analysis: Analysis, literal: Callable[[ast.expr], bool],
                 device_calls: frozenset[str]) -> None:
        self.analysis = analysis
        self.literal = literal
        self.device_calls = device_calls
        self.parent: dict[Key, Key] = {}
        self.records: dict[Key, _Record] = {}
        self.fresh = 0
        self.functions: dict[int, list[_Function]] = {}  # by id of the name's bindings list
        self.classes: dict[int, list[_Function]] = {}  # a class's __init__, by the same
        self.methods: dict[str, list[_Function]] = {}
        self.by_node: dict[int, _Function] = {}
        self.attributes: set[str] = set()  # attribute names stored somewhere in the file
        self.derived: list[tuple[Key, list[Key]]] = []
        self.scope: Scope | None = None
        self.function: list[_Function | None] = [None]
        self.class_body = False
        self.locals: list[tuple[int, set[str]]] = []
        self.guard: int | None = None

    # ------------------------------------------------------------------ union-find
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

    def record(self, key: Key) -> _Record:
        record = self.records.get(key)
        if record is None:
            record = self.records[key] = _Record()
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

    # ------------------------------------------------------------------ prepare
    def prepare(self, tree: ast.Module) -> None:
        """Functions, classes and stored attribute names, so that uses before definitions
        (a call above its `def`) are followed too."""
        scope_of = self.analysis.scope_of
        nodes = list(ast.walk(tree))
        for node in nodes:
            if isinstance(node, _FUNCTIONS):
                own = scope_of.get(id(node.body[0])) if node.body else None
                outer = scope_of.get(id(node))
                function = _Function(node, own)
                self.by_node[id(node)] = function
                bindings = outer.lookup(node.name) if outer is not None else None
                if bindings is not None:
                    self.functions.setdefault(id(bindings), []).append(function)
                if outer is not None and outer.kind == "class":
                    function.offset = 0 if _decorated(node, "staticmethod") else 1
                    self.methods.setdefault(node.name, []).append(function)
        for node in nodes:
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if isinstance(stmt, _FUNCTIONS) and stmt.name == "__init__":
                        outer = scope_of.get(id(node))
                        bindings = outer.lookup(node.name) if outer is not None else None
                        if bindings is not None:
                            init = self.by_node.get(id(stmt))
                            if init is not None:
                                self.classes.setdefault(id(bindings), []).append(init)
                    for target in _stored_names(stmt):
                        self.attributes.add(target)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                self.attributes.add(node.attr)
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and \
                    isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                self.attributes.add(node.slice.value)  # `kwargs["device_type"] = ...`
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in _OPTION:
                    dest = _option_dest(node)
                    if dest is not None:
                        self.attributes.add(dest)
                elif node.func.attr in _DEFAULTS:
                    self.attributes.update(k.arg for k in node.keywords if k.arg)
            elif isinstance(node, ast.Dict):
                self.attributes.update(k.value for k in node.keys if isinstance(k, ast.Constant)
                                       and isinstance(k.value, str))

    # ------------------------------------------------------------------ statements
    def block(self, body: Iterable[ast.stmt]) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        self.scope = self.analysis.scope_of.get(id(stmt), self.scope)
        handler = _STATEMENTS.get(type(stmt))
        if handler is not None:
            handler(self, stmt)
            return
        for child in ast.iter_child_nodes(stmt):  # anything else: whatever it holds ends here
            if isinstance(child, ast.stmt):
                self.statement(child)
            elif isinstance(child, ast.expr):
                self.end(self.value(child), child, stmt)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        scope = self.scope
        for decorator in node.decorator_list:
            self.discard(decorator)
        function = self.by_node[id(node)]
        args = node.args
        positional = [*args.posonlyargs, *args.args]
        defaults = [*([None] * (len(positional) - len(args.defaults))), *args.defaults]
        for arg, default in [*zip(positional, defaults), *zip(args.kwonlyargs, args.kw_defaults)]:
            param = self.parameter(function, arg.arg)
            if default is not None and param is not None:
                self.union(param, self.value(default))
        self.function.append(function)
        outer_class, self.class_body = self.class_body, False
        self.block(node.body)
        self.class_body = outer_class
        self.function.pop()
        self.scope = scope

    def _class(self, node: ast.ClassDef) -> None:
        scope = self.scope
        for expr in (*node.decorator_list, *node.bases, *(k.value for k in node.keywords)):
            self.discard(expr)
        outer, self.class_body = self.class_body, True
        self.function.append(None)
        self.block(node.body)
        self.function.pop()
        self.class_body = outer
        self.scope = scope

    def _return(self, node: ast.Return) -> None:
        function = self.function[-1]
        if node.value is None:
            return
        if function is None:
            self.end(self.value(node.value), node.value, node)
            return
        function.returns.append(node)
        if isinstance(node.value, ast.Tuple) and not _starred(node.value.elts):
            for index, element in enumerate(node.value.elts):
                function.tuple_returns.add(index)
                self.union(("return", id(function.node), index), self.value(element))
        else:
            self.union(("return", id(function.node)), self.value(node.value))

    def _assign(self, node: ast.Assign | ast.AnnAssign) -> None:
        if isinstance(node, ast.AnnAssign):
            self.discard(node.annotation)
            if node.value is None:
                return
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if len(targets) == 1 and isinstance(targets[0], (ast.Tuple, ast.List)) and \
                self.unpack(targets[0], node.value):
            return
        value = self.value(node.value)
        for target in targets:
            self.store(target, value, node.value)

    def _augassign(self, node: ast.AugAssign) -> None:
        value = self.value(node.value)
        if isinstance(node.op, ast.Add) and isinstance(node.target, (ast.Name, ast.Attribute)):
            target = self.target_key(node.target)  # `device += ":0"` keeps the text in front
            if target is not None:
                self.derived.append((target, [value]))
                return
        self.end(value, node.value, node)
        self.store(node.target, self.opaque(node), node)

    def _for(self, node: ast.For | ast.AsyncFor) -> None:
        if isinstance(node.iter, (ast.Tuple, ast.List, ast.Set)) and \
                isinstance(node.target, ast.Name) and not _starred(node.iter.elts):
            target = self.target_key(node.target)
            for element in node.iter.elts:  # `for d in ("xla", "cpu"):`
                value = self.value(element)
                if target is not None:
                    self.union(target, value)
        else:
            self.end(self.value(node.iter), node.iter, node)
            self.store(node.target, self.opaque(node.target, "name"), node.target)
        self.block(node.body)
        self.block(node.orelse)

    def _with(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            value = self.value(item.context_expr)
            if item.optional_vars is not None:
                self.end(value, item.context_expr, item)
                self.store(item.optional_vars, self.opaque(item.optional_vars, "name"),
                           item.optional_vars)
        self.block(node.body)

    def _if(self, node: ast.If | ast.While) -> None:
        self.test(node.test, [*node.body, *node.orelse])
        self.block(node.body)
        self.block(node.orelse)

    def _try(self, node: ast.Try) -> None:
        self.block(node.body)
        for handler in node.handlers:
            if handler.type is not None:
                self.discard(handler.type)
            if handler.name:
                self.store(ast.Name(handler.name, ast.Store()), self.opaque(handler, "name"),
                           handler)
            self.block(handler.body)
        self.block(node.orelse)
        self.block(node.finalbody)

    def _expr(self, node: ast.Expr) -> None:
        self.discard(node.value)

    def _assert(self, node: ast.Assert) -> None:
        self.test(node.test, [])
        if node.msg is not None:
            self.discard(node.msg)

    def _match(self, node: ast.Match) -> None:
        subject = self.value(node.subject)
        for case in node.cases:
            for pattern in ast.walk(case.pattern):
                if isinstance(pattern, ast.MatchValue):
                    self.union(subject, self.value(pattern.value))  # `case "xla":` compares
                elif isinstance(pattern, (ast.MatchAs, ast.MatchStar)) and pattern.name:
                    self.store(ast.Name(pattern.name, ast.Store()), subject, pattern)
            if case.guard is not None:
                self.test(case.guard, case.body)
            self.block(case.body)

    def _nothing(self, node: ast.stmt) -> None:
        pass

    # ------------------------------------------------------------------ stores
    def target_key(self, target: ast.expr) -> Key | None:
        """The key of a name or a stored attribute (None for anything else)."""
        if isinstance(target, ast.Name):
            return self.name_key(target.id)
        if isinstance(target, ast.Attribute) and target.attr in self.attributes:
            key = ("attribute", target.attr)
            self.record(key).names.add(target.attr)
            return key
        return None

    def name_key(self, name: str) -> Key | None:
        for owner, names in reversed(self.locals):
            if name in names:
                return ("local", owner, name)
        bindings = self.scope.lookup(name) if self.scope is not None else None
        if not bindings:
            return None
        key = ("name", id(bindings))
        record = self.record(key)
        if name not in record.names:
            record.names.add(name)
            if any(binding.is_import for binding in bindings):
                record.sources.append(Source("name", f"`{name}`, imported", 0))
            elif self.scope.module.bindings.get(name) is bindings and not name.startswith("_"):
                record.sources.append(Source("module", f"the module-level `{name}`, which "
                                             "other modules can import", 0))
        return key

    def store(self, target: ast.expr, value: Key, node: ast.AST) -> None:
        if isinstance(target, ast.Starred):
            target = target.value
        if isinstance(target, (ast.Tuple, ast.List)):
            self.end(value, node, target)  # unpacked: which part goes where is not followed
            for element in target.elts:
                self.store(element, self.opaque(element, "name"), element)
            return
        key = self.target_key(target)
        if isinstance(target, ast.Attribute):
            self.discard(target.value)
        elif isinstance(target, ast.Subscript):
            self.discard(target.value)
            self.end(self.value(target.slice), target.slice, target)
            key = self.item_key(target)
        if key is None:
            self.end(value, node, target)
            return
        self.union(key, value)
        if self.class_body and isinstance(target, ast.Name):  # a class attribute: `self.x`
            self.union(key, ("attribute", target.id))
            self.record(("attribute", target.id)).names.add(target.id)

    def item_key(self, node: ast.Subscript) -> Key | None:
        """`config["device"]`: an item stored by that name somewhere in the file."""
        index = node.slice
        if isinstance(index, ast.Constant) and isinstance(index.value, str) and \
                index.value in self.attributes and not self.imported(node.value):
            return ("attribute", index.value)
        return None

    def unpack(self, target: ast.Tuple | ast.List, value: ast.expr) -> bool:
        """`a, b = x, y` and `device, kind = resolve()` element by element."""
        if _starred(target.elts):
            return False
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
                and not _starred(value.elts):
            for element, part in zip(target.elts, value.elts):
                self.store(element, self.value(part), part)
            return True
        functions = self.callees(value) if isinstance(value, ast.Call) else None
        if not functions:
            return False
        self.call(value, whole=False)  # type: ignore[arg-type]
        for index, element in enumerate(target.elts):
            parts = [("return", id(f.node), index) for f in functions]
            self.store(element, self.union(*parts), value)
        return True

    def parameter(self, function: _Function, name: str) -> Key | None:
        bindings = function.scope.bindings.get(name) if function.scope is not None else None
        if not bindings:
            return None
        key = ("name", id(bindings))
        self.record(key).names.add(name)
        return key

    # ------------------------------------------------------------------ expressions
    def discard(self, node: ast.expr) -> None:
        """An expression whose value goes nowhere (a statement, a decorator, help text)."""
        self.value(node)

    def test(self, node: ast.expr, guarded: list[ast.stmt] | list[ast.expr]) -> None:
        outer = self.guard
        self.guard = node.lineno if any(self.picks_device(n) for n in guarded) else None
        self.end(self.value(node), node, _TEST)
        self.guard = outer

    def picks_device(self, node: ast.AST) -> bool:
        """Whether code calls the XLA device getter or names the XLA device in a call."""
        for inner in ast.walk(node):
            if isinstance(inner, ast.Call):
                if self.scope is not None and \
                        self.scope.qualname(ast_dotted(inner.func)) in self.device_calls:
                    return True
                if any(isinstance(a, (ast.Constant, ast.JoinedStr)) and self.literal(a)
                       for a in (*inner.args, *(k.value for k in inner.keywords))):
                    return True
        return False

    def literal_key(self, node: ast.expr) -> Key:
        key = ("literal", id(node))
        self.record(key).literals.append(node)
        return key

    def value(self, node: ast.expr) -> Key:
        """The key of the flow `node`'s value belongs to; what it holds is followed too."""
        handler = _EXPRESSIONS.get(type(node))
        if handler is not None:
            return handler(self, node)
        for child in ast.iter_child_nodes(node):  # anything else: its parts end in it
            if isinstance(child, ast.expr):
                self.end(self.value(child), child, node)
        return self.opaque(node)

    def _constant(self, node: ast.Constant) -> Key:
        if isinstance(node.value, str) and self.literal(node):
            return self.literal_key(node)
        return self.new()

    def _joined(self, node: ast.JoinedStr) -> Key:
        parts = [self.value(p.value) for p in node.values if isinstance(p, ast.FormattedValue)]
        for part in node.values:
            if isinstance(part, ast.FormattedValue) and part.format_spec is not None:
                self.discard(part.format_spec)
        key = self.literal_key(node) if self.literal(node) else self.new()
        self.derived.append((key, parts))
        return key

    def _name(self, node: ast.Name) -> Key:
        if not isinstance(node.ctx, ast.Load):
            return self.new()
        key = self.name_key(node.id)
        if key is None:
            return self.opaque(node, "name", f"`{node.id}`, defined outside this file")
        for function in self.defined(node.id):
            function.escapes = True  # a function used as a value: called from elsewhere
        return key

    def _attribute(self, node: ast.Attribute) -> Key:
        if node.attr in self.attributes and not self.imported(node.value):
            self.discard(node.value)
            key = ("attribute", node.attr)
            self.record(key).names.add(node.attr)
            return key
        self.end(self.value(node.value), node.value, node)
        return self.opaque(node)

    def _subscript(self, node: ast.Subscript) -> Key:
        key = self.item_key(node)
        self.end(self.value(node.value), node.value, node)
        self.end(self.value(node.slice), node.slice, node)
        return key if key is not None else self.opaque(node)

    def _compare(self, node: ast.Compare) -> Key:
        keys = [self.value(node.left)]
        for op, comparator in zip(node.ops, node.comparators):
            if isinstance(op, (ast.In, ast.NotIn)) and \
                    isinstance(comparator, (ast.Tuple, ast.List, ast.Set)) and \
                    not _starred(comparator.elts):
                keys.extend(self.value(e) for e in comparator.elts)
            else:
                keys.append(self.value(comparator))
        key = self.union(*keys)
        if self.guard is not None:
            self.record(key).guards.append(self.guard)
        return self.new()

    def _boolop(self, node: ast.BoolOp) -> Key:
        return self.union(*(self.value(v) for v in node.values))

    def _ifexp(self, node: ast.IfExp) -> Key:
        self.test(node.test, [node.body, node.orelse])
        return self.union(self.value(node.body), self.value(node.orelse))

    def _binop(self, node: ast.BinOp) -> Key:
        left, right = self.value(node.left), node.right
        if isinstance(node.op, ast.Add):
            key = self.new()
            self.derived.append((key, [left, self.value(right)]))
            return key
        if isinstance(node.op, ast.Mod) and isinstance(node.left, (ast.Constant, ast.JoinedStr)):
            parts = right.elts if isinstance(right, ast.Tuple) else [right]
            key = self.new()
            self.derived.append((key, [left, *(self.value(p) for p in parts)]))
            return key
        self.end(left, node.left, node)
        self.end(self.value(right), right, node)
        return self.opaque(node)

    def _named(self, node: ast.NamedExpr) -> Key:
        value = self.value(node.value)
        key = self.name_key(node.target.id)
        return self.union(key, value) if key is not None else value

    def _display(self, node: ast.Tuple | ast.List | ast.Set) -> Key:
        for element in node.elts:
            self.end(self.value(element), element, node)
        return self.new()

    def _dict(self, node: ast.Dict) -> Key:
        for key, item in zip(node.keys, node.values):
            if key is None:
                self.end(self.value(item), item, node)
                continue
            self.end(self.value(key), key, node)
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                self.record(("attribute", key.value)).names.add(key.value)
                self.union(("attribute", key.value), self.value(item))
            else:
                self.end(self.value(item), item, node)
        return self.new()

    def _scoped(self, node: ast.expr) -> Key:
        """A lambda or comprehension: its own names are local; its values are not followed."""
        names: set[str] = set()
        if isinstance(node, ast.Lambda):
            names = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        else:
            for generator in node.generators:  # type: ignore[attr-defined]
                names |= {n.id for n in ast.walk(generator.target) if isinstance(n, ast.Name)}
        self.locals.append((id(node), names))
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.end(self.value(child), child, node)
            elif isinstance(child, ast.comprehension):
                self.end(self.value(child.iter), child.iter, node)
                for condition in child.ifs:
                    self.end(self.value(condition), condition, _TEST)
        self.locals.pop()
        return self.opaque(node)

    # ------------------------------------------------------------------ calls
    def _call(self, node: ast.Call) -> Key:
        return self.call(node)

    def call(self, node: ast.Call, whole: bool = True) -> Key:
        func = node.func
        if isinstance(func, ast.Attribute) and not self.imported(func.value):
            special = self.method(node, func)
            if special is not None:
                return special
        if isinstance(func, ast.Name) and func.id == "str" and len(node.args) == 1 and \
                not node.keywords and self.name_key("str") is None:
            return self.value(node.args[0])  # str(device): the same text
        functions = self.callees(node)
        if functions is not None:
            self.pass_arguments(node, functions)
            if isinstance(func, ast.Attribute):
                self.end(self.value(func.value), func.value, func, node)
            keys = [("return", id(f.node)) for f in functions if f.node.name != "__init__"]
            for function in functions:
                function.called = True
                function.whole_used = function.whole_used or whole
            certain = isinstance(func, ast.Name) or _on_self(func)
            if not certain or not keys:  # perhaps some other object's method
                keys.append(self.opaque(node))
            return self.union(*keys)
        self.discard_callee(func, node)
        for arg in node.args:
            inner = arg.value if isinstance(arg, ast.Starred) else arg
            self.end(self.value(inner), inner, arg if inner is not arg else node,
                     node if inner is not arg else None)
        for keyword in node.keywords:
            self.end(self.value(keyword.value), keyword.value, keyword, node)
        return self.opaque(node)

    def discard_callee(self, func: ast.expr, node: ast.Call) -> None:
        if isinstance(func, ast.Attribute):
            self.end(self.value(func.value), func.value, func, node)  # `device.split(":")`
        elif not isinstance(func, ast.Name):
            self.end(self.value(func), func, node)

    def method(self, node: ast.Call, func: ast.Attribute) -> Key | None:
        """Methods of strings, argparse and dicts that the flow follows."""
        name, args = func.attr, node.args
        if name in _COMPARED and len(args) == 1 and not node.keywords:
            compared = args[0].elts if isinstance(args[0], ast.Tuple) else [args[0]]
            key = self.union(self.value(func.value), *(self.value(a) for a in compared))
            if self.guard is not None:
                self.record(key).guards.append(self.guard)
            return self.new()
        if name in _ASSERTED and len(args) >= 2 and not _starred(args):
            first, second = args[0], args[1]
            compared = second.elts if name.endswith("In") and \
                isinstance(second, (ast.Tuple, ast.List, ast.Set)) else [second]
            self.union(self.value(first), *(self.value(a) for a in compared))
            for extra in args[2:]:
                self.discard(extra)  # the message
            return self.new()
        if name in _SAME_TEXT and not args and not node.keywords:
            return self.value(func.value)
        if name == "format" and isinstance(func.value, (ast.Constant, ast.JoinedStr)):
            key = self.new()
            parts = [self.value(a.value if isinstance(a, ast.Starred) else a) for a in args]
            parts += [self.value(k.value) for k in node.keywords]
            self.derived.append((key, [self.value(func.value), *parts]))
            return key
        if name in _OPTION and _option_dest(node) is not None:
            return self.option(node, _option_dest(node))  # type: ignore[arg-type]
        if name in _DEFAULTS:
            self.discard(func.value)
            for keyword in node.keywords:
                if keyword.arg is None:
                    self.end(self.value(keyword.value), keyword.value, keyword, node)
                else:
                    self.union(("attribute", keyword.arg), self.value(keyword.value))
            return self.new()
        if name == "get" and args and isinstance(args[0], ast.Constant) and \
                args[0].value in self.attributes and len(args) <= 2 and not node.keywords:
            self.discard(func.value)
            key = ("attribute", args[0].value)
            return self.union(key, *(self.value(a) for a in args[1:]))
        return None

    def option(self, node: ast.Call, dest: str) -> Key:
        """`parser.add_argument("--device", default="xla", choices=[...])`: the default and
        the choices are values of `args.device`, and so is whatever the command line says."""
        key = ("attribute", dest)
        flags = [a.value for a in node.args if isinstance(a, ast.Constant)]
        record = self.record(key)
        record.names.add(dest)
        record.sources.append(Source("option", f"the command-line option `{flags[0] if flags else dest}`",
                                     node.lineno, node, self.scope))
        self.discard(node.func.value)  # type: ignore[attr-defined]
        for arg in node.args:
            self.discard(arg)
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg in ("default", "const"):
                self.union(key, self.value(value))
            elif keyword.arg == "choices" and isinstance(value, (ast.List, ast.Tuple, ast.Set)) \
                    and not _starred(value.elts):
                self.union(key, *(self.value(e) for e in value.elts))
            elif keyword.arg in ("help", "type", "action", "metavar", "dest", "required",
                                 "nargs"):
                self.discard(value)
            else:
                self.end(self.value(value), value, keyword, node)
        return self.new()

    def callees(self, node: ast.Call) -> list[_Function] | None:
        """The functions defined in this file that this call may run (None: not one of
        them). A plain name is certain; `x.method(...)` may be any method of that name."""
        func = node.func
        if isinstance(func, ast.Name):
            found = self.defined(func.id, calls=True)
            return found or None
        if isinstance(func, ast.Attribute) and not self.imported(func.value):
            return self.methods.get(func.attr) or None
        return None

    def defined(self, name: str, calls: bool = False) -> list[_Function]:
        if any(name in names for _, names in self.locals) or self.scope is None:
            return []
        bindings = self.scope.lookup(name)
        if not bindings:
            return []
        found = self.functions.get(id(bindings), [])
        if calls:
            found = found + self.classes.get(id(bindings), [])
        return found if len(found) == len(bindings) or not calls else []

    def pass_arguments(self, node: ast.Call, functions: list[_Function]) -> None:
        positional = [(a, self.value(a.value if isinstance(a, ast.Starred) else a))
                      for a in node.args]
        keywords = [(k, self.value(k.value)) for k in node.keywords]
        for function in functions:
            args = function.node.args
            params = [*args.posonlyargs, *args.args][function.offset:]
            named = {a.arg for a in (*args.args, *args.kwonlyargs)}
            for index, (arg, value) in enumerate(positional):
                param = params[index] if index < len(params) and \
                    not isinstance(arg, ast.Starred) else None
                key = self.parameter(function, param.arg) if param is not None else None
                self.union(key, value) if key is not None else self.end(value, arg, node)
            for keyword, value in keywords:
                key = self.parameter(function, keyword.arg) \
                    if keyword.arg in named else None
                self.union(key, value) if key is not None else \
                    self.end(value, keyword.value, keyword, node)

    def imported(self, node: ast.expr) -> bool:
        """Whether a dotted expression starts at an import (`os.environ`, `torch`)."""
        while isinstance(node, ast.Attribute):
            node = node.value
        if not isinstance(node, ast.Name) or self.scope is None or \
                any(node.id in names for _, names in self.locals):
            return False
        return self.scope.resolve(node.id, []) is not None

    # ------------------------------------------------------------------ finish
    def finish(self) -> Flows:
        for function in self.by_node.values():
            self._close(function)
        self._derive()
        flows: dict[Key, Flow] = {}
        of_literal: dict[int, Flow] = {}
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
        for flow in flows.values():
            for literal in flow.literals:
                of_literal[id(literal)] = flow
        return Flows(of_literal)

    def _close(self, function: _Function) -> None:
        node = function.node
        whole = ("return", id(node))
        if function.whole_used:
            self.union(whole, *(("return", id(node), i) for i in function.tuple_returns))
        self.record(whole).names.add(node.name)
        open_ = function.escapes or not function.called or \
            (node.name.startswith("__") and node.name != "__init__") or node.name == "forward"
        if not open_:
            return
        args = node.args
        for arg in [*args.posonlyargs, *args.args][function.offset:] + args.kwonlyargs:
            key = self.parameter(function, arg.arg)
            if key is not None:
                self.record(key).sources.append(Source(
                    "parameter", f"parameter `{arg.arg}` of `{node.name}`, which is called "
                    "from outside this file", node.lineno, owner=node.name))
        self.scope = function.scope
        for ret in function.returns:
            if isinstance(ret.value, ast.Tuple) and not _starred(ret.value.elts):
                for index, element in enumerate(ret.value.elts):
                    self.end(("return", id(node), index), element, ret, node)
            elif ret.value is not None:
                self.end(whole, ret.value, ret, node)

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


_TEST = ast.If(test=ast.Constant(True), body=[], orelse=[])
"""The parent given to a value used only for its truth (an `if` or `while` test, an
`assert`): nothing depends on its text."""


def _text(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # an ast the unparser does not know: name the kind
        return type(node).__name__
    return f"`{text}`" if len(text) <= 60 else f"`{text[:57]}...`"


def _starred(elements: list[ast.expr]) -> bool:
    return any(isinstance(e, ast.Starred) for e in elements)


def _on_self(func: ast.Attribute) -> bool:
    value = func.value
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls")
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
        value.func.id == "super"


def _decorated(node: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    return any(isinstance(d, ast.Name) and d.id == name for d in node.decorator_list)


def _stored_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []


def _option_dest(node: ast.Call) -> str | None:
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


_STATEMENTS: dict[type, Callable[[_Builder, ast.stmt], None]] = {
    ast.FunctionDef: _Builder._function,  # type: ignore[dict-item]
    ast.AsyncFunctionDef: _Builder._function,  # type: ignore[dict-item]
    ast.ClassDef: _Builder._class,  # type: ignore[dict-item]
    ast.Return: _Builder._return,  # type: ignore[dict-item]
    ast.Assign: _Builder._assign,  # type: ignore[dict-item]
    ast.AnnAssign: _Builder._assign,  # type: ignore[dict-item]
    ast.AugAssign: _Builder._augassign,  # type: ignore[dict-item]
    ast.For: _Builder._for,  # type: ignore[dict-item]
    ast.AsyncFor: _Builder._for,  # type: ignore[dict-item]
    ast.With: _Builder._with,  # type: ignore[dict-item]
    ast.AsyncWith: _Builder._with,  # type: ignore[dict-item]
    ast.If: _Builder._if,  # type: ignore[dict-item]
    ast.While: _Builder._if,  # type: ignore[dict-item]
    ast.Try: _Builder._try,  # type: ignore[dict-item]
    ast.Expr: _Builder._expr,  # type: ignore[dict-item]
    ast.Assert: _Builder._assert,  # type: ignore[dict-item]
    ast.Match: _Builder._match,  # type: ignore[dict-item]
    ast.Import: _Builder._nothing,
    ast.ImportFrom: _Builder._nothing,
    ast.Global: _Builder._nothing,
    ast.Nonlocal: _Builder._nothing,
    ast.Pass: _Builder._nothing,
    ast.Break: _Builder._nothing,
    ast.Continue: _Builder._nothing,
}
if hasattr(ast, "TryStar"):  # Python 3.11+
    _STATEMENTS[ast.TryStar] = _Builder._try  # type: ignore[assignment]

_EXPRESSIONS: dict[type, Callable[[_Builder, ast.expr], Key]] = {
    ast.Constant: _Builder._constant,  # type: ignore[dict-item]
    ast.JoinedStr: _Builder._joined,  # type: ignore[dict-item]
    ast.Name: _Builder._name,  # type: ignore[dict-item]
    ast.Attribute: _Builder._attribute,  # type: ignore[dict-item]
    ast.Subscript: _Builder._subscript,  # type: ignore[dict-item]
    ast.Compare: _Builder._compare,  # type: ignore[dict-item]
    ast.BoolOp: _Builder._boolop,  # type: ignore[dict-item]
    ast.IfExp: _Builder._ifexp,  # type: ignore[dict-item]
    ast.BinOp: _Builder._binop,  # type: ignore[dict-item]
    ast.NamedExpr: _Builder._named,  # type: ignore[dict-item]
    ast.Tuple: _Builder._display,  # type: ignore[dict-item]
    ast.List: _Builder._display,  # type: ignore[dict-item]
    ast.Set: _Builder._display,  # type: ignore[dict-item]
    ast.Dict: _Builder._dict,  # type: ignore[dict-item]
    ast.Call: _Builder._call,  # type: ignore[dict-item]
    **{kind: _Builder._scoped for kind in _SCOPES},  # type: ignore[dict-item]
}
