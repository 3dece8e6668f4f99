"""Whether a data-parallel loop can train through DistributedDataParallel (NM210).

`xm.optimizer_step(optimizer)` averaged the gradients once backward had finished. A Neuron
engineer writes DistributedDataParallel instead: it all-reduces buckets of gradients while
backward is still running, and broadcasts rank 0's parameters when it wraps the model. The
two agree only where averaging during backward and averaging just before the step are the
same thing, so a plan exists only for this shape, and every other shape keeps the bucketed
helper:
- one `xm.optimizer_step(optimizer)` in the file, with nothing but the optimizer (no barrier,
  optimizer_args or groups), a statement directly in a loop's body (`with` blocks allowed, no
  `if`: the step runs every iteration);
- one optimizer built in the file, over the `.parameters()` of one model, a plain name
  assigned (not received as a parameter) by the function that holds the loop or one around it,
  and never assigned again from the statement holding the loop on;
- in the loop, exactly one call of the model (its forward: the wrapper's forward is what
  arranges the averaging) and one `.backward()`, both unconditional and in that order, the
  model not handed to another function there, and between backward and step nothing that
  reads or changes gradients (`.grad`, clipping, unscaling): under XLA they saw this process's
  own gradients, under DDP they would see the average;
- no DDP or FSDP in the file already (NM210's proof handles those).

Gradient accumulation (a step under `if (i + 1) % k == 0:`) keeps the helper: DDP needs the
forward and backward of the other iterations under `no_sync()`, so the step's condition would
have to be decided before the forward, which may read values that only exist after it. The
helper already averages once per step in flat buckets; only the overlap is lost.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from neuron_migrate.ruleapi.analysis import (WRAPPERS, ancestors, ast_dotted, expressions, reaching,
                                             walked)
from neuron_migrate.rules.launch import _calls, _kept, _named_calls
from neuron_migrate.rules.trained_model import _OPTIMIZERS

XM = "torch_xla.core.xla_model"
_STEP = f"{XM}.optimizer_step"
_AVERAGING = frozenset({_STEP, f"{XM}.reduce_gradients"})
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_NESTED = (*_FUNCTIONS, ast.ClassDef, ast.Lambda)
_PARAMETERS = frozenset({"parameters", "named_parameters"})
_GRADIENT_WORDS = ("grad", "clip", "unscale")


@dataclass(frozen=True)
class DataParallelPlan:
    """Where the edits go: the wrapper `wrapper = DDP(model)` before `holder` (the statement of
    the model's scope that holds the loop), the forward in `forward` through the wrapper, and
    the step in `step` becomes `optimizer.step()`."""

    model: str
    wrapper: str
    optimizer: str
    holder: ast.stmt
    forward: ast.stmt
    step: ast.stmt

    @property
    def statements(self) -> tuple[ast.stmt, ...]:
        return (self.holder, self.forward, self.step)


def data_parallel_plan(tree: ast.Module, calls: Sequence[tuple[ast.Call, int]] | None = None
                       ) -> DataParallelPlan | str:
    """The plan for the file, or why the helper stays (a clause for a message). `calls`: the
    analysis' list of the file's calls, which spares a walk of the tree."""
    return _kept("data-parallel-plan", tree, lambda: _plan(tree, list(_calls(tree, calls))))


def _plan(tree: ast.Module, calls: list[tuple[ast.Call, int]]) -> DataParallelPlan | str:
    averaging = _named_calls(tree, calls, _AVERAGING)
    if len(averaging) != 1 or averaging[0][0] != _STEP:
        return "the file averages gradients in more than one place"
    if _rebinds_torch(tree):
        return "`torch` names something else in this file"
    if _named_calls(tree, calls, WRAPPERS):
        return "the file already uses DistributedDataParallel or FSDP"
    call = averaging[0][1]
    arguments = [*call.args, *(k.value for k in call.keywords)]
    if len(arguments) != 1 or isinstance(arguments[0], ast.Starred) or \
            any(k.arg not in (None, "optimizer") for k in call.keywords):
        return "the step passes more than the optimizer"
    optimizer = arguments[0]
    if not isinstance(optimizer, ast.Name):
        return "the optimizer is not a plain name"
    step = next((s for s in _statements(tree) if isinstance(s, ast.Expr) and s.value is call),
                None)
    chain = ancestors(tree, step) if step is not None else None
    if step is None or chain is None:
        return "the step's result is used"
    loop = _loop(chain)
    if isinstance(loop, str):
        return loop
    model = _model(tree, step, optimizer.id, calls)
    if not isinstance(model, tuple):
        return model
    name, built = model
    scope = _scope(chain, name)
    if isinstance(scope, str):
        return scope
    found = _loop_shape(tree, loop, step, name)
    if isinstance(found, str):
        return found
    holder = next((s for s in _body(scope) if s is loop or s in chain), None)
    if holder is None:
        return "the loop is not in the model's scope"
    if any(_binds(s, name) for s in _body(scope)[_body(scope).index(holder):]):
        return f"`{name}` is assigned again after the loop starts"
    if not all(any(b is s or _within(b, s) for s in _body(scope)) for b in built):
        return "the optimizer is built elsewhere"
    return DataParallelPlan(name, _free_name(tree, f"ddp_{name}"), optimizer.id, holder,
                            found, step)


def _loop(chain: list[ast.AST]) -> ast.stmt | str:
    """The loop whose every iteration runs the step (only `with` blocks in between)."""
    for node in reversed(chain):
        if isinstance(node, _LOOPS):
            return node  # type: ignore[return-value]
        if not isinstance(node, (ast.With, ast.AsyncWith)):
            return ("the step does not run on every iteration of a loop (gradient "
                    "accumulation or a conditional step)")
    return "the step is not in a loop"


def _model(tree: ast.Module, step: ast.stmt, optimizer: str,
           calls: list[tuple[ast.Call, int]]) -> tuple[str, list[ast.stmt]] | str:
    """The one model whose parameters the file's one optimizer holds, and the statements
    that build that optimizer."""
    definitions = reaching(tree, step, optimizer)
    roots: set[str] = set()
    built: list[ast.stmt] = []
    for definition in definitions:
        value = definition.value
        if not isinstance(value, ast.Call) or definition.statement is None:
            return "the optimizer's construction is not visible"
        built.append(definition.statement)
        roots |= {ast_dotted(n.func.value) or "" for n in ast.walk(value)
                  if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                  and n.func.attr in _PARAMETERS}
    if len(roots) != 1 or not next(iter(roots)).isidentifier():
        return "the optimizer does not hold the parameters of one model"
    constructions = {id(c) for name, c, _ in _named_calls(tree, calls) if _optimizer_class(name)}
    if len(constructions) != len(definitions):
        return "the file builds more than one optimizer (several models or optimizers)"
    return next(iter(roots)), built


def _optimizer_class(qualname: str | None) -> bool:
    if not qualname:
        return False
    if qualname.startswith("torch.optim.") and qualname.count(".") == 2:
        return True
    return qualname.rsplit(".", 1)[-1] in _OPTIMIZERS


def _scope(chain: list[ast.AST], name: str) -> ast.AST | str:
    """The function (or module) whose variable `name` the loop reads: the nearest one around
    it that assigns `name`, which must not receive it as a parameter."""
    for node in reversed(chain):
        if isinstance(node, _FUNCTIONS):
            if _parameter(node, name):
                return (f"`{name}` comes in as a parameter of `{node.name}`; wrap it in "
                        "DistributedDataParallel where it is built")
            if any(_binds(s, name) for s in node.body):
                return node
        elif isinstance(node, ast.Module):
            return node
    return f"`{name}` is not assigned around the loop"


def _loop_shape(tree: ast.Module, loop: ast.stmt, step: ast.stmt, model: str
                ) -> ast.stmt | str:
    """The statement of the loop that calls the model's forward, if the loop has the shape
    DDP needs (see the module's docstring)."""
    inside = list(_own(loop.body))  # type: ignore[attr-defined]
    forwards = [s for s in inside if _calls_named(s, model)]
    backwards = [s for s in inside if _calls_attribute(s, "backward")]
    if len(forwards) != 1 or sum(_count_named(s, model) for s in forwards) != 1:
        return f"the loop does not call `{model}` exactly once"
    if len(backwards) != 1 or any(_passes(s, model) for s in inside):
        return f"the loop's backward is not one `.backward()` after one forward of `{model}`"
    forward, backward = forwards[0], backwards[0]
    if isinstance(forward, ast.stmt) and _compound(forward) or \
            not (forward.lineno <= backward.lineno < step.lineno):
        return "the forward, backward and step are not in that order"
    for statement in (forward, backward):
        chain = ancestors(tree, statement) or []
        if any(not isinstance(n, (ast.With, ast.AsyncWith)) for n in chain[chain.index(loop) + 1:]):
            return "the forward or backward does not run on every iteration"
    between = [s for s in inside if backward.end_lineno < s.lineno < step.lineno]  # type: ignore[operator]
    if any(_touches_gradients(s) for s in between):
        return ("the gradients are read or changed between backward and the step (clipping "
                "sees this process's gradients under XLA)")
    return forward


def _touches_gradients(statement: ast.stmt) -> bool:
    for node in expressions(statement):
        word = node.attr if isinstance(node, ast.Attribute) else \
            node.id if isinstance(node, ast.Name) else ""
        if any(w in word.lower() for w in _GRADIENT_WORDS) or word in _PARAMETERS:
            return True
    return False


def _statements(tree: ast.Module) -> list[ast.stmt]:
    return [n for n in walked(tree) if isinstance(n, ast.stmt)]


def _own(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a body and of its blocks, not of the functions and classes in it."""
    found: list[ast.stmt] = []
    stack = list(body)
    while stack:
        node = stack.pop()
        found.append(node)
        if not isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            stack.extend(c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt))
            for handler in getattr(node, "handlers", ()):
                stack.extend(handler.body)
    return found


def _body(scope: ast.AST) -> list[ast.stmt]:
    return scope.body  # type: ignore[attr-defined, no-any-return]


def _within(node: ast.AST, container: ast.stmt) -> bool:
    return any(n is node for n in ast.walk(container))


def _compound(statement: ast.stmt) -> bool:
    return any(isinstance(c, ast.stmt) for c in ast.iter_child_nodes(statement))


def _calls_named(statement: ast.stmt, name: str) -> bool:
    return _count_named(statement, name) > 0 or any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "forward"
        and ast_dotted(n.func.value) == name for n in expressions(statement))


def _count_named(statement: ast.stmt, name: str) -> int:
    return sum(1 for n in expressions(statement) if isinstance(n, ast.Call)
               and isinstance(n.func, ast.Name) and n.func.id == name)


def _calls_attribute(statement: ast.stmt, attribute: str) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == attribute for n in expressions(statement))


def _passes(statement: ast.stmt, model: str) -> bool:
    """Whether the statement hands the model itself to a call (whose forward would not run
    through the wrapper)."""
    return any(isinstance(n, ast.Call) and any(
        isinstance(a, ast.Name) and a.id == model
        for a in (*n.args, *(k.value for k in n.keywords))) for n in expressions(statement))


def _binds(statement: ast.stmt, name: str) -> bool:
    """Whether the statement (or a block inside it) assigns `name`."""
    for node in _own([statement]):
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            if node.name == name:
                return True
            continue
        for expr in expressions(node):
            if isinstance(expr, ast.Name) and isinstance(expr.ctx, ast.Store) and \
                    expr.id == name:
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name.split(".", 1)[0]) == name for a in node.names):
            return True
    return False


def _parameter(function: ast.AST, name: str) -> bool:
    args = function.args  # type: ignore[attr-defined]
    every = (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
    return any(a is not None and a.arg == name for a in every)


def _rebinds_torch(tree: ast.Module) -> bool:
    """Whether `torch` is bound to something other than the torch module (the wrapper's code
    names `torch.nn.parallel`)."""
    return any(isinstance(n, ast.Name) and n.id == "torch" and isinstance(n.ctx, ast.Store) or
               isinstance(n, ast.arg) and n.arg == "torch" or
               isinstance(n, ast.ImportFrom) and any(
                   (a.asname or a.name) == "torch" for a in n.names) or
               isinstance(n, ast.Import) and any(
                   a.asname == "torch" and a.name != "torch" for a in n.names)
               for n in walked(tree))


def _free_name(tree: ast.Module, wanted: str) -> str:
    """`wanted`, or `wanted_2`, ...: a name the file uses nowhere."""
    nodes = walked(tree)
    used = {n.id for n in nodes if isinstance(n, ast.Name)} | \
        {n.arg for n in nodes if isinstance(n, ast.arg)} | \
        {n.name for n in nodes if isinstance(n, (*_FUNCTIONS, ast.ClassDef))}
    name, count = wanted, 1
    while name in used:
        count += 1
        name = f"{wanted}_{count}"
    return name
