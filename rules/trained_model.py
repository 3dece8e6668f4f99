"""Whether the model a statement puts on the device is the one trained there (NM503).

The question is asked of the code that places the model, not of the file: an inference
function that loads a model and traces it (`torch_neuronx.trace`) is not compiled because some
other function of the file trains a model of the same name. The code that places the model
trains it when:
- it builds an optimizer over the model's parameters (`torch.optim.SGD(model.parameters())`);
- or it hands the model's parameters to something and runs a training step, itself or through
  a function of this file it calls (`analysis.training.trains`);
- or it passes the model to a function (or a class) of this file that runs a training step
  (`train(model, loader)`, `Trainer(model).fit()`).
For `self.model = Net().to(device)`, the code is the class: its methods, together.
"""

from __future__ import annotations

import ast
import dataclasses
import functools

from neuron_migrate.ruleapi.analysis import Function, ancestors, ast_dotted, definitions_of, trains

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_NESTED = (*_FUNCTIONS, ast.ClassDef, ast.Lambda)
_PARAMETERS = frozenset({"parameters", "named_parameters"})
_OPTIMIZERS = frozenset({"SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "NAdam",
                         "RAdam", "RMSprop", "Rprop", "LBFGS", "SparseAdam", "Adafactor",
                         "Lamb", "LAMB", "Lion"})
"""Optimizer classes, by name (`torch.optim`'s, and common ones of other libraries)."""


def trained_where_placed(model: str, tree: ast.Module, at: ast.stmt) -> bool:
    """Whether `model` (a name, or `self.attr`), put on the device at `at`, is trained by the
    code around `at` (see the module's docstring)."""
    chain = ancestors(tree, at)
    if chain is None:
        return False
    if model.startswith("self."):
        owner = next((n for n in reversed(chain) if isinstance(n, ast.ClassDef)), None)
        if owner is None:
            return False
        methods = [s for s in owner.body if isinstance(s, _FUNCTIONS)]
        calls = _calls_of(owner)
        return calls.optimizes(model) or \
            model in calls.parameters_of and trains(methods, tree, at)  # type: ignore[arg-type]
    function = next((n for n in reversed(chain) if isinstance(n, _FUNCTIONS)), None)
    calls = _calls_of(function if function is not None else tree)
    code = function if function is not None else _as_function(tree)
    if calls.optimizes(model) or model in calls.parameters_of and trains([code], tree, at):
        return True
    return any(_trains_callee(name, tree, at) for name in calls.passing.get(model, ()))


@dataclasses.dataclass(frozen=True)
class _Calls:
    """The calls a piece of code runs itself, indexed by what a placement asks of them."""

    optimizers: tuple[ast.Call, ...]
    """Calls that may build an optimizer (by name)."""
    parameters_of: frozenset[str]
    """The models whose parameters the code takes (`model.parameters()`)."""
    passing: dict[str, list[str]]
    """What the calls that pass each name (or `self.attr`) as an argument call, in order and
    once each: a model passed to `log(model)` a thousand times asks about `log` once."""

    def optimizes(self, model: str) -> bool:
        """Whether an optimizer is built over the model's parameters (`optim.AdamW(model.
        parameters(), ...)`, also inside a list of parameter groups)."""
        for call in self.optimizers:
            arguments = [*call.args, *(k.value for k in call.keywords)]
            if any(model in _parameters_of([n for n in ast.walk(a) if isinstance(n, ast.Call)])
                   for a in arguments):
                return True
        return False


@functools.lru_cache(maxsize=64)
def _calls_of(code: ast.AST) -> _Calls:
    """The calls of a function, of a class's methods together, or of the module's own code:
    asked again for every placement in the same code (a function of a thousand placements
    would be walked a thousand times), so indexed once; the cache holds the nodes, so an id
    is never reused."""
    if isinstance(code, ast.ClassDef):
        calls = [c for m in code.body if isinstance(m, _FUNCTIONS) for c in _own_calls(m.body)]
    else:
        calls = _own_calls(code.body)  # type: ignore[attr-defined]
    passing: dict[str, dict[str, None]] = {}
    for call in calls:
        callee = ast_dotted(call.func)
        if callee is None:
            continue
        for value in [*call.args, *(k.value for k in call.keywords)]:
            name = ast_dotted(value.value if isinstance(value, ast.Starred) else value)
            if name is not None:
                passing.setdefault(name, {})[callee] = None
    return _Calls(tuple(c for c in calls if _may_optimize(c)), _parameters_of(calls),
                  {name: list(callees) for name, callees in passing.items()})


def _own_calls(body: list[ast.stmt]) -> list[ast.Call]:
    """The calls the code runs itself (not in the functions and classes it defines)."""
    found: list[ast.Call] = []
    pending: list[ast.AST] = list(body)
    while pending:
        node = pending.pop()
        if isinstance(node, _NESTED):
            continue
        if isinstance(node, ast.Call):
            found.append(node)
        pending.extend(ast.iter_child_nodes(node))
    return found


def _parameters_of(calls: list[ast.Call]) -> frozenset[str]:
    return frozenset(name for c in calls if isinstance(c.func, ast.Attribute)
                     and c.func.attr in _PARAMETERS
                     and (name := ast_dotted(c.func.value)) is not None)


def _may_optimize(call: ast.Call) -> bool:
    name = ast_dotted(call.func) or ""
    return "optim" in name.lower() or name.rsplit(".", 1)[-1] in _OPTIMIZERS


def _trains_callee(name: str, tree: ast.Module, at: ast.stmt) -> bool:
    """Whether calling `name` runs a function of this file that trains, or builds an object of a
    class of this file one of whose methods trains."""
    functions = definitions_of(tree, at, name) if "." not in name or \
        name.startswith("self.") else None
    if functions:
        return trains(functions, tree, at)
    methods = _methods_by_class(tree).get(name)
    return bool(methods) and trains(methods, tree, at)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=4)
def _methods_by_class(tree: ast.Module) -> dict[str, list[ast.stmt]]:
    """The methods of the module's classes, by class name (all classes of that name): asked
    for every call that passes a model, so the module's body is read once."""
    methods: dict[str, list[ast.stmt]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            methods.setdefault(node.name, []).extend(
                m for m in node.body if isinstance(m, _FUNCTIONS))
    return methods


@functools.lru_cache(maxsize=4)
def _as_function(tree: ast.Module) -> Function:
    """The module's own top-level code as a function body, for `trains` (which would otherwise
    walk every function of the file too): one per module, as every placement at the top
    level asks for it."""
    body = [s for s in tree.body if not isinstance(s, (*_FUNCTIONS, ast.ClassDef))]
    return ast.FunctionDef(name="<module>", args=ast.arguments(
        posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=body or [ast.Pass()], decorator_list=[])
