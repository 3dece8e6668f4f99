"""The walk behind `neuron_migrate.analysis.analyse`: one pass over a module's `ast` that
builds its scopes and bindings and records what the resolution after it needs.

Statements and expressions are dispatched through tables on the node's class rather than
`ast.NodeVisitor`, and plain-name loads are recorded inline while a node's children are read:
most of a file's nodes are such loads, and this pass runs on every candidate file.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable

from neuron_migrate.analysis.import_guards import catches_import_error, imported_names
from neuron_migrate.analysis.locate import ast_dotted
from neuron_migrate.analysis.scopes import Binding, Scope, is_xla

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


class ScopeWalker:
    """Reads a module's statements in order, binding each name in its scope (with the
    fallback names an `except ImportError` or `else` branch rebinds), recording every load,
    call and `.to(...)` argument, and flagging the statements that hold a string the rules
    care about. `neuron_migrate.analysis.analyse` resolves the loads once the walk is done."""

    def __init__(self, interesting_string: Callable[[str], bool],
                 star_names: frozenset[str], watched_roots: frozenset[str],
                 device_calls: frozenset[str]) -> None:
        self.interesting_string = interesting_string
        self.watched_roots = watched_roots
        self.device_calls = device_calls
        self.watched_names: set[str] = set()
        self.scope = Scope("module", None, star_names)
        self.module_scope = self.scope
        self.unit: ast.stmt | None = None
        self.stmt_parent: dict[int, ast.stmt | None] = {}
        self.current_stmt: ast.stmt | None = None
        self.loads: list[tuple[ast.Name, Scope, ast.stmt]] = []
        self.moved: set[int] = set()  # names that are the first argument of a `.to(...)` call
        self.calls: list[tuple[ast.Call, int]] = []
        self.top = -1  # the index of the top-level statement being read
        self.flagged_units: list[ast.stmt] = []
        self.named_units: list[ast.stmt] = []  # flagged for naming an XLA-era import
        self.scope_of: dict[int, Scope] = {}
        self.fallback: frozenset[str] = frozenset()
        self.imports: list[Binding] = []
        self.string_names: set[str] = set()
        self.call_bindings: list[tuple[Binding, Scope]] = []
        # the file's functions, by the binding of their name: definition and own scope
        self.functions: dict[int, tuple[ast.FunctionDef | ast.AsyncFunctionDef, Scope]] = {}
        self.docstring: ast.AST | None = None

    # ----------------------------------------------------------------- statements
    def block(self, body: Iterable[ast.stmt]) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        self.stmt_parent[id(stmt)] = self.current_stmt
        self.scope_of[id(stmt)] = self.scope
        outer_stmt, outer_unit = self.current_stmt, self.unit
        self.current_stmt = self.unit = stmt
        handler = _STATEMENTS.get(type(stmt))
        if handler is not None:
            handler(self, stmt)
        else:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                self.docstring = stmt.value
            self.children(stmt)
        self.current_stmt, self.unit = outer_stmt, outer_unit

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.expressions(node.decorator_list)
        self._arguments_outside(node.args)
        self.expression(node.returns)
        binding = Binding(node.name, fallback=node.name in self.fallback)
        self.scope.bind(binding)
        self.in_scope("function", lambda: self._function_body(node, binding))

    def _function_body(self, node: ast.FunctionDef | ast.AsyncFunctionDef,
                       binding: Binding) -> None:
        self._parameters(node.args)
        self.block(node.body)
        self.functions[id(binding)] = (node, self.scope)

    def _class(self, node: ast.ClassDef) -> None:
        self.expressions(node.decorator_list)
        self.expressions(node.bases)
        self.expressions(k.value for k in node.keywords)
        self.bind(node.name)
        self.in_scope("class", lambda: self.block(node.body))

    def _import(self, node: ast.Import) -> None:
        for index, alias in enumerate(node.names):
            if alias.asname:
                binding = Binding(alias.asname, qualname=alias.name, module=alias.name)
            else:
                root = alias.name.split(".", 1)[0]
                binding = Binding(root, qualname=root, module=alias.name)
            self._bind_import(binding, node, index)

    def _import_from(self, node: ast.ImportFrom) -> None:
        base = "." * node.level + (node.module or "")
        for index, alias in enumerate(node.names):
            if alias.name == "*":
                star = Binding("*", qualname=None, module=base, statement=node,
                               alias_index=index, star=True)
                self.scope.module.stars.append(star)
                if is_xla(base):
                    self.imports.append(star)
                continue
            qualname = f"{base}.{alias.name}" if base and not base.endswith(".") else base + alias.name
            binding = Binding(alias.asname or alias.name, qualname=qualname, module=qualname)
            self._bind_import(binding, node, index)

    def _bind_import(self, binding: Binding, node: ast.stmt, index: int) -> None:
        binding.statement = node
        binding.alias_index = index
        self.scope.bind(binding)
        if binding.module and is_xla(binding.module):
            self.imports.append(binding)
        elif binding.module and binding.module.split(".", 1)[0] in self.watched_roots:
            self.watched_names.add(binding.name)

    def _assign(self, node: ast.Assign | ast.AnnAssign | ast.AugAssign) -> None:
        self.expression(node.value)
        if isinstance(node, ast.AnnAssign):
            self.expression(node.annotation)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        literal = (value.value if isinstance(value, ast.Constant) and isinstance(value.value, str)
                   and self.interesting_string(value.value) else None)
        call = ast_dotted(value.func) if isinstance(value, ast.Call) else None
        for target in targets:
            if literal is not None and isinstance(target, ast.Name) and len(targets) == 1:
                self.scope.bind(Binding(target.id, string_value=literal, statement=node))
                self.string_names.add(target.id)
            elif call is not None and isinstance(target, ast.Name) and len(targets) == 1:
                binding = Binding(target.id, call_value=call, statement=node)
                self.scope.bind(binding)
                self.call_bindings.append((binding, self.scope))
            else:
                self.expression(target)

    def _for(self, node: ast.For | ast.AsyncFor) -> None:
        self.expression(node.iter)
        self.expression(node.target)
        self.block(node.body)
        self.block(node.orelse)

    def _with(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.expression(item.context_expr)
            self.expression(item.optional_vars)
        self.block(node.body)

    def _if(self, node: ast.If) -> None:
        self.expression(node.test)
        self.block(node.body)
        self.with_fallback(imported_names(node.body), lambda: self.block(node.orelse))

    def _try(self, node: ast.Try) -> None:
        self.block(node.body)
        imported = imported_names(node.body)
        for handler in node.handlers:
            self.expression(handler.type)
            if handler.name:
                self.bind(handler.name)
            catches = catches_import_error(handler)
            self.with_fallback(imported if catches else frozenset(),
                               lambda h=handler: self.block(h.body))
        self.block(node.orelse)
        self.block(node.finalbody)

    def _global(self, node: ast.Global | ast.Nonlocal) -> None:
        target = self.scope.globals if isinstance(node, ast.Global) else self.scope.nonlocals
        target.update(node.names)

    def _match(self, node: ast.stmt) -> None:
        self.expression(node.subject)  # type: ignore[attr-defined]
        for case in node.cases:  # type: ignore[attr-defined]
            self.expression(case.pattern)
            self.expression(case.guard)
            self.block(case.body)

    # ---------------------------------------------------------------- expressions
    def expressions(self, nodes: Iterable[ast.AST | None]) -> None:
        for node in nodes:
            self.expression(node)

    def expression(self, node: ast.AST | None) -> None:
        if node is None:
            return
        handler = _EXPRESSIONS.get(node.__class__)
        if handler is None:
            self.children(node)
        else:
            handler(self, node)

    def _name(self, node: ast.Name) -> None:
        if node.ctx.__class__ is ast.Load:
            self.loads.append((node, self.scope, self.unit))  # type: ignore[arg-type]
        else:
            self.bind(node.id)

    def _constant(self, node: ast.Constant) -> None:
        value = node.value
        if type(value) is str and node is not self.docstring:
            if self.interesting_string(value):
                self.flag(self.unit)

    def _attribute(self, node: ast.Attribute | ast.keyword) -> None:
        """`a.b` and `f(k=v)`: one child, `value`."""
        value = node.value
        if value.__class__ is ast.Name and \
                value.ctx.__class__ is ast.Load:  # type: ignore[attr-defined]
            self.loads.append((value, self.scope, self.unit))  # type: ignore[arg-type]
        else:
            self.expression(value)

    def _call(self, node: ast.Call) -> None:
        self.calls.append((node, self.top))
        func, args = node.func, node.args
        if args and type(args[0]) is ast.Name and type(func) is ast.Attribute \
                and func.attr == "to":
            self.moved.add(id(args[0]))  # `x.to(device)`: rules may act on the placement
        self.children(node)

    def _lambda(self, node: ast.Lambda) -> None:
        self._arguments_outside(node.args)
        self.in_scope("lambda", lambda: (self._parameters(node.args), self.expression(node.body)))

    def _comprehension(self, node: ast.expr) -> None:
        self.in_scope("comprehension", lambda: self.children(node))

    def _named(self, node: ast.NamedExpr) -> None:
        self.expression(node.value)
        scope = self.scope
        while scope.kind == "comprehension" and scope.parent is not None:
            scope = scope.parent
        scope.bind(Binding(node.target.id))  # type: ignore[attr-defined]

    def _pattern(self, node: ast.AST) -> None:
        name = getattr(node, _PATTERN_NAMES[type(node)])
        if name:
            self.bind(name)
        self.children(node)

    def children(self, node: ast.AST) -> None:
        """The node's children, in field order. Loads of a plain name, most of the nodes of
        a file, are recorded here rather than through `expression` (the scope and the unit
        cannot change while a node's children are read: whatever enters a scope or a
        statement leaves it before it returns)."""
        fields = _CHILD_FIELDS.get(node.__class__)
        if fields is None:
            fields = _CHILD_FIELDS[node.__class__] = tuple(
                name for name in node._fields if name not in _NOT_CHILDREN)
        loads, scope, unit = self.loads, self.scope, self.unit
        for name in fields:
            value = getattr(node, name, None)
            kind = value.__class__
            if kind is list:
                for item in value:
                    kind = item.__class__
                    if kind is ast.Name and item.ctx.__class__ is ast.Load:
                        loads.append((item, scope, unit))  # type: ignore[arg-type]
                    elif kind is ast.Constant and item.value.__class__ is not str:
                        continue  # a number, None, bytes...: nothing to record
                    elif isinstance(item, ast.stmt):
                        self.statement(item)
                    elif isinstance(item, ast.AST):
                        self.expression(item)
            elif kind is ast.Name and value.ctx.__class__ is ast.Load:
                loads.append((value, scope, unit))  # type: ignore[arg-type]
            elif kind is ast.Constant and value.value.__class__ is not str:
                continue
            elif isinstance(value, ast.AST):
                self.expression(value)

    # ------------------------------------------------------------------- helpers
    def _arguments_outside(self, args: ast.arguments) -> None:
        """Defaults and annotations are evaluated in the enclosing scope."""
        self.expressions(args.defaults)
        self.expressions(d for d in args.kw_defaults if d is not None)
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if arg is not None:
                self.expression(arg.annotation)

    def _parameters(self, args: ast.arguments) -> None:
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if arg is not None:
                self.bind(arg.arg)

    def bind(self, name: str) -> None:
        self.scope.bind(Binding(name, fallback=name in self.fallback))

    def in_scope(self, kind: str, body: Callable[[], object]) -> None:
        outer, outer_fallback = self.scope, self.fallback
        self.scope, self.fallback = Scope(kind, outer), frozenset()
        body()
        self.scope, self.fallback = outer, outer_fallback

    def with_fallback(self, names: frozenset[str], body: Callable[[], object]) -> None:
        outer = self.fallback
        self.fallback = outer | names
        body()
        self.fallback = outer

    def flag(self, unit: ast.stmt | None) -> None:
        if unit is not None:
            self.flagged_units.append(unit)


# Fields `children` does not enter: expression contexts and operators (leaves that bind and
# load nothing), and fields that only ever hold a string, a number or None.
_NOT_CHILDREN = frozenset({"ctx", "op", "ops", "attr", "id", "arg", "type_comment", "kind",
                           "conversion", "is_async", "level", "module", "asname"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}

_PATTERN_NAMES: dict[type, str] = {ast.MatchAs: "name", ast.MatchStar: "name",
                                   ast.MatchMapping: "rest"}

_STATEMENTS: dict[type, Callable[[ScopeWalker, ast.stmt], None]] = {
    ast.FunctionDef: ScopeWalker._function,  # type: ignore[dict-item]
    ast.AsyncFunctionDef: ScopeWalker._function,  # type: ignore[dict-item]
    ast.ClassDef: ScopeWalker._class,  # type: ignore[dict-item]
    ast.Import: ScopeWalker._import,  # type: ignore[dict-item]
    ast.ImportFrom: ScopeWalker._import_from,  # type: ignore[dict-item]
    ast.Assign: ScopeWalker._assign,  # type: ignore[dict-item]
    ast.AnnAssign: ScopeWalker._assign,  # type: ignore[dict-item]
    ast.For: ScopeWalker._for,  # type: ignore[dict-item]
    ast.AsyncFor: ScopeWalker._for,  # type: ignore[dict-item]
    ast.With: ScopeWalker._with,  # type: ignore[dict-item]
    ast.AsyncWith: ScopeWalker._with,  # type: ignore[dict-item]
    ast.If: ScopeWalker._if,  # type: ignore[dict-item]
    ast.Try: ScopeWalker._try,  # type: ignore[dict-item]
    ast.Global: ScopeWalker._global,  # type: ignore[dict-item]
    ast.Nonlocal: ScopeWalker._global,  # type: ignore[dict-item]
    ast.Match: ScopeWalker._match,
}
_EXPRESSIONS: dict[type, Callable[[ScopeWalker, ast.AST], None]] = {
    ast.Name: ScopeWalker._name,  # type: ignore[dict-item]
    ast.Constant: ScopeWalker._constant,  # type: ignore[dict-item]
    ast.Call: ScopeWalker._call,  # type: ignore[dict-item]
    ast.Attribute: ScopeWalker._attribute,  # type: ignore[dict-item]
    ast.keyword: ScopeWalker._attribute,  # type: ignore[dict-item]
    ast.Lambda: ScopeWalker._lambda,  # type: ignore[dict-item]
    ast.NamedExpr: ScopeWalker._named,  # type: ignore[dict-item]
    **{kind: ScopeWalker._comprehension for kind in _COMPREHENSIONS},  # type: ignore[misc]
    **{kind: ScopeWalker._pattern for kind in _PATTERN_NAMES},  # type: ignore[misc]
}
if hasattr(ast, "TryStar"):  # Python 3.11+
    _STATEMENTS[ast.TryStar] = ScopeWalker._try  # type: ignore[assignment]
