"""Reading one unit's LibCST nodes with the names they resolve to: what the rewriter
(`neuron_migrate.engine.transform`) and the residual scan (`neuron_migrate.engine.residual`)
share.

Both walk the same unit, and a finding's position is a node's signature with the count of
like nodes before it, so both must number the nodes the same way and see the same lambda and
comprehension variables.
"""

from __future__ import annotations

import libcst as cst

from neuron_migrate.analysis.scopes import Resolution, Scope
from neuron_migrate.engine.context import Pending
from neuron_migrate.syntax.names import REFERENCES, SIGNED, signature
from neuron_migrate.engine.kept_calls import one_line
from neuron_migrate.model import Kind
from neuron_migrate.rule import Rule

_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
# Hot paths compare exact types: LibCST's node classes are final, and an `isinstance` against
# them goes through ABCMeta, several times slower.
BINDS_LOCALS = frozenset({cst.Lambda, *_COMPREHENSIONS})
_NOT_UNIT = frozenset({cst.IndentedBlock, cst.SimpleStatementSuite, cst.If})


def _target_names(node: cst.BaseExpression | cst.BaseAssignTargetExpression) -> set[str]:
    if isinstance(node, cst.Name):
        return {node.value}
    if isinstance(node, (cst.Tuple, cst.List)):
        names: set[str] = set()
        for element in node.elements:
            names |= _target_names(element.value)
        return names
    if isinstance(node, cst.StarredElement):
        return _target_names(node.value)
    return set()


def _local_names(node: cst.CSTNode) -> set[str] | None:
    """Names a lambda or comprehension binds for its own body."""
    if isinstance(node, cst.Lambda):
        params = node.params
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                every.append(star)
        return {p.name.value for p in every}
    if isinstance(node, _COMPREHENSIONS):
        names: set[str] = set()
        comp: cst.CompFor | None = node.for_in
        while comp is not None:
            names |= _target_names(comp.target)
            comp = comp.inner_for_in
        return names
    return None


_NAMES_NOT_EXPRESSIONS: dict[type, str] = {
    cst.Attribute: "attr", cst.Arg: "keyword", cst.Param: "name", cst.FunctionDef: "name",
    cst.ClassDef: "name", cst.MatchAs: "name", cst.MatchStar: "name", cst.ExceptHandler: "name",
}


class ScopedVisitor:
    """Shared by the rewriter and the scanner: resolves names, honouring lambda and
    comprehension variables inside the unit, and numbers nodes in source order."""

    def __init__(self, root: cst.CSTNode, scope: Scope) -> None:
        self.root = root
        self.scope = scope
        # new statements (a rule's replacement) are read whole, their blocks included
        self.blocks = False
        self.locals: list[set[str]] = []
        self.signed: list[cst.CSTNode] = []  # nodes with a signature, in source order
        # `occurrence`'s index of the first `indexed` of them: node id -> (signature, how many
        # before it share it), and how many share each signature
        self.indexed = 0
        self.occurrences: dict[int, tuple[tuple[str, str | None] | None, int]] = {}
        self.counts: dict[tuple[str, str | None], int] = {}
        self.inner: set[int] = set()

    def enter(self, node: cst.CSTNode) -> bool:
        kind = type(node)
        if kind in _NOT_UNIT and node is not self.root and not self.blocks:
            return False  # bodies and `elif`s are units of their own
        if kind in BINDS_LOCALS:
            self.locals.append(_local_names(node) or set())
        elif kind is cst.Attribute and type(node.value) in REFERENCES:  # type: ignore[attr-defined]
            self.inner.add(id(node.value))  # type: ignore[attr-defined]  # the whole dotted chain counts
        not_expression = _NAMES_NOT_EXPRESSIONS.get(kind)
        if not_expression is not None:
            child = getattr(node, not_expression)
            if isinstance(child, cst.AsName):
                child = child.name
            if child is not None:
                self.inner.add(id(child))  # `ast` has no Name node here
        if kind in SIGNED and id(node) not in self.inner:
            self.signed.append(node)
        return True

    def occurrence(self, anchor: cst.CSTNode | None) -> tuple[tuple[str, str | None] | None, int]:
        """The anchor's signature and how many nodes before it in the unit share it: where
        `Locator` finds it in the `ast`. Asked only for nodes that get a finding, but a unit
        (one long statement) may hold thousands of them: the nodes signed so far are indexed
        once, in order, rather than counted again for each."""
        counts, known = self.counts, self.occurrences
        for node in self.signed[self.indexed:]:
            sig = signature(node)
            known.setdefault(id(node), (sig, counts.get(sig, 0)) if sig is not None else (None, 0))
            if sig is not None:
                counts[sig] = counts.get(sig, 0) + 1
        self.indexed = len(self.signed)
        return known.get(id(anchor), (None, 0))

    def exit(self, node: cst.CSTNode) -> None:
        if type(node) in BINDS_LOCALS:
            self.locals.pop()

    def resolve(self, expr: cst.BaseExpression) -> Resolution | None:
        attrs: list[str] = []
        while type(expr) is cst.Attribute:
            attrs.append(expr.attr.value)  # type: ignore[attr-defined]
            expr = expr.value  # type: ignore[attr-defined]
        if type(expr) is not cst.Name:
            return None
        name = expr.value  # type: ignore[attr-defined]
        if self.locals and any(name in names for names in self.locals):
            return None
        attrs.reverse()
        return self.scope.resolve_cached(name, attrs)

    def pending(self, rule: Rule, kind: Kind, message: str, anchor: cst.CSTNode | None,
                applied: bool, suggestion: str | None = None) -> Pending:
        sig, k = self.occurrence(anchor)
        if "\n" in message:  # code quoted from a multi-line call
            message = one_line(message)
        return Pending(rule.id, kind, message, anchor, sig, k, applied, suggestion)
