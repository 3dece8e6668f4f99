"""Values and calls for `neuron_migrate.analysis.flow`: which flow an expression's value belongs to, and what
it meets on the way (comparisons, formatting, the functions of the file it is passed to, an
argparse option's default and choices, the places it ends)."""

from __future__ import annotations

import ast
from collections.abc import Callable

from neuron_migrate.analysis.flow_graph import Function, Graph, Key, Source, starred
from neuron_migrate.analysis.flow_index import DEFAULTS, OPTION, children, option_dest
from neuron_migrate.analysis.locate import ast_dotted

_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_SAME_TEXT = frozenset({"lower", "strip", "lstrip", "rstrip", "casefold"})
_COMPARED = frozenset({"startswith", "endswith", "__eq__"})
_ASSERTED = frozenset({"assertEqual", "assertNotEqual", "assertIn", "assertNotIn",
                       "assertEquals"})  # unittest's comparisons
SPECIAL_METHODS = _COMPARED | _ASSERTED | _SAME_TEXT | OPTION | DEFAULTS | {"format", "get"}
"""Every method name `Values.method` may follow: other calls only end their arguments."""
PARTIAL_CALLS = _ASSERTED | DEFAULTS
"""Methods `Values.method` follows without walking all their arguments (an assertion's
keywords, `set_defaults`' positional arguments)."""


class Values(Graph):
    def target_key(self, target: ast.expr) -> Key | None:
        """The key of a name or a stored attribute (None for anything else)."""
        if isinstance(target, ast.Name):
            return self.name_key(target.id)
        if isinstance(target, ast.Attribute) and target.attr in self.attributes:
            key = ("attribute", target.attr)
            self.add_name(key, target.attr)
            return key
        return None

    def name_key(self, name: str) -> Key | None:
        """The key of the binding `name` refers to here. Kept per scope and name (the second
        time, the name and its source are recorded already); a name from a `from ... import *`
        has one bindings list per module too (`Scope._star`), so its uses meet."""
        if self.locals:
            for owner, names in reversed(self.locals):
                if name in names:
                    return ("local", owner, name)
        if self.scope is None:
            return None
        memo = (id(self.scope), name)
        known = self._name_memo.get(memo, self._name_memo)
        if known is not self._name_memo:
            return known  # type: ignore[return-value]
        bindings = self.scope.lookup(name)
        if not bindings:
            self._name_memo[memo] = None
            return None
        key = ("name", id(bindings))
        self._name_memo[memo] = key
        if self.add_name(key, name):
            if any(binding.is_import for binding in bindings):
                self.add_source(key, Source("name", f"`{name}`, imported", 0))
            elif self.scope.module.bindings.get(name) is bindings and not name.startswith("_"):
                self.add_source(key, Source("module", f"the module-level `{name}`, which "
                                            "other modules can import", 0))
        return key

    def item_key(self, node: ast.Subscript) -> Key | None:
        """`config["device"]`: an item stored by that name somewhere in the file."""
        index = node.slice
        if isinstance(index, ast.Constant) and isinstance(index.value, str) and \
                index.value in self.attributes and not self.imported(node.value):
            return ("attribute", index.value)
        return None

    def discard(self, node: ast.expr) -> None:
        """An expression whose value goes nowhere (a statement, a decorator, help text)."""
        self.value(node)

    def test(self, node: ast.expr, branched: ast.AST | None) -> None:
        """A test (of `branched`, an `if`, `while`, conditional expression or `case`; None
        for an `assert`): a comparison in it is marked when a branch picks the device."""
        outer = self.guard
        self.guard = node.lineno if branched is not None and self.picks_device(branched) \
            else None
        self.end(self.value(node), node, _TEST)
        self.guard = outer

    def picks_device(self, branched: ast.AST) -> bool:
        """Whether a call in the branches calls the XLA device getter or names the XLA device
        (the getter's name is resolved in the test's scope). The calls come from the index's
        depth-first run, and each call's answers are kept: nested tests ask about the same
        calls again."""
        start, stop = self.index.branches[id(branched)]
        calls = self.index.calls
        for position in range(start, stop):
            if self._names_device(calls[position]) or self._names_literal(position):
                return True
        return False

    def _names_device(self, call: ast.Call) -> bool:
        func = call.func
        if self.scope is None or type(func) is ast.Attribute and func.attr not in self._tails:
            return False  # `a.b.f` resolves to a name ending in `.f`: no getter's name
        key = (id(self.scope), id(call))
        found = self._device_memo.get(key)
        if found is None:
            found = self._device_memo[key] = \
                self.scope.qualname(ast_dotted(call.func)) in self.device_calls
        return found

    def _names_literal(self, position: int) -> bool:
        found = self._literal_memo.get(position)
        if found is None:
            call = self.index.calls[position]
            found = self._literal_memo[position] = any(
                isinstance(a, (ast.Constant, ast.JoinedStr)) and self.literal(a)
                for a in (*call.args, *(k.value for k in call.keywords)))
        return found

    def value(self, node: ast.expr) -> Key:
        """The key of the flow `node`'s value belongs to; what it holds is followed too."""
        handler = _EXPRESSIONS.get(type(node))
        if handler is not None:
            return handler(self, node)
        for child in children(node):  # anything else: its parts end in it
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
            self.add_name(key, node.attr)
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
                    not starred(comparator.elts):
                keys.extend(self.value(e) for e in comparator.elts)
            else:
                keys.append(self.value(comparator))
        key = self.union(*keys)
        if self.guard is not None:
            self.add_guard(key, self.guard)
        return self.new()

    def _boolop(self, node: ast.BoolOp) -> Key:
        return self.union(*(self.value(v) for v in node.values))

    def _ifexp(self, node: ast.IfExp) -> Key:
        self.test(node.test, node)
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
                self.add_name(("attribute", key.value), key.value)
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
        for child in children(node):
            if isinstance(child, ast.expr):
                self.end(self.value(child), child, node)
            elif isinstance(child, ast.comprehension):
                self.end(self.value(child.iter), child.iter, node)
                for condition in child.ifs:
                    self.end(self.value(condition), condition, _TEST)
        self.locals.pop()
        return self.opaque(node)

    def _call(self, node: ast.Call) -> Key:
        return self.call(node)

    def imported(self, node: ast.expr) -> bool:
        """Whether a dotted expression starts at an import (`os.environ`, `torch`)."""
        while isinstance(node, ast.Attribute):
            node = node.value
        if not isinstance(node, ast.Name) or self.scope is None or \
                self.locals and any(node.id in names for _, names in self.locals):
            return False
        key = (id(self.scope), node.id)  # the same few roots, asked again and again
        found = self._imported_memo.get(key)
        if found is None:
            found = self._imported_memo[key] = self.scope.resolve(node.id, []) is not None
        return found

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
                self.add_guard(key, self.guard)
            return self.new()
        if name in _ASSERTED and len(args) >= 2 and not starred(args):
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
        if name in OPTION and option_dest(node) is not None:
            return self.option(node, option_dest(node))  # type: ignore[arg-type]
        if name in DEFAULTS:
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
        self.add_name(key, dest)
        self.add_source(key, Source("option", "the command-line option "
                                    f"`{flags[0] if flags else dest}`", node.lineno, node,
                                    self.scope))
        self.discard(node.func.value)  # type: ignore[attr-defined]
        for arg in node.args:
            self.discard(arg)
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg in ("default", "const"):
                self.union(key, self.value(value))
            elif keyword.arg == "choices" and isinstance(value, (ast.List, ast.Tuple, ast.Set)) \
                    and not starred(value.elts):
                self.union(key, *(self.value(e) for e in value.elts))
            elif keyword.arg in ("help", "type", "action", "metavar", "dest", "required",
                                 "nargs"):
                self.discard(value)
            else:
                self.end(self.value(value), value, keyword, node)
        return self.new()

    def callees(self, node: ast.Call) -> list[Function] | None:
        """The functions defined in this file that this call may run (None: not one of
        them). A plain name is certain; `x.method(...)` may be any method of that name."""
        func = node.func
        if isinstance(func, ast.Name):
            found = self.defined(func.id, calls=True)
            return found or None
        if isinstance(func, ast.Attribute) and not self.imported(func.value):
            return self.methods.get(func.attr) or None
        return None

    def defined(self, name: str, calls: bool = False) -> list[Function]:
        """The functions (with `calls`, and classes: their `__init__`) of the file `name`
        refers to here. The answer is kept per scope: the scopes and the functions are
        complete before the walk, and callers only read the list."""
        if self.locals and any(name in names for _, names in self.locals) or \
                self.scope is None:
            return []
        key = (id(self.scope), name, calls)
        found = self._defined_memo.get(key)
        if found is None:
            found = self._defined_memo[key] = self._defined(name, calls)
        return found

    def _defined(self, name: str, calls: bool) -> list[Function]:
        bindings = self.scope.lookup(name)  # type: ignore[union-attr]
        if not bindings:
            return []
        found = self.functions.get(id(bindings), [])
        if calls:
            found = found + self.classes.get(id(bindings), [])
        return found if len(found) == len(bindings) or not calls else []

    def pass_arguments(self, node: ast.Call, functions: list[Function]) -> None:
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



