"""One cheap pass over the stdlib `ast`: scopes, bindings, and which statements need work.

LibCST's QualifiedNameProvider costs several parses per file; this pass costs a fraction of
one. It records every binding per scope, resolves the loads that could matter, and flags the
statements that mention an XLA name or a string the rules care about. The rewriter then touches
only those statements.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from neuron_migrate.analysis.device_getters import mark_helper_devices
from neuron_migrate.analysis.locate import ast_dotted
from neuron_migrate.analysis.scopes import Binding, Scope, is_xla
from neuron_migrate.analysis.script_entry import entry_statement

if TYPE_CHECKING:
    from neuron_migrate.analysis.flow import Flows

_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


@dataclass(frozen=True)
class Use:
    """Where a value is used: the expression, with the parent nodes that say what for."""

    node: ast.AST
    scope: Scope
    parent: ast.AST | None
    grandparent: ast.AST | None


@dataclass
class Analysis:
    tree: ast.Module
    flagged: set[int] = field(default_factory=set)
    on_path: set[int] = field(default_factory=set)
    scope_of: dict[int, Scope] = field(default_factory=dict)
    xla_imports: list[Binding] = field(default_factory=list)
    module_scope: Scope | None = None
    flows: Flows | None = None  # built on demand, once (`neuron_migrate.analysis.flow`)
    # every name that can resolve, somewhere in the file, to an XLA or watched import; code
    # without them holds nothing the residual scan looks for
    import_names: frozenset[str] = frozenset()
    # the statement of the `__main__` block where a worker's set-up goes, when some rule
    # asks (`neuron_migrate.analysis.script_entry`)
    entry: ast.stmt | None = None
    # every call in the file, with the index of the top-level statement that holds it: the
    # walk sees them all, and some rules ask about the whole file (`Site.module_calls`)
    calls: list[tuple[ast.Call, int]] = field(default_factory=list)
    # flagged statements flagged only for naming XLA-era imports (torch_xla, or a watched
    # package: torch_neuronx, neuronx_distributed, ...): many only have references to
    # report, which `neuron_migrate.engine.review_only` can do without LibCST
    review_only: list[ast.stmt] = field(default_factory=list)
    # bindings that statements reported from the `ast` name: the imports the rewrite keeps
    used: set[int] = field(default_factory=set)
    # each statement's enclosing statement, by id (None at the top of the module)
    parents: dict[int, ast.stmt | None] = field(default_factory=dict)
    # statements a rule's plan over the whole file rewrites too (`Rule.edits`), by id
    edited: set[int] = field(default_factory=set)

    def mark_path(self, stmt: ast.stmt | None) -> None:
        """Put `stmt` and the statements around it on the rewrite's path."""
        on_path, parents = self.on_path, self.parents
        while stmt is not None and id(stmt) not in on_path:
            on_path.add(id(stmt))
            stmt = parents.get(id(stmt))

    def mark_paths(self) -> None:
        """Put what the rewrite reaches on its path: the flagged statements, the XLA
        imports and the script's entry, with the statements around them."""
        for unit_id in self.flagged:  # ids: `mark_path` goes on from the parent
            self.on_path.add(unit_id)
            self.mark_path(self.parents.get(unit_id))
        for binding in self.xla_imports:
            self.mark_path(binding.statement)
        self.mark_path(self.entry)

    @property
    def needs_rewrite(self) -> bool:
        return bool(self.flagged or self.xla_imports)


def analyse(
    tree: ast.Module,
    interesting_string: Callable[[str], bool],
    star_names: frozenset[str] = frozenset(),
    watched_roots: frozenset[str] = frozenset(),
    device_calls: frozenset[str] = frozenset(),
    entry: bool = False,
) -> Analysis:
    """`watched_roots` are top-level packages besides torch_xla whose names some rule reports
    (torch_neuronx, neuronx_distributed, ...); with `entry`, a file with something to migrate
    gets its script entry found (and put on the path, so the rewriter reaches it)."""
    walker = _Walker(interesting_string, star_names, watched_roots, device_calls)
    for index, statement in enumerate(tree.body):
        walker.top = index
        walker.statement(statement)
    analysis = walker.finish(tree)
    if entry and analysis.needs_rewrite:
        analysis.entry = entry_statement(tree, lambda s: id(s) in analysis.on_path)
        analysis.mark_path(analysis.entry)
    return analysis


