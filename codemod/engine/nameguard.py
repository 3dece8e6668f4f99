"""The name guard: a rewrite never leaves a name unbound that the original bound.

The re-parse guard proves that the output compiles; it cannot see an import removed while
something still uses it, which compiles fine and fails with a NameError at run time (or only
on the path that reaches the use). This guard compares the output with the input, scope by
scope: every name the output loads must still be bound in the scope where the input's load of
it resolved, and every `__all__` entry the input bound must still be bound. Names only the
output binds (helpers, `import torch`) and names neither binds (builtins, star imports) are
not its business.

It reads the stdlib `ast` only, and only for files whose new text was generated.
"""

from __future__ import annotations

import ast
import difflib
import functools
import symtable
from collections.abc import Iterable
from dataclasses import dataclass, field

ScopeKey = tuple[str, ...]
"""A scope named by the path of definitions that leads to it: ("f",), ("C", "method"). Two
definitions with the same path (a function redefined under `if`) share one entry."""

_MODULE: ScopeKey = ()
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


@dataclass
class _Scope:
    kind: str  # "module", "function" or "class"
    bound: dict[str, int] = field(default_factory=dict)  # name -> first line binding it
    loads: dict[str, int] = field(default_factory=dict)  # name -> first line loading it
    globals: set[str] = field(default_factory=set)
    nonlocals: set[str] = field(default_factory=set)
    annotated: set[str] = field(default_factory=set)  # names loaded in annotations
    exports: list[tuple[str, int]] = field(default_factory=list)  # module: `__all__`


@dataclass(frozen=True)
class LostName:
    """A name the output loads (or exports) that its original binding no longer backs."""

    name: str
    line: int  # where the output loads or exports it
    bound_at: int  # where the original bound it
    exported: bool = False

    def message(self, path: str, line: int) -> str:
        """`line`: where the use is in the original file (see `original_line`)."""
        used = f"`__all__` lists `{self.name}`" if self.exported else \
            f"`{self.name}` is still used here"
        return (f"{path}:{line}: {used}, but the rewritten code no longer binds it "
                f"(the binding at line {self.bound_at} was removed)")


def lost_names(original: ast.Module, new: bytes, path: str = "<rewritten>",
               source: bytes | None = None) -> list[LostName]:
    """Every name the new module loads, or lists in `__all__`, whose binding the original had
    and the new module lost, in the new module's line order. `source`: the original's bytes,
    when known.

    The new module is first read through the compiler's own symbol tables (`symtable`, which
    builds no syntax tree in Python, a fraction of the cost of `ast.parse`); only when that
    finds a lost name is the new module parsed, for the lines and the final word. Of the
    original, only what it binds is read (and what its annotations name), never what it
    loads; without `:=` in its source, that skips every expression read as a value."""
    before = _table(original, bindings_only=source is not None and b":=" not in source)
    try:
        fast = _symbol_table(new, path, before)
    except (SyntaxError, ValueError):
        fast = None
    if fast is not None and not _lost(before, fast, exports(original)):
        return []
    return _lost(before, _table(ast.parse(new, filename=path)), None)


def _lost(before: dict[ScopeKey, _Scope], after: dict[ScopeKey, _Scope],
          exported: Iterable[tuple[str, int]] | None) -> list[LostName]:
    """`exported`: the `__all__` entries to check (None: those of the new module, which
    must then be an `ast` table, with `__all__` recorded)."""
    lost: list[LostName] = []
    for key, scope in after.items():
        for name, line in scope.loads.items():
            where = _resolve(before, key, name)
            if where is None:
                continue  # a builtin, a star import, or a name only the rewrite binds
            found = _resolve(after, key, name)
            if found is None or len(found) < len(where):  # unbound, or bound further out
                lost.append(LostName(name, line, before[where].bound[name]))
    module_before, module_after = before[_MODULE], after[_MODULE]
    for name, line in (after[_MODULE].exports if exported is None else exported):
        if name in module_before.bound and name not in module_after.bound:
            lost.append(LostName(name, line, module_before.bound[name], exported=True))
    return sorted(lost, key=lambda n: n.line)


_FOLDED = frozenset({"lambda", "listcomp", "setcomp", "dictcomp", "genexpr"})