_TEST = ast.If(test=ast.Constant(True), body=[], orelse=[])
"""The parent given to a value used only for its truth (an `if` or `while` test, an
`assert`): nothing depends on its text."""


def _on_self(func: ast.Attribute) -> bool:
    value = func.value
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls")
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
        value.func.id == "super"


_EXPRESSIONS: dict[type, Callable[[Values, ast.expr], Key]] = {
    ast.Constant: Values._constant,  # type: ignore[dict-item]
    ast.JoinedStr: Values._joined,  # type: ignore[dict-item]
    ast.Name: Values._name,  # type: ignore[dict-item]
    ast.Attribute: Values._attribute,  # type: ignore[dict-item]
    ast.Subscript: Values._subscript,  # type: ignore[dict-item]
    ast.Compare: Values._compare,  # type: ignore[dict-item]
    ast.BoolOp: Values._boolop,  # type: ignore[dict-item]
    ast.IfExp: Values._ifexp,  # type: ignore[dict-item]
    ast.BinOp: Values._binop,  # type: ignore[dict-item]
    ast.NamedExpr: Values._named,  # type: ignore[dict-item]
    ast.Tuple: Values._display,  # type: ignore[dict-item]
    ast.List: Values._display,  # type: ignore[dict-item]
    ast.Set: Values._display,  # type: ignore[dict-item]
    ast.Dict: Values._dict,  # type: ignore[dict-item]
    ast.Call: Values._call,  # type: ignore[dict-item]
    **{kind: Values._scoped for kind in _SCOPES},  # type: ignore[dict-item]
}
