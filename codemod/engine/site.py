"""The `Site` a rule's hook receives: what the engine knows about the place, and the few
things a rule may add to the file (an import, a helper, a statement after this one)."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import libcst as cst

from neuron_migrate.analysis.import_guards import catches
from neuron_migrate.analysis.flow import Flow, string_flows
from neuron_migrate.model import Options
from neuron_migrate.rule import Role
from neuron_migrate.syntax.names import attribute_chain, dotted
from neuron_migrate.engine.suppress import span

if TYPE_CHECKING:
    from neuron_migrate.analysis.analyse import Analysis
    from neuron_migrate.analysis.scopes import Resolution, Scope
    from neuron_migrate.engine.context import FileContext
    from neuron_migrate.registry import Registry


class RewriterView(Protocol):
    """What a site reads of the engine's rewriter (`transform.UnitRewriter`): declared here so
    that the site does not import the module that creates it."""

    scope: Scope
    registry: Registry
    options: Options
    analysis: Analysis
    ast_unit: ast.stmt
    context: FileContext
    line_level: bool
    locals: list[set[str]]
    after: list[cst.BaseStatement]
    parents: list[cst.CSTNode]

    def resolve(self, expr: cst.BaseExpression) -> Resolution | None: ...

_MODULES_THE_ENGINE_IMPORTS = frozenset({"os", "torch"})
"""Roots of what rules' replacements name (`ref`): imported when the file does not bind them."""


