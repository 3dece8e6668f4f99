"""Whether a `try` around `xm.xla_device()` tests for the device (NM101).

`xm.xla_device()` raised RuntimeError when no XLA device was there; `torch.device("neuron")`
never raises. So a `try` whose `except` fell back when the device was missing (to the CPU, to
CUDA, to a flag saying there is none) would always pass once rewritten: that is reported. Any
other `try` that happens to hold the call, such as a generic error logger around a whole
function or one whose handler stops the program anyway, keeps the rewrite: left alone, the
call would keep `import torch_xla` and the file would fail at import on TorchNeuron.
"""

from __future__ import annotations

import ast

from neuron_migrate.ruleapi.analysis import ancestors, ast_dotted, stops

_LARGEST_PROBE = 3
"""A probe's body does little besides getting the device: at most this many statements, not
counting imports, `pass` and messages (`print`, logging)."""
_MESSAGES = frozenset({"print", "debug", "info", "warning", "warn", "error", "exception",
                       "critical", "log", "master_print"})
_TRIES = (ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


def tests_for_device(handler: ast.ExceptHandler, tree: ast.Module, at: ast.stmt) -> bool:
    """Whether the `try` whose `handler` catches what the device call at `at` raised is a test
    for the device: it imports torch_xla and names RuntimeError itself, or its body is
    essentially the device's acquisition and its handler falls back rather than stops."""
    guarded = _try_of(handler, tree, at)
    if guarded is None:
        return True  # cannot tell: the cautious answer
    if _imports_torch_xla(guarded.body) and _names(handler, "RuntimeError"):
        return True
    return not stops(handler) and _small(guarded.body)


def _try_of(handler: ast.ExceptHandler, tree: ast.Module, at: ast.stmt) -> ast.Try | None:
    chain = ancestors(tree, at) or []
    return next((n for n in reversed(chain)
                 if isinstance(n, _TRIES) and any(h is handler for h in n.handlers)), None)


def _small(body: list[ast.stmt]) -> bool:
    """Whether a block does little besides one thing: few statements (blocks inside `if`,
    `with` and `try` counted), no loop."""
    count = 0
    pending = list(body)
    while pending:
        statement = pending.pop()
        if isinstance(statement, (ast.For, ast.AsyncFor, ast.While)):
            return False
        if isinstance(statement, (ast.If, ast.With, ast.AsyncWith, *_TRIES)):
            for name in ("body", "orelse", "finalbody"):
                pending.extend(getattr(statement, name, []))
            for inner in getattr(statement, "handlers", []):
                pending.extend(inner.body)
            continue
        if not _incidental(statement):
            count += 1
    return count <= _LARGEST_PROBE


def _incidental(statement: ast.stmt) -> bool:
    """Imports, `pass`, a docstring, a message."""
    if isinstance(statement, (ast.Import, ast.ImportFrom, ast.Pass)):
        return True
    if not isinstance(statement, ast.Expr):
        return False
    value = statement.value
    if isinstance(value, ast.Constant):
        return True
    name = ast_dotted(value.func) if isinstance(value, ast.Call) else None
    return name is not None and name.rsplit(".", 1)[-1] in _MESSAGES


def _imports_torch_xla(body: list[ast.stmt]) -> bool:
    for statement in body:
        if isinstance(statement, ast.Import) and any(
                a.name.split(".", 1)[0] == "torch_xla" for a in statement.names):
            return True
        if isinstance(statement, ast.ImportFrom) and \
                (statement.module or "").split(".", 1)[0] == "torch_xla":
            return True
    return False


def _names(handler: ast.ExceptHandler, exception: str) -> bool:
    """Whether the handler names this exception class itself (not `Exception`)."""
    caught = handler.type
    types = caught.elts if isinstance(caught, ast.Tuple) else [caught] if caught else []
    return any((ast_dotted(t) or "").rsplit(".", 1)[-1] == exception for t in types)
