"""Functions of the file that return the XLA device: `device = get_device()` holds a device
when `get_device` returns `xm.xla_device()` (or a name holding one) in each of its `return`
statements (a function that may return another device is not followed).

Tutorial-style scripts often get their device through such a helper; the rules that act
where a device is used (`model.to(device)`, NM503's compile) must see it as they see
`device = xm.xla_device()`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from neuron_migrate.analysis.locate import ast_dotted
from neuron_migrate.analysis.scopes import Binding, Scope

Function = ast.FunctionDef | ast.AsyncFunctionDef
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_ROUNDS = 3  # a helper returning another helper's device, a few levels deep


def mark_helper_devices(calls: list[tuple[Binding, Scope]],
                        functions: dict[int, tuple[Function, Scope]],
                        device_calls: frozenset[str]) -> set[str]:
    """Mark the bindings assigned a call of a function of this file that returns the device
    (`functions`: by the id of the binding of its name, the definition and its own scope);
    the names marked."""
    names: set[str] = set()
    candidates = [(b, s) for b, s in calls
                  if not b.device_value and b.call_value and "." not in b.call_value]
    for _ in range(_ROUNDS):
        marked = False
        for binding, scope in candidates:
            if binding.device_value:
                continue
            bound = scope.lookup(binding.call_value)  # type: ignore[arg-type]
            if bound and all(id(b) in functions and
                             _returns_device(*functions[id(b)], device_calls) for b in bound):
                binding.device_value = marked = True
                names.add(binding.name)
        if not marked:
            break
    return names


def _returns_device(function: Function, scope: Scope, device_calls: frozenset[str]) -> bool:
    values = [r.value for r in _returns(function.body)]
    return bool(values) and all(_is_device(v, scope, device_calls) for v in values)


def _is_device(value: ast.expr | None, scope: Scope, device_calls: frozenset[str]) -> bool:
    if isinstance(value, ast.Call):
        name = ast_dotted(value.func)
        return name is not None and scope.qualname(name) in device_calls
    if isinstance(value, ast.Name):
        bound = scope.lookup(value.id)
        return bool(bound) and all(b.device_value for b in bound)
    return False


def _returns(body: list[ast.stmt]) -> Iterator[ast.Return]:
    """The function's own `return` statements (not those of functions inside it)."""
    pending: list[ast.AST] = list(body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return):
            yield node
        elif isinstance(node, (ast.stmt, ast.excepthandler, ast.match_case)) and \
                not isinstance(node, _NESTED):
            pending.extend(c for c in ast.iter_child_nodes(node)
                           if isinstance(c, (ast.stmt, ast.excepthandler, ast.match_case)))