class UnitSite:
    """The engine's implementation of `neuron_migrate.rule.Site` for one unit."""

    def __init__(self, rewriter: RewriterView, role: Role, qualname: str | None,
                 original: cst.CSTNode) -> None:
        self._rewriter = rewriter
        self.role = role
        self.qualname = qualname
        self._original = original

    def qualname_of(self, expr: cst.BaseExpression) -> str | None:
        resolution = self._rewriter.resolve(expr)
        if resolution is not None:
            return resolution.qualname
        return self._unbound_module(expr)

    def _unbound_module(self, expr: cst.BaseExpression) -> str | None:
        """`os.environ` in a file that never binds `os`: the module the engine would import
        for its own code (`ref` adds `import os` there), so that this run judges the line
        as the next run will, once that import exists."""
        dotted_name = dotted(expr)
        if dotted_name is None:
            return None
        root = dotted_name.split(".", 1)[0]
        if root not in _MODULES_THE_ENGINE_IMPORTS or \
                self._rewriter.scope.lookup(root) is not None or \
                any(root in names for names in self._rewriter.locals):
            return None
        return dotted_name

    def ref(self, qualname: str) -> cst.BaseExpression | None:
        parts = qualname.split(".")
        scope = self._rewriter.scope
        for size in range(len(parts), 0, -1):  # an existing `dist` beats `torch.distributed`
            name = scope.module_name(".".join(parts[:size]))
            if name is not None:
                return attribute_chain(name, parts[size:])
        root = parts[0]
        if scope.lookup(root) is not None or any(root in n for n in self._rewriter.locals):
            return None  # `torch` means something else here
        self._rewriter.context.needs.add(root)
        self._rewriter.context.named.add(root)
        return attribute_chain(root, parts[1:])

    def helper(self, name: str) -> cst.Name:
        helpers = self._rewriter.registry.helper_table
        context = self._rewriter.context
        for needed in (*helpers[name].requires, name):
            if needed not in context.helpers:
                context.helpers.append(needed)
                for module in helpers[needed].imports:
                    bound = self._rewriter.scope.module.resolve(module, [])
                    if bound is None or bound.qualname != module:
                        context.needs.add(module)
        return cst.Name(name)

    def insert_after(self, statements: tuple[cst.BaseStatement, ...]) -> bool:
        if not self._rewriter.line_level:
            return False
        self._rewriter.after.extend(statements)
        return True

    def module_mentions(self, qualnames: frozenset[str]) -> bool:
        module = self._rewriter.scope.module
        for bindings in module.bindings.values():
            if any(b.qualname in qualnames for b in bindings):
                return True
        text = self._rewriter.context.text
        return any(q.rsplit(".", 1)[-1] + "(" in text for q in qualnames)

    def parenthesized(self, node: cst.BaseExpression, comparison: bool = False
                      ) -> cst.BaseExpression:
        """`node` in parentheses unless the place it goes needs none (a conditional
        expression inside `a and ...` would otherwise change meaning)."""
        parent = self._rewriter.parents[-1] if self._rewriter.parents else None
        safe: tuple[type, ...] = _SAFE_PARENTS
        if comparison:
            safe = (*safe, cst.BooleanOperation, cst.UnaryOperation, cst.IfExp)
        if isinstance(parent, safe) or node.lpar:
            return node
        return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

    @property
    def parent(self) -> cst.CSTNode | None:
        """The node the matched node sits in (as it was before any rewrite)."""
        return self._rewriter.parents[-1] if self._rewriter.parents else None

    @property
    def argument_of(self) -> tuple[cst.Call, cst.Arg] | None:
        parents = self._rewriter.parents
        if len(parents) >= 2 and isinstance(parents[-1], cst.Arg) and \
                isinstance(parents[-2], cst.Call) and \
                any(a is parents[-1] for a in parents[-2].args):
            return parents[-2], parents[-1]
        return None

    def device_binding(self, expr: cst.BaseExpression) -> bool:
        """Whether `expr` is a name assigned an XLA device ("xla", or `xm.xla_device()`)."""
        if not isinstance(expr, cst.Name):
            return False
        bindings = self._rewriter.scope.lookup(expr.value)
        return bool(bindings) and all(b.string_value is not None or b.device_value
                                      for b in bindings)

    @property
    def path(self) -> str:
        return self._rewriter.context.path

    @property
    def text(self) -> str:
        return self._rewriter.context.text

    @property
    def options(self) -> Options:
        return self._rewriter.options

    @property
    def statement(self) -> ast.stmt:
        return self._rewriter.ast_unit

    @property
    def module_tree(self) -> ast.Module:
        return self._rewriter.analysis.tree

    @property
    def in_function(self) -> bool:
        scope: Scope | None = self._rewriter.scope
        while scope is not None and scope.kind != "function":
            scope = scope.parent
        return scope is not None

    def module_calls(self) -> Sequence[tuple[ast.Call, int]]:
        return self._rewriter.analysis.calls

    def catching(self, exceptions: frozenset[str]) -> ast.ExceptHandler | None:
        parents = self._rewriter.analysis.parents
        child: ast.stmt = self._rewriter.ast_unit
        parent = parents.get(id(child))
        while parent is not None and not isinstance(parent, _DEFINITIONS):
            if isinstance(parent, _TRIES) and any(s is child for s in parent.body):
                for handler in parent.handlers:
                    if catches(handler, exceptions | _ANY_ERROR):
                        return handler
            child, parent = parent, parents.get(id(parent))
        return None

    def string_flow(self) -> Flow | None:
        rewriter = self._rewriter
        analysis = rewriter.analysis
        if analysis.flows is None:
            registry = rewriter.registry
            analysis.flows = string_flows(analysis, registry.flow_string, registry.device_calls)
        signature, rank = rewriter.occurrence(self._original)
        return analysis.flows.at(rewriter.ast_unit, signature, rank)

    def silenced(self, rule_id: str, statement: ast.stmt) -> bool:
        return self._rewriter.context.suppressions.silences(rule_id, *span(statement))

    def rewrites(self, qualname: str) -> bool:
        registry = self._rewriter.registry
        rule = registry.by_call.get(qualname)
        return rule is not None and registry.enabled(rule)


_SAFE_PARENTS: tuple[type, ...] = (
    cst.Arg, cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return, cst.Expr, cst.If, cst.While,
    cst.Element, cst.DictElement, cst.WithItem, cst.Assert,
)


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_TRIES = (ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))
_ANY_ERROR = frozenset({"Exception", "BaseException"})