def _symbol_table(source: bytes, path: str,
                  original: dict[ScopeKey, _Scope]) -> dict[ScopeKey, _Scope]:
    """The same table as `_table`, from the compiler's symbol tables; loads carry no line.
    Annotations are no loads to the compiler (strings, `from __future__ import annotations`):
    the names the original's annotations load count as loaded here too."""
    table: dict[ScopeKey, _Scope] = {}
    module = table[_MODULE] = _Scope("module")

    def read(entry: symtable.SymbolTable, key: ScopeKey, scope: _Scope) -> None:
        for child in entry.get_children():
            name = child.get_name()
            if name in _FOLDED and child.get_type() == "function":
                fold(child, scope)
                continue
            inner = (*key, name)
            kind = "class" if child.get_type() == "class" else "function"
            read(child, inner, table.get(inner) or table.setdefault(inner, _Scope(kind)))
        for name, symbol in _symbols(entry):
            if symbol.is_referenced():
                scope.loads.setdefault(name, 0)
            if symbol.is_declared_global():
                scope.globals.add(name)
                if symbol.is_assigned():
                    module.bound.setdefault(name, 0)
            elif symbol.is_nonlocal():
                scope.nonlocals.add(name)
            elif symbol.is_assigned() or symbol.is_imported() or symbol.is_parameter():
                scope.bound.setdefault(name, 0)

    def fold(entry: symtable.SymbolTable, scope: _Scope) -> None:
        """A lambda or comprehension: what it loads from outside is a load of `scope`."""
        for child in entry.get_children():
            fold(child, scope)
        for name, symbol in _symbols(entry):
            if symbol.is_referenced() and (symbol.is_free() or symbol.is_global()):
                scope.loads.setdefault(name, 0)

    read(symtable.symtable(source, path, "exec"), _MODULE, module)  # type: ignore[arg-type]
    for key, scope in original.items():
        if scope.annotated and key in table:
            table[key].loads.update(dict.fromkeys(scope.annotated, 0))
    return table


def _symbols(entry: symtable.SymbolTable) -> Iterable[tuple[str, symtable.Symbol]]:
    """What `entry.lookup` gives for each identifier, but without the namespaces `lookup`
    adds to each symbol (a search of all the table's children per identifier, the most
    costly part of reading a module's table, and never read here). The `Symbol` is built as
    `lookup` builds it (Python 3.10 to 3.13), so each `is_...` answers the same."""
    raw = getattr(entry, "_table", None)
    if raw is None:  # a Python whose wrapper keeps its table elsewhere
        return ((name, symbol) for name in entry.get_identifiers()
                if not (symbol := entry.lookup(name))._flags & _COMPREHENSION_TARGET)
    module_scope = raw.name == "top"
    return ((name, symtable.Symbol(name, flags, module_scope=module_scope))
            for name, flags in raw.symbols.items() if not flags & _COMPREHENSION_TARGET)


def _comprehension_target_flag() -> int:
    """The compiler's flag for a comprehension's own loop variable, which `_symtable` does
    not export. From Python 3.12 list, set and dict comprehensions are inlined: they have no
    table of their own, and a loop variable the enclosing scope does not otherwise use is
    entered in that scope's table, marked with this flag. Such a name is bound and read only
    inside the comprehension, so it is neither a binding nor a load of the scope. The flag
    is found by comparing a comprehension's target with a `for` loop's, so it follows the
    compiler rather than a copied constant."""
    local_bits = (1 << symtable.SCOPE_OFF) - 1

    def target_flags(source: str) -> int:
        entry = symtable.symtable(source, "<flag>", "exec")
        tables = [entry, *entry.get_children()]
        return next(table._table.symbols["_"] for table in tables  # type: ignore[attr-defined]
                    if "_" in table._table.symbols) & local_bits  # type: ignore[attr-defined]

    return target_flags("[0 for _ in ()]") & ~target_flags("for _ in (): pass")


_COMPREHENSION_TARGET = _comprehension_target_flag()


def original_line(original: bytes, new: bytes, line: int) -> int:
    """The line of the original file that line `line` of the new one comes from: the same
    line if the rewrite left it as it was, else the first line of the code it replaced.
    Only for messages (it diffs the two files)."""
    old_lines, new_lines = original.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, old_start, old_end, new_start, new_end in matcher.get_opcodes():
        if new_start < line <= new_end:
            if tag == "equal":
                return old_start + line - new_start
            return old_start + 1
    return line


def _resolve(table: dict[ScopeKey, _Scope], key: ScopeKey, name: str) -> ScopeKey | None:
    """The scope a load of `name` in `key` finds it bound in, by Python's rules: the scope
    itself, then the enclosing functions (never a class), then the module. A scope the table
    lacks (a helper the rewrite added) looks from its nearest known ancestor."""
    while key not in table:
        key = key[:-1]
    scope = table[key]
    if name in scope.globals:
        return _MODULE if name in table[_MODULE].bound else None
    first = name not in scope.nonlocals
    while True:
        scope = table[key]
        if (first or scope.kind != "class") and name in scope.bound:
            return key
        if not key:
            return None
        first = False
        key = key[:-1]
        while key not in table:
            key = key[:-1]


