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
        calls = [c for m in methods for c in _own_calls(m.body)]
        return _optimizes(model, calls) or \
            _hands_parameters(model, calls) and trains(methods, tree, at)  # type: ignore[arg-type]
    function = next((n for n in reversed(chain) if isinstance(n, _FUNCTIONS)), None)
    body = function.body if function is not None else tree.body
    calls = _own_calls(body)
    code = function if function is not None else _as_function(tree)
    if _optimizes(model, calls) or _hands_parameters(model, calls) and trains([code], tree, at):
        return True
    return any(_trains_callee(call, tree, at) for call in calls if _passes(call, model))


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


def _hands_parameters(model: str, calls: list[ast.Call]) -> bool:
    return any(isinstance(c.func, ast.Attribute) and c.func.attr in _PARAMETERS
               and ast_dotted(c.func.value) == model for c in calls)


def _optimizes(model: str, calls: list[ast.Call]) -> bool:
    """Whether an optimizer is built over the model's parameters (`optim.AdamW(model.
    parameters(), ...)`, also inside a list of parameter groups)."""
    for call in calls:
        name = ast_dotted(call.func) or ""
        last = name.rsplit(".", 1)[-1]
        if "optim" not in name.lower() and last not in _OPTIMIZERS:
            continue
        arguments = [*call.args, *(k.value for k in call.keywords)]
        if any(_hands_parameters(model, [n for n in ast.walk(a) if isinstance(n, ast.Call)])
               for a in arguments):
            return True
    return False


def _passes(call: ast.Call, model: str) -> bool:
    values = [*call.args, *(k.value for k in call.keywords)]
    return any(ast_dotted(v.value if isinstance(v, ast.Starred) else v) == model
               for v in values)


def _trains_callee(call: ast.Call, tree: ast.Module, at: ast.stmt) -> bool:
    """Whether the call runs a function of this file that trains, or builds an object of a
    class of this file one of whose methods trains."""
    name = ast_dotted(call.func)
    if name is None:
        return False
    functions = definitions_of(tree, at, name) if "." not in name or \
        name.startswith("self.") else None
    if functions:
        return trains(functions, tree, at)
    classes = [s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == name]
    methods = [m for c in classes for m in c.body if isinstance(m, _FUNCTIONS)]
    return bool(methods) and trains(methods, tree, at)  # type: ignore[arg-type]


def _as_function(tree: ast.Module) -> Function:
    """The module's own top-level code as a function body, for `trains` (which would otherwise
    walk every function of the file too)."""
    body = [s for s in tree.body if not isinstance(s, (*_FUNCTIONS, ast.ClassDef))]
    return ast.FunctionDef(name="<module>", args=ast.arguments(
        posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=body or [ast.Pass()], decorator_list=[])