class _Walker:
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

    def finish(self, tree: ast.Module) -> Analysis:
        result = Analysis(tree, scope_of=self.scope_of, module_scope=self.module_scope,
                          xla_imports=self.imports, calls=self.calls,
                          parents=self.stmt_parent)
        self._resolve_loads(result)
        result.flagged.update(id(unit) for unit in self.flagged_units)
        for unit in self.named_units:
            if id(unit) not in result.flagged:
                result.review_only.append(unit)
                result.flagged.add(id(unit))
        result.mark_paths()
        return result

    def _mark_device_bindings(self) -> set[str]:
        names: set[str] = set()
        # a dotted call's qualified name ends as it does (`xm.xla_device`); only a bare name
        # can be an alias of another (`from ... import xla_device as device`)
        last = {q.rsplit(".", 1)[-1] for q in self.device_calls}
        for binding, scope in self.call_bindings:
            call = binding.call_value
            dot = call.rfind(".")  # type: ignore[union-attr]
            if dot >= 0 and call[dot + 1:] not in last:  # type: ignore[index]
                continue
            if scope.qualname(call) in self.device_calls:
                binding.device_value = True
                names.add(binding.name)
        return names | mark_helper_devices(self.call_bindings, self.functions,
                                           self.device_calls)

    def _resolve_loads(self, result: Analysis) -> None:
        device_names = self._mark_device_bindings() | self.string_names
        star_short = {q.rsplit(".", 1)[1] for q in self.module_scope.star_names} \
            if self.module_scope.stars else set()
        imported = {b.name for b in self.imports} | self.watched_names
        result.import_names = frozenset(imported | star_short)
        names = imported | device_names
        moved = self.moved
        for node, scope, unit in self.loads:
            name = node.id
            if name not in names and name not in star_short:
                continue
            bindings = scope.lookup(name)
            if not bindings:
                continue
            for binding in bindings:
                if binding.string_value is not None or binding.device_value:
                    if id(node) in moved:
                        self.flag(unit)  # `x.to(device)`: rules may act on the placement
                elif binding.qualname is not None and (
                        is_xla(binding.qualname)
                        or binding.qualname.split(".", 1)[0] in self.watched_roots):
                    self.named_units.append(unit)


def imported_names(body: list[ast.stmt]) -> frozenset[str]:
    names: set[str] = set()
    for stmt in body:
        if isinstance(stmt, ast.Import):
            names.update(a.asname or a.name.split(".", 1)[0] for a in stmt.names)
        elif isinstance(stmt, ast.ImportFrom):
            names.update(a.asname or a.name for a in stmt.names)
    return frozenset(names)


def catches_import_error(handler: ast.ExceptHandler) -> bool:
    return catches(handler, _IMPORT_ERRORS)


def catches(handler: ast.ExceptHandler, names: frozenset[str]) -> bool:
    """Whether the `except` branch catches one of the exception classes `names` (a bare
    `except:` catches everything)."""
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(t, ast.Name) and t.id in names for t in types)


def is_import_error(node: ast.AST) -> bool:
    """`ImportError`, or an exception class that includes it."""
    return isinstance(node, ast.Name) and node.id in _IMPORT_ERRORS


# Fields `children` does not enter: expression contexts and operators (leaves that bind and
# load nothing), and fields that only ever hold a string, a number or None.
_NOT_CHILDREN = frozenset({"ctx", "op", "ops", "attr", "id", "arg", "type_comment", "kind",
                           "conversion", "is_async", "level", "module", "asname"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}

_PATTERN_NAMES: dict[type, str] = {ast.MatchAs: "name", ast.MatchStar: "name",
                                   ast.MatchMapping: "rest"}

_STATEMENTS: dict[type, Callable[[_Walker, ast.stmt], None]] = {
    ast.FunctionDef: _Walker._function,  # type: ignore[dict-item]
    ast.AsyncFunctionDef: _Walker._function,  # type: ignore[dict-item]
    ast.ClassDef: _Walker._class,  # type: ignore[dict-item]
    ast.Import: _Walker._import,  # type: ignore[dict-item]
    ast.ImportFrom: _Walker._import_from,  # type: ignore[dict-item]
    ast.Assign: _Walker._assign,  # type: ignore[dict-item]
    ast.AnnAssign: _Walker._assign,  # type: ignore[dict-item]
    ast.For: _Walker._for,  # type: ignore[dict-item]
    ast.AsyncFor: _Walker._for,  # type: ignore[dict-item]
    ast.With: _Walker._with,  # type: ignore[dict-item]
    ast.AsyncWith: _Walker._with,  # type: ignore[dict-item]
    ast.If: _Walker._if,  # type: ignore[dict-item]
    ast.Try: _Walker._try,  # type: ignore[dict-item]
    ast.Global: _Walker._global,  # type: ignore[dict-item]
    ast.Nonlocal: _Walker._global,  # type: ignore[dict-item]
    ast.Match: _Walker._match,
}
_EXPRESSIONS: dict[type, Callable[[_Walker, ast.AST], None]] = {
    ast.Name: _Walker._name,  # type: ignore[dict-item]
    ast.Constant: _Walker._constant,  # type: ignore[dict-item]
    ast.Call: _Walker._call,  # type: ignore[dict-item]
    ast.Attribute: _Walker._attribute,  # type: ignore[dict-item]
    ast.keyword: _Walker._attribute,  # type: ignore[dict-item]
    ast.Lambda: _Walker._lambda,  # type: ignore[dict-item]
    ast.NamedExpr: _Walker._named,  # type: ignore[dict-item]
    **{kind: _Walker._comprehension for kind in _COMPREHENSIONS},  # type: ignore[misc]
    **{kind: _Walker._pattern for kind in _PATTERN_NAMES},  # type: ignore[misc]
}
if hasattr(ast, "TryStar"):  # Python 3.11+
    _STATEMENTS[ast.TryStar] = _Walker._try  # type: ignore[assignment]
