"""The script's entry: the place for the set-up every worker needs first.

Some XLA-era set-up was implicit: under PJRT, a script torchrun started was part of a world of
processes without creating one. Its native form is a statement the script must run before its
training code (`init_process_group("neuron")`), and a script has one place for that: its
`if __name__ == "__main__":` block, before the statement that starts the module's own code.
A module without that block is a library (or runs only when imported) and has no entry.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def main_block(tree: ast.Module) -> ast.If | None:
    """The first top-level `if __name__ == "__main__":` (either way round)."""
    for statement in tree.body:
        if isinstance(statement, ast.If) and _is_main_test(statement.test):
            return statement
    return None


def _is_main_test(test: ast.expr) -> bool:
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or \
            not isinstance(test.ops[0], ast.Eq):
        return False
    sides = (test.left, test.comparators[0])
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and \
        any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)


def entry_statement(tree: ast.Module, touched: Callable[[ast.stmt], bool]) -> ast.stmt | None:
    """The statement of the main block before which a worker's set-up goes: the first that
    runs the module's migrated code (a rule rewrites it, `touched`, or it calls a function
    or class of the module that holds such code, directly or through others) or places
    something on a device (`.to(...)`); else the first that is not an import. Statements
    before it (argument parsing, environment settings) run first, as they did; the training
    code runs after."""
    block = main_block(tree)
    if block is None:
        return None
    working = _Working(tree, touched)
    candidates = [s for s in block.body if not isinstance(s, (ast.Import, ast.ImportFrom))
                  and not _is_docstring(s) and not _sets_environment(s)]
    for statement in candidates:
        if touched(statement) or _starts_work(statement, working):
            return statement
    return candidates[0] if candidates else None


class _Working:
    """The module's functions and classes that hold migrated code, or call (by name) one
    that does, at any depth: asked only about the names the main block's statements call,
    each answered by following calls from it until a touched definition turns up, so that
    the definitions nothing asks about are never walked."""

    def __init__(self, tree: ast.Module, touched: Callable[[ast.stmt], bool]) -> None:
        self.definitions = {s.name: s for s in tree.body if isinstance(s, _DEFINITIONS)}
        self.touched = touched
        self.known: dict[str, bool] = {}
        self.calls: dict[str, set[str]] = {}

    def __contains__(self, name: str) -> bool:
        if name not in self.definitions:
            return False
        if name not in self.known:
            self.known[name] = self._reaches_touched(name)
        return self.known[name]

    def _reaches_touched(self, name: str) -> bool:
        seen, todo = {name}, [name]
        while todo:
            current = todo.pop()
            if self.known.get(current) is False:
                continue  # nothing it reaches is touched
            if self.known.get(current) or self.touched(self.definitions[current]):
                return True
            for callee in self._callees(current):
                if callee not in seen:
                    seen.add(callee)
                    todo.append(callee)
        for other in seen:  # everything reached was followed to its end
            self.known[other] = False
        return False

    def _callees(self, name: str) -> set[str]:
        if name not in self.calls:
            definitions = self.definitions
            self.calls[name] = {n.func.id for n in ast.walk(definitions[name])
                                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                                and n.func.id in definitions}
        return self.calls[name]


def _is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) \
        and isinstance(statement.value.value, str)


def _sets_environment(statement: ast.stmt) -> bool:
    """`os.environ[...] = ...`, `os.environ.setdefault(...)` / `.update(...)`,
    `os.putenv(...)`, or an `if` that only does such things (and prints)."""
    if isinstance(statement, ast.If):
        return all(isinstance(s, ast.Pass) or _prints(s) or _sets_environment(s)
                   for s in (*statement.body, *statement.orelse))
    if isinstance(statement, ast.Assign):
        return all(isinstance(t, ast.Subscript) and _is_environ(t.value)
                   for t in statement.targets)
    if not isinstance(statement, ast.Expr) or not isinstance(statement.value, ast.Call):
        return False
    func = statement.value.func
    return isinstance(func, ast.Attribute) and (
        func.attr in ("setdefault", "update", "__setitem__") and _is_environ(func.value)
        or func.attr == "putenv" and isinstance(func.value, ast.Name) and func.value.id == "os")


def _prints(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) and \
        isinstance(statement.value.func, ast.Name) and statement.value.func.id == "print"


def _is_environ(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "environ" or \
        isinstance(node, ast.Attribute) and node.attr == "environ"


def _starts_work(statement: ast.stmt, defined: _Working) -> bool:
    for node in ast.walk(statement):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in defined:
            return True
        if isinstance(func, ast.Attribute) and func.attr == "to":
            return True
    return False
