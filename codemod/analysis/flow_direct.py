"""A literal's flow told from the statement it is in, without building the file's flows.

Most device strings are written straight into a call the file does not define:
`torch.device("xla")`, `model.to("xla")`, `init_process_group(backend="xla")`. The builder
(`neuron_migrate.analysis.flow`) gives such a literal a key that nothing joins: the call
neither compares it, nor formats it, nor passes it to a function of the file; it only ends
there. Its flow is the literal alone, with that one end. Telling this from the statement costs
a few lookups where building the flows walks the whole file, and in most files every string
asked about is such a literal.

The answer must be the builder's, so this module only answers when it can follow exactly what
the builder does with the literal, and says "don't know" (None) otherwise:

- the literal is an argument or keyword value of a call that `Values.call` treats plainly: not
  a method it follows (`startswith`, `format`, `add_argument`, ...), not `str(...)`, and not a
  call of a function or method defined in the file (`Values.callees`);
- the builder visits that call, with the statement's scope and no lambda or comprehension
  names around it: every node on the way down from the statement is one whose children the
  builder visits (`_EXPRESSION_FIELDS`, `_STATEMENT_FIELDS`), and the statement's part is walked
  before any statement nested in it (so the scope is still the statement's).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from neuron_migrate.analysis.analyse import Analysis, Use
from neuron_migrate.analysis.flow_graph import Flow
from neuron_migrate.analysis.flow_values import PARTIAL_CALLS, SPECIAL_METHODS, Values

__all__ = ["direct_flow"]

Path = list[tuple[ast.AST, str]]  # (node, the field followed down from it)

_STATEMENT_FIELDS: dict[type, frozenset[str]] = {
    ast.Expr: frozenset({"value"}),
    ast.Assign: frozenset({"value", "targets"}),
    ast.AnnAssign: frozenset({"value", "annotation"}),  # its target only when it has a value
    ast.AugAssign: frozenset({"value"}),  # `x.a += 1` does not walk `x` when `a` is followed
    ast.Return: frozenset({"value"}),
    ast.If: frozenset({"test"}),
    ast.While: frozenset({"test"}),
    ast.For: frozenset({"iter"}),
    ast.AsyncFor: frozenset({"iter"}),
    ast.With: frozenset({"items"}),
    ast.AsyncWith: frozenset({"items"}),
    ast.Assert: frozenset({"test", "msg"}),
    ast.Raise: frozenset({"exc", "cause"}),
    ast.FunctionDef: frozenset({"decorator_list"}),  # a default only with its parameter
    ast.AsyncFunctionDef: frozenset({"decorator_list"}),
    ast.ClassDef: frozenset({"decorator_list", "bases", "keywords"}),
    ast.Match: frozenset({"subject"}),
}
"""The parts of a statement the builder walks as values, before any statement in its body."""

_INNER_FIELDS: dict[type, frozenset[str]] = {
    ast.withitem: frozenset({"context_expr"}),
    ast.keyword: frozenset({"value"}),
    ast.FormattedValue: frozenset({"value", "format_spec"}),
}
"""Nodes that are not expressions, and the fields under them the builder walks."""

_SCOPED = (ast.Lambda, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def direct_flow(analysis: Analysis, literal: Callable[[ast.expr], bool],
                values: Values, unit: ast.stmt, node: ast.expr) -> Flow | None:
    """The flow of the string constant `node` in `unit`, if the builder would give it one
    with nothing but its own end; None when only the builder can tell. `values` holds the
    file's functions (`_Builder.prepare_definitions`), for `Values.callees`."""
    scope = analysis.scope_of.get(id(unit))
    if scope is None or not isinstance(node, ast.Constant) or not literal(node):
        return None
    path = _path(unit, node)
    if path is None or len(path) < 2 or not _walked(path):
        return None
    parent, field = path[-1]
    if isinstance(parent, ast.keyword):
        call, parent_field = path[-2]
        if not isinstance(call, ast.Call) or parent_field != "keywords":
            return None
        use = Use(node, scope, parent, call)
    elif isinstance(parent, ast.Call) and field == "args":
        call = parent
        use = Use(node, scope, call, None)
    else:
        return None
    if not _plain(values, call, scope):  # type: ignore[arg-type]
        return None
    return Flow(literals=[node], ends=[use], units={id(node): unit})


def _path(unit: ast.stmt, target: ast.AST) -> Path | None:
    """The nodes from `unit` down to `target` (statements nested in `unit` excluded), each
    with the field followed."""
    path: Path = []

    def visit(node: ast.AST) -> bool:
        for name, value in ast.iter_fields(node):
            for child in value if isinstance(value, list) else [value]:
                if not isinstance(child, ast.AST) or isinstance(child, ast.stmt):
                    continue
                path.append((node, name))
                if child is target or visit(child):
                    return True
                path.pop()
        return False

    return path if visit(unit) else None


def _walked(path: Path) -> bool:
    """Whether the builder walks every node of the path as a value, with no lambda or
    comprehension names in scope."""
    unit, field = path[0]
    if field not in _STATEMENT_FIELDS.get(type(unit), ()):
        return False
    for node, field in path[1:]:
        inner = _INNER_FIELDS.get(type(node))
        if inner is not None:
            if field not in inner:
                return False
        elif not isinstance(node, ast.expr) or isinstance(node, _SCOPED):
            return False
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in PARTIAL_CALLS:
            return False  # `assertEqual(..., msg=...)`: not every argument is walked
    return True


def _plain(values: Values, call: ast.Call, scope: object) -> bool:
    """Whether `Values.call` only ends the call's arguments (see `Values.call`)."""
    values.scope = scope  # type: ignore[assignment]
    func = call.func
    if isinstance(func, ast.Name):
        return func.id != "str" and values.callees(call) is None
    if isinstance(func, ast.Attribute):
        if values.imported(func.value):
            return True
        return func.attr not in SPECIAL_METHODS and values.callees(call) is None
    return True