def exports(tree: ast.Module) -> Iterable[tuple[str, int]]:
    """The strings a module-level `__all__` is given, with their lines: `__all__ = [...]`, `+= [...]`,
    `.extend([...])`, `.append("...")`."""
    for statement in tree.body:
        value: ast.AST | None = None
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
            targets = [statement.target]
        else:
            targets = []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = statement.value  # type: ignore[union-attr]
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            func = statement.value.func
            if isinstance(func, ast.Attribute) and func.attr in ("extend", "append") and \
                    isinstance(func.value, ast.Name) and func.value.id == "__all__":
                arguments = statement.value.args
                if func.attr == "append":
                    value = ast.Tuple(elts=list(arguments))
                elif len(arguments) == 1 and isinstance(arguments[0], (ast.List, ast.Tuple)):
                    # `extend` adds the elements of its one argument
                    value = arguments[0]
        if value is None:
            continue
        elements = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
        for element in elements:
            if isinstance(element, ast.Constant) and isinstance(element.value, str):
                yield element.value, element.lineno


def _table(tree: ast.Module, bindings_only: bool = False) -> dict[ScopeKey, _Scope]:
    """`bindings_only`: the tree has no `:=` (a `NamedExpr`); its loads are left out."""
    walker = _NameRecorder(bindings_only)
    walker.body(tree.body)
    walker.table[_MODULE].exports = list(exports(tree))
    return walker.table


