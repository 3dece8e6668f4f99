"""`try: import ... except ImportError:` guards: which names a guarded block imports and
whether a handler catches the failed import.

The analysis reads them to know which names a fallback may rebind (`xm = None`), and the
engine to know when a guard around imports it removed is dead.
"""

from __future__ import annotations

import ast

from neuron_migrate.analysis.locate import ast_dotted

_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
_EXITS = frozenset({"exit", "quit", "sys.exit", "os._exit"})


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


def stops(handler: ast.ExceptHandler) -> bool:
    """Whether the branch ends by raising or exiting: nothing falls back, the program stops
    there."""
    last = handler.body[-1]
    if isinstance(last, ast.Raise):
        return True
    if isinstance(last, ast.Assert):
        return isinstance(last.test, ast.Constant) and not last.test.value
    return isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and \
        ast_dotted(last.value.func) in _EXITS
