"""Whether a function runs a training step, for the rules that must not hand one to Dynamo.

`torch_xla.compile(fn)` wrapped whole training steps; `torch.compile` refuses them (Dynamo
will not trace `Optimizer.zero_grad`, `Tensor.backward()` or `optimizer.step()` under
`fullgraph=True`). The question is asked of the function's body, and of the functions and
methods of this file it calls, a few levels deep.
"""

from __future__ import annotations

import ast
import functools
from typing import TYPE_CHECKING

import libcst as cst

from neuron_migrate.analysis.locate import ast_dotted
from neuron_migrate.syntax.quote import code
from neuron_migrate.analysis.reaching import definitions_of

if TYPE_CHECKING:  # rules hand their Site in; the analysis needs nothing else of it
    from neuron_migrate.rule import Site

Function = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda

_TRAINING_METHODS = frozenset({
    "backward", "zero_grad", "step", "optimizer_step", "reduce_gradients",
    "clip_grad_norm_", "clip_grad_value_",
})
"""Calls (as `x.name(...)`) that only a training step makes: autograd, optimizer, scheduler."""
_TRAINING_FUNCTIONS = ("autograd.grad", "autograd.backward")
_DEPTH = 3


def called_functions(fn: cst.BaseExpression, site: Site) -> list[Function] | None:
    """The definitions in this file that `fn` (a name, `self.method`, a lambda) stands for at
    this place, or None when its body cannot be seen."""
    if isinstance(fn, cst.Lambda):
        lambdas = [n for n in ast.walk(site.statement) if isinstance(n, ast.Lambda)]
        return lambdas[:1] or None  # the first lambda of the statement: the one passed here
    name = code(fn)
    if not all(part.isidentifier() for part in name.split(".")):
        return None
    return definitions_of(site.module_tree, site.statement, name)  # type: ignore[return-value]


def decorated(site: Site) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function whose decorator the matched node is, if it is one."""
    statement = site.statement
    if isinstance(site.parent, cst.Decorator) and \
            isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return statement
    return None


def trains(functions: list[Function], tree: ast.Module, at: ast.stmt,
           depth: int = _DEPTH) -> bool:
    """Whether any of `functions` runs backward, zero_grad or an optimizer/scheduler step,
    itself or through a function or method of this file it calls."""
    # `at` counts only as the statement of a lambda's body; the search is kept whole, since
    # with its depth limit and the functions it has passed, a search that starts elsewhere
    # or in another order can answer differently
    key = (tuple(functions), at if any(isinstance(f, ast.Lambda) for f in functions) else None,
           depth)
    answers = _answers(tree)
    if key not in answers:
        answers[key] = _search(functions, tree, at, depth, set())
    return answers[key]


@functools.lru_cache(maxsize=4)
def _answers(tree: ast.Module) -> dict[tuple[tuple[Function, ...], ast.stmt | None, int], bool]:
    """`trains`' answers for the module: every placement of a model at the top level asks
    about the module's whole code, and every call of a function of the file about it (the
    cache holds the trees, and the keys hold the functions)."""
    return {}


def _search(functions: list[Function], tree: ast.Module, at: ast.stmt, depth: int,
            seen: set[int]) -> bool:
    """`trains`, not passing again through the functions in `seen`."""
    for function in functions:
        if id(function) in seen:
            continue
        seen.add(id(function))
        for where, call in _calls(function, at):
            name = ast_dotted(call.func)
            if isinstance(call.func, ast.Attribute) and call.func.attr in _TRAINING_METHODS:
                return True
            if name is not None and name.endswith(_TRAINING_FUNCTIONS):
                return True
            if depth and name is not None and _local(name):
                inner = definitions_of(tree, where, name)
                if inner and _search(inner, tree, where, depth - 1, seen):  # type: ignore[arg-type]
                    return True
    return False


def _local(name: str) -> bool:
    """A name that can be a function of this file: `helper` or `self.method`."""
    return "." not in name or (name.startswith("self.") and name.count(".") == 1)


def _calls(function: Function, at: ast.stmt) -> list[tuple[ast.stmt, ast.Call]]:
    """Every call in `function` with the statement it sits in (`at` for a lambda's body)."""
    if isinstance(function, ast.Lambda):
        return [(at, n) for n in ast.walk(function.body) if isinstance(n, ast.Call)]
    found: list[tuple[ast.stmt, ast.Call]] = []
    for stmt in ast.walk(function):
        if isinstance(stmt, ast.stmt) and stmt is not function:
            found.extend((stmt, n) for n in _own_nodes(stmt) if isinstance(n, ast.Call))
    return found


def _own_nodes(stmt: ast.stmt) -> list[ast.AST]:
    """The expression nodes of `stmt`, lambdas included, without its nested statements."""
    nodes: list[ast.AST] = []
    stack = [c for c in ast.iter_child_nodes(stmt) if not isinstance(c, ast.stmt)]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.stmt))
    return nodes