class _NameRecorder:
    """Records, per scope, the names bound and loaded. Lambdas and comprehensions are folded
    into the scope around them (they are not named, so they could not be paired between the
    two files); the names they bind for themselves are left out of their loads."""

    def __init__(self, bindings_only: bool = False) -> None:
        self.bindings_only = bindings_only
        self.key: ScopeKey = _MODULE
        self.scope = _Scope("module")
        self.table: dict[ScopeKey, _Scope] = {_MODULE: self.scope}
        self.hidden: list[set[str]] = []  # names lambdas and comprehensions bind

    def body(self, statements: Iterable[ast.AST]) -> None:
        for statement in statements:
            self.node(statement)

    def node(self, node: ast.AST) -> None:
        kind = type(node)
        if self.bindings_only and isinstance(node, ast.expr) and \
                type(getattr(node, "ctx", None)) not in _TARGETS:
            # An expression read as a value binds nothing: the names bound inside one
            # (parameters of lambdas, targets of comprehensions) are their own, and only
            # `:=` binds outside, which the tree has none of. Every other binding, and every
            # annotation (read by `annotation` on its own), is reached from statements and
            # from targets (`Store`, `Del`).
            return
        if kind is ast.Name:
            self.name(node.id, node.ctx, node.lineno)  # type: ignore[attr-defined]
        elif kind is ast.Attribute:  # its other fields are a string and a context
            self.node(node.value)  # type: ignore[attr-defined]
        elif kind is ast.Constant:  # nothing in it binds or loads
            return
        elif kind in _FUNCTIONS:
            self.function(node)  # type: ignore[arg-type]
        elif kind is ast.ClassDef:
            self.klass(node)  # type: ignore[arg-type]
        elif kind is ast.Lambda:
            self.lambda_(node)  # type: ignore[arg-type]
        elif kind in _COMPREHENSIONS:
            self.comprehension(node)
        elif kind is ast.Import or kind is ast.ImportFrom:
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.name != "*":
                    self.bind(alias.asname or alias.name.split(".", 1)[0], node.lineno)  # type: ignore[attr-defined]
        elif kind is ast.Global:
            self.scope.globals.update(node.names)  # type: ignore[attr-defined]
        elif kind is ast.Nonlocal:
            self.scope.nonlocals.update(node.names)  # type: ignore[attr-defined]
        elif kind is ast.AnnAssign:
            self.annotation(node.annotation)  # type: ignore[attr-defined]
            if node.value is not None:  # type: ignore[attr-defined]
                self.node(node.value)  # type: ignore[attr-defined]
            self.node(node.target)  # type: ignore[attr-defined]
        elif kind is ast.NamedExpr:
            self.node(node.value)  # type: ignore[attr-defined]
            self.bind(node.target.id, node.lineno)  # type: ignore[attr-defined]
        else:
            name = _BINDING_FIELDS.get(kind)
            if name is not None and getattr(node, name, None):
                self.bind(getattr(node, name), node.lineno)  # type: ignore[attr-defined]
            self.children(node)

    def children(self, node: ast.AST) -> None:
        for name in _fields(type(node)):
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        self.node(item)
            elif isinstance(value, ast.AST):
                self.node(value)

    def name(self, name: str, ctx: ast.expr_context, line: int) -> None:
        if type(ctx) is not ast.Load:
            self.bind(name, line)
        elif name not in self.scope.loads and \
                not (self.hidden and any(name in hidden for hidden in self.hidden)):
            self.scope.loads[name] = line

    def bind(self, name: str, line: int) -> None:
        if self.hidden and any(name in hidden for hidden in self.hidden):
            return
        scope = self.scope
        if name in scope.globals:
            scope = self.table[_MODULE]
        elif name in scope.nonlocals:
            return  # bound in an enclosing function, which binds it itself
        scope.bound.setdefault(name, line)

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.body(node.decorator_list)
        self.defaults(node.args)
        self.annotation(node.returns)
        self.bind(node.name, node.lineno)
        self.enter(node.name, "function", lambda: (self.parameters(node.args, node.lineno),
                                                   self.body(node.body)))

    def klass(self, node: ast.ClassDef) -> None:
        self.body(node.decorator_list)
        self.body(node.bases)
        self.body(k.value for k in node.keywords)
        self.bind(node.name, node.lineno)
        self.enter(node.name, "class", lambda: self.body(node.body))

    def lambda_(self, node: ast.Lambda) -> None:
        self.defaults(node.args)
        self.hidden.append({a.arg for a in _arguments(node.args)})
        self.node(node.body)
        self.hidden.pop()

    def comprehension(self, node: ast.AST) -> None:
        generators: list[ast.comprehension] = node.generators  # type: ignore[attr-defined]
        self.node(generators[0].iter)  # evaluated in the enclosing scope
        hidden: set[str] = set()
        for generator in generators:
            hidden |= {n.id for n in ast.walk(generator.target) if isinstance(n, ast.Name)}
        self.hidden.append(hidden)
        for index, generator in enumerate(generators):
            if index:
                self.node(generator.iter)
            self.body(generator.ifs)
        for name in ("elt", "key", "value"):
            value = getattr(node, name, None)
            if value is not None:
                self.node(value)
        self.hidden.pop()

    def defaults(self, args: ast.arguments) -> None:
        """Defaults and annotations are evaluated in the enclosing scope."""
        self.body(args.defaults)
        self.body(d for d in args.kw_defaults if d is not None)
        for arg in _arguments(args):
            self.annotation(arg.annotation)

    def annotation(self, node: ast.expr | None) -> None:
        """An annotation, and the names in it when it is a string (a forward reference
        that `typing.get_type_hints` evaluates, and linters check)."""
        if node is None:
            return
        self.node(node)
        self.scope.annotated.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                parsed = ast.parse(node.value.strip(), mode="eval")
            except (SyntaxError, ValueError):
                return
            for name in ast.walk(parsed):
                if isinstance(name, ast.Name):
                    self.name(name.id, name.ctx, node.lineno)
                    self.scope.annotated.add(name.id)

    def parameters(self, args: ast.arguments, line: int) -> None:
        for arg in _arguments(args):
            self.bind(arg.arg, line)

    def enter(self, name: str, kind: str, body: object) -> None:
        outer_key, outer_scope, outer_hidden = self.key, self.scope, self.hidden
        self.key = (*outer_key, name)
        self.scope = self.table.get(self.key) or self.table.setdefault(self.key, _Scope(kind))
        self.hidden = []
        body()  # type: ignore[operator]
        self.key, self.scope, self.hidden = outer_key, outer_scope, outer_hidden


@functools.cache
def _fields(kind: type) -> tuple[str, ...]:
    """The fields of a node type that can hold nodes the walker acts on: all but `ctx`, an
    expression context (`Load`, `Store`, `Del`), a node with no fields of its own that the
    walker passes over."""
    return tuple(name for name in kind._fields if name != "ctx")  # type: ignore[attr-defined]


def _arguments(args: ast.arguments) -> list[ast.arg]:
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    return [*every, *(a for a in (args.vararg, args.kwarg) if a is not None)]


_TARGETS = (ast.Store, ast.Del)

_BINDING_FIELDS: dict[type, str] = {
    ast.ExceptHandler: "name", ast.MatchAs: "name", ast.MatchStar: "name",
    ast.MatchMapping: "rest",
}
