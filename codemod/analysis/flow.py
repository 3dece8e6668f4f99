"""Where string values flow: which literals, names, parameters, attributes and return values of
a file can hold the same value, so that a rule changes such a string everywhere it flows or
nowhere.

A comparison renamed without the value it compares (`if requested == "neuron":` while the
default stays "xla") silently takes the other branch. So the rule does not judge a literal
alone: it judges the literal's flow, the set of everything that value meets.

This is a small flow-insensitive data flow over the stdlib `ast` (union-find), built once per
file and only when a rule asks about a string whose flow its statement does not tell
(`flow_direct`: a string that only ends in a call the file does not define). Names are keyed
by their binding in the analysis's scopes, so a module constant read in a function, a
parameter and its default, and the arguments of calls to a function defined in the file meet. Attributes stored
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

from neuron_migrate.analysis.analyse import Analysis
from neuron_migrate.analysis.flow_direct import direct_flow
from neuron_migrate.analysis.flow_graph import Flow, Function, Key, Source, starred
from neuron_migrate.analysis.flow_index import Index, children, definitions, index_file
from neuron_migrate.analysis.flow_values import Values
from neuron_migrate.analysis.locate import ast_dotted

__all__ = ["Flow", "Flows", "Source", "string_flows"]
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class Flows:
    """The flows of one file, and the literal a rewriter is looking at mapped to its flow.

    Built on demand: `at` first tries to tell the literal's flow from its statement
    (`flow_direct`), and builds the file's flows only for a literal it cannot tell."""

    def __init__(self, analysis: Analysis, literal: Callable[[ast.expr], bool],
                 device_calls: frozenset[str]) -> None:
        self._analysis, self._literal, self._device_calls = analysis, literal, device_calls
        self._of: dict[int, Flow] | None = None
        self._direct: dict[int, Flow] = {}  # the flows told without building, by literal
        self._definitions: _Builder | None = None
        self._units: dict[int, dict[tuple[str, str | None], list[ast.expr]]] = {}

    def of(self, literal: ast.AST) -> Flow | None:
        if self._of is None:
            builder = _Builder(self._analysis, self._literal, self._device_calls)
            builder.prepare(self._analysis.tree)
            builder.block(self._analysis.tree.body)
            self._of = builder.finish()
        return self._of.get(id(literal))

    def at(self, unit: ast.stmt, signature: tuple[str, str | None] | None,
           rank: int) -> Flow | None:
        """The flow of the `rank`-th string literal with this signature in `unit` (outside
        the statements nested in it), as `transform.signature` names LibCST strings."""
        index = self._units.get(id(unit))
        if index is None:
            index = self._units[id(unit)] = _strings(unit)
        found = index.get(signature, []) if signature is not None else []
        if rank >= len(found):
            return None
        node = found[rank]
        if not self._literal(node):
            return None  # the builder follows only these: no flow holds any other string
        flow = self._direct.get(id(node))
        if flow is None and self._of is None:
            if self._definitions is None:
                self._definitions = _Builder(self._analysis, self._literal,
                                             self._device_calls)
                self._definitions.prepare_definitions(self._analysis.tree)
            flow = direct_flow(self._analysis, self._literal, self._definitions, unit, node)
            if flow is not None:
                self._direct[id(node)] = flow
        return flow if flow is not None else self.of(node)


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
    device by the value it compares). The flows are worked out when first asked for."""
    return Flows(analysis, literal, device_calls)


_ENUM_BASES = ("Enum", "Flag")  # Enum, IntEnum, StrEnum, Flag, IntFlag, a project's BaseEnum


def _enum(node: ast.ClassDef, classes: list[ast.ClassDef], seen: frozenset[int] = frozenset()
          ) -> bool:
    """Whether the class derives from an enum: a base named like one, or a class of the
    file (by name) that does."""
    for base in node.bases:
        name = ast_dotted(base)
        if name is None:
            continue
        if name.rpartition(".")[2].endswith(_ENUM_BASES):
            return True
        for other in classes:
            if other.name == name and id(other) not in seen and \
                    _enum(other, classes, seen | {id(node)}):
                return True
    return False


class _Builder(Values):
    """The walk over statements: assignments, returns, loops, tests; and, at the end, the
    functions called from outside the file."""

    def prepare(self, tree: ast.Module) -> None:
        """Functions, classes and stored attribute names, so that uses before definitions
        (a call above its `def`) are followed too."""
        found = self.index = index_file(tree)
        self.attributes = found.attributes
        self._register(found)

    def prepare_definitions(self, tree: ast.Module) -> None:
        """Only the functions and classes: enough for `callees` (see `flow_direct`)."""
        self._register(definitions(tree))

    def _register(self, found: Index) -> None:
        scope_of = self.analysis.scope_of
        for node in found.functions:
            own = scope_of.get(id(node.body[0])) if node.body else None
            outer = scope_of.get(id(node))
            function = Function(node, own)
            self.by_node[id(node)] = function
            bindings = outer.lookup(node.name) if outer is not None else None
            if bindings is not None:
                self.functions.setdefault(id(bindings), []).append(function)
            if outer is not None and outer.kind == "class":
                function.offset = 0 if _decorated(node, "staticmethod") else 1
                self.methods.setdefault(node.name, []).append(function)
        for node in found.classes:
            for stmt in node.body:
                if isinstance(stmt, _FUNCTIONS) and stmt.name == "__init__":
                    outer = scope_of.get(id(node))
                    bindings = outer.lookup(node.name) if outer is not None else None
                    if bindings is not None:
                        init = self.by_node.get(id(stmt))
                        if init is not None:
                            self.classes.setdefault(id(bindings), []).append(init)

    def block(self, body: Iterable[ast.stmt]) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        self.scope = self.analysis.scope_of.get(id(stmt), self.scope)
        outer, self.unit = self.unit, stmt
        handler = _STATEMENTS.get(type(stmt))
        if handler is not None:
            handler(self, stmt)
        else:
            for child in children(stmt):  # anything else: what it holds ends here
                if isinstance(child, ast.stmt):
                    self.statement(child)
                elif isinstance(child, ast.expr):
                    self.end(self.value(child), child, stmt)
        self.unit = outer

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
        outer_class, self.class_body = self.class_body, None
        self.block(node.body)
        self.class_body = outer_class
        self.function.pop()
        self.scope = scope

    def _class(self, node: ast.ClassDef) -> None:
        scope = self.scope
        for expr in (*node.decorator_list, *node.bases, *(k.value for k in node.keywords)):
            self.discard(expr)
        outer = self.class_body, self.class_enum
        self.class_body, self.class_enum = node, None
        self.function.append(None)
        self.block(node.body)
        self.function.pop()
        self.class_body, self.class_enum = outer
        self.scope = scope

    def _return(self, node: ast.Return) -> None:
        function = self.function[-1]
        if node.value is None:
            return
        if function is None:
            self.end(self.value(node.value), node.value, node)
            return
        function.returns.append(node)
        if isinstance(node.value, ast.Tuple) and not starred(node.value.elts):
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
                isinstance(node.target, ast.Name) and not starred(node.iter.elts):
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
        self.test(node.test, node)
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
        self.test(node.test, None)
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
                self.test(case.guard, case)
            self.block(case.body)

    def _nothing(self, node: ast.stmt) -> None:
        pass

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
        if self.class_body is not None and isinstance(target, ast.Name):  # `self.x`, `C.x`
            self.union(key, ("attribute", target.id))
            self.add_name(("attribute", target.id), target.id)
            self._class_attribute(key, self.class_body, target)

    def _class_attribute(self, key: Key, owner: ast.ClassDef, target: ast.Name) -> None:
        """A class attribute is read wherever its class is imported, as a module-level name
        is; an enum member's value is also how a lookup by value (`Backend("xla")`) finds
        the member, and renamed it could alias another member."""
        if target.id.startswith("_"):
            return
        where = f"`{owner.name}.{target.id}`"
        if self.class_enum is None:  # asked once per class, and only of one that has some
            self.class_enum = _enum(owner, self.index.classes)
        if self.class_enum:
            self.add_source(key, Source("enum", f"the value of the enum member {where}",
                                        target.lineno, owner=owner.name))
        else:
            self.add_source(key, Source("class", f"the class attribute {where}, which other "
                                        "modules can read", 0))

    def unpack(self, target: ast.Tuple | ast.List, value: ast.expr) -> bool:
        """`a, b = x, y` and `device, kind = resolve()` element by element."""
        if starred(target.elts):
            return False
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
                and not starred(value.elts):
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

    def finish(self) -> dict[int, Flow]:
        for function in self.by_node.values():
            self._close(function)
        self._derive()
        return self.flows()

    def _close(self, function: Function) -> None:
        node = function.node
        whole = ("return", id(node))
        if function.whole_used:
            self.union(whole, *(("return", id(node), i) for i in function.tuple_returns))
        self.add_name(whole, node.name)
        open_ = function.escapes or not function.called or \
            (node.name.startswith("__") and node.name != "__init__") or node.name == "forward"
        if not open_:
            return
        args = node.args
        for arg in [*args.posonlyargs, *args.args][function.offset:] + args.kwonlyargs:
            key = self.parameter(function, arg.arg)
            if key is not None:
                self.add_source(key, Source(
                    "parameter", f"parameter `{arg.arg}` of `{node.name}`, which is called "
                    "from outside this file", node.lineno, owner=node.name))
        self.scope = function.scope
        for ret in function.returns:
            if isinstance(ret.value, ast.Tuple) and not starred(ret.value.elts):
                for index, element in enumerate(ret.value.elts):
                    self.end(("return", id(node), index), element, ret, node)
            elif ret.value is not None:
                self.end(whole, ret.value, ret, node)



def _decorated(node: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    return any(isinstance(d, ast.Name) and d.id == name for d in node.decorator_list)


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

