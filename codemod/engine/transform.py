"""Rewriting one flagged statement: run the rules' hooks over its LibCST nodes.

A unit is a small statement (`x = ...`, `xm.mark_step()`) or the header of a compound
statement (`with ...:`, `def f(a=...):`); bodies are not entered, since the statements in them
are units of their own. After the rules have run, `ResidualScanner` reads the new unit and
reports every XLA reference still there, which also tells the import bookkeeping what is used.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

import ast
from dataclasses import replace

from neuron_migrate.analysis.analyse import Analysis
from neuron_migrate.model import Kind
from neuron_migrate.syntax.quote import code
from neuron_migrate.registry import Registry
from neuron_migrate.engine.context import FileContext, Pending
from neuron_migrate.syntax.names import REFERENCES
from neuron_migrate.engine.kept_calls import anchors, held_back, quoted_as_written
from neuron_migrate.engine.residual import scanned_string
from neuron_migrate.engine.scoped_visitor import BINDS_LOCALS, ScopedVisitor
from neuron_migrate.engine.site import UnitSite
from neuron_migrate.rule import Outcome, Remove, Replace, ReplaceStatement, Review, Role, Rule
from neuron_migrate.analysis.scopes import Scope
from neuron_migrate.engine.suppress import span


def _comments(node: cst.CSTNode) -> list[cst.Comment]:
    """The comments in `node`, whitespace included, in source order."""
    if type(node) is cst.Comment:
        return [node]  # type: ignore[list-item]
    return [c for child in node.children for c in _comments(child)]


def _nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in node.children:
        yield from _nodes(child)


class _Requote(cst.CSTTransformer):
    def __init__(self, avoid: str) -> None:
        super().__init__()
        self.avoid = avoid
        self.other = "'" if avoid == '"' else '"'

    def leave_SimpleString(self, original: cst.SimpleString,
                           updated: cst.SimpleString) -> cst.SimpleString:
        body = updated.value[len(updated.prefix) + 1:-1]
        if updated.quote != self.avoid or self.other in body or "\\" in body:
            return updated
        return updated.with_changes(value=f"{updated.prefix}{self.other}{body}{self.other}")


class UnitRewriter(ScopedVisitor):
    """Applies the rules' hooks to one unit; collects findings and statement-level actions."""

    def __init__(self, root: cst.CSTNode, scope: Scope, registry: Registry,
                 analysis: Analysis, ast_unit: ast.stmt, context: FileContext,
                 line_level: bool) -> None:
        super().__init__(root, scope)
        self.registry = registry
        self.options = context.options
        self.analysis = analysis
        self.ast_unit = ast_unit
        self.context = context
        self.line_level = line_level  # the unit is a statement of its own line
        self.findings: list[Pending] = []
        self.roles: dict[int, Role] = {}
        self.remove: set[int] = set()
        self.reported: set[int] = set()
        self.quiet: set[int] = set()
        self.unwrap = False
        self.statements: tuple[cst.BaseStatement, ...] | None = None
        self.after: list[cst.BaseStatement] = []
        # comments inside code a rule replaced that the replacement does not carry; they
        # go above the statement. Only a statement over several lines can hold any.
        self.comments: list[cst.Comment] = []
        self.span = span(ast_unit)
        first, last = self.span
        self.commented = last > first and any("#" in line
                                              for line in context.lines[first - 1:last])
        self.parents: list[cst.CSTNode] = []
        # Original subtrees the rules left as they were and that hold nothing the residual
        # scan looks for (no name of an XLA or watched import, no string a rule knows, no
        # lambda or comprehension): the scan of the new unit skips them. `marks` holds the
        # count of such things seen when each open node was entered.
        self.clean: set[int] = set()
        self.marks: list[int] = []
        self.notable = 0
        # for each call being read: what had been found and added before its arguments were
        # (`kept_calls`: a call left for review gets its arguments back as written)
        self.call_marks: list[tuple[int, int, tuple[frozenset[str], int, int]]] = []

    # ----------------------------------------------------------------- traversal
    def on_visit(self, node: cst.CSTNode) -> bool:
        self.marks.append(self.notable)
        if not self.enter(node):
            return False
        self.parents.append(node)
        kind = type(node)
        if kind is cst.Call:
            self.call_marks.append((len(self.findings), len(self.comments), self._save()))
        elif kind is cst.Expr:
            self.roles[id(node.value)] = Role.STATEMENT  # type: ignore[attr-defined]
        elif kind is cst.WithItem and node.asname is None:  # type: ignore[attr-defined]
            self.roles[id(node.item)] = Role.WITH_ITEM
        elif kind is cst.Decorator:
            self.roles[id(node.decorator)] = Role.DECORATOR  # type: ignore[attr-defined]
        elif kind is cst.Name:
            if node.value in self.analysis.import_names:  # type: ignore[attr-defined]
                self.notable += 1
        elif kind is cst.SimpleString or kind is cst.FormattedString:
            if scanned_string(node, self.registry) is not None:
                self.notable += 1
        elif kind in BINDS_LOCALS:
            self.notable += 1
        return True

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[override]
        mark = self.marks.pop()
        new = self._leave(original, updated)
        if new is original and self.notable == mark:
            self.clean.add(id(original))
        return new

    def _leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[no-untyped-def]
        self.exit(original)
        if self.parents and self.parents[-1] is original:
            self.parents.pop()
        kind = type(updated)
        if kind is cst.Call:
            return self._call(original, updated)  # type: ignore[arg-type]
        if kind in REFERENCES:
            if id(original) in self.inner:
                return updated
            return self._reference(original, updated)  # type: ignore[arg-type]
        if kind is cst.UnaryOperation:
            return _not_equal(original, updated)  # type: ignore[arg-type]
        if kind is cst.Assign or kind is cst.AugAssign:
            new = self._hooks(self.registry.assign, "on_assign", original, updated,
                              Role.STATEMENT if original is self.root else Role.EXPRESSION)
            return cst.RemovalSentinel.REMOVE if id(new) in self.remove else new
        if kind is cst.SimpleString or kind is cst.FormattedString:
            return self._hooks(self.registry.string, "on_string", original, updated)
        if kind is cst.Expr and id(updated.value) in self.remove:  # type: ignore[attr-defined]
            return cst.RemovalSentinel.REMOVE
        if kind is cst.With:
            return self._with(updated)  # type: ignore[arg-type]
        if kind is cst.FunctionDef or kind is cst.ClassDef:
            return self._decorators(updated)  # type: ignore[arg-type]
        return updated

    # --------------------------------------------------------------------- hooks
    def _call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        mark = self.call_marks.pop()
        new = self._call_hooks(original, updated)
        if new is updated and updated is not original and (
                id(updated) in self.quiet or self._old_stack(updated.func)):
            return self._as_written(original, updated, mark)  # left as it is
        return new

    def _old_stack(self, func: cst.BaseExpression) -> bool:
        """Whether the function called is an XLA one (no rule rewrote the call: it is
        reported as it stands)."""
        resolution = self.resolve(func)
        return resolution is not None and resolution.touches_xla

    def _as_written(self, original: cst.Call, updated: cst.Call,
                    mark: tuple[int, int, tuple[frozenset[str], int, int]]) -> cst.Call:
        """A call a rule left as it is, with the changes made inside it undone and reported
        (`neuron_migrate.engine.kept_calls`)."""
        found, comments, saved = mark
        inner = [p for p in self.findings[found:] if p.anchor is not original]
        outer = [p for p in self.findings[found:] if p.anchor is original]
        if not any(p.applied for p in inner) or any(p.applied for p in outer) or \
                id(updated) in self.remove:
            return updated  # nothing inside changed, or the call is replaced too
        self._restore(saved)
        del self.comments[comments:]
        self.findings[found:] = [*held_back(inner, original, outer), *outer]
        for head, node in anchors(inner):
            self._report(head, node)
        if id(updated) in self.quiet:  # a rule's finding covers the call, as written now
            self._report(original.func, original)
        return original

    def _call_hooks(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        resolution = self.resolve(updated.func)
        role = self.roles.get(id(original), Role.EXPRESSION)
        if role is not Role.EXPRESSION:
            self.roles[id(updated)] = role
        if resolution is not None and not resolution.ambiguous:
            rule = self.registry.call_rule(resolution.qualnames)
            if rule is not None and self.registry.enabled(rule):
                site = UnitSite(self, role, resolution.qualnames[0], original)
                saved = self._save()
                outcome = rule.on_call(updated, site)
                if outcome is not None:
                    return self._apply(rule, outcome, original, updated, role, saved)
        return self._hooks(self.registry.any_call, "on_any_call", original, updated, role)

    def _reference(self, original: cst.CSTNode,
                   updated: cst.Name | cst.Attribute) -> cst.CSTNode:
        if type(updated) is cst.Attribute and \
                updated.attr.value in self.registry.attributes:  # type: ignore[union-attr]
            resolution = self.resolve(updated)
            if resolution is None:  # an attribute of some object (`t.is_cuda`)
                role = self.roles.get(id(original), Role.EXPRESSION)
                return self._hooks(self.registry.attribute, "on_attribute", original, updated,
                                   role)
        if not self.registry.by_name:
            return updated
        resolution = self.resolve(updated)
        if resolution is None or resolution.ambiguous:
            return updated
        rule = self.registry.name_rule(resolution.qualnames)
        if rule is None or not self.registry.enabled(rule):
            return updated
        role = self.roles.get(id(original), Role.EXPRESSION)
        site = UnitSite(self, role, resolution.qualnames[0], original)
        saved = self._save()
        outcome = rule.on_reference(updated, site)
        if outcome is None:
            return updated
        if role is not Role.EXPRESSION:
            self.roles[id(updated)] = role
        return self._apply(rule, outcome, original, updated, role, saved)

    def _hooks(self, rules: tuple[Rule, ...], hook: str, original: cst.CSTNode,
               updated: cst.CSTNode, role: Role = Role.EXPRESSION) -> cst.CSTNode:
        if not rules:
            return updated
        site = UnitSite(self, role, None, original)
        for rule in rules:  # each rule sees what the previous ones made of the node
            saved = self._save()
            outcome = getattr(rule, hook)(updated, site)
            if outcome is None:
                continue
            new = self._apply(rule, outcome, original, updated, role, saved)
            if not isinstance(outcome, Replace) or type(new) is not type(updated) \
                    or new is updated:
                return new
            updated = new
        return updated

    def _save(self) -> tuple[frozenset[str], int, int]:
        """What a hook may add to the file; rolled back when its change is not applied."""
        return frozenset(self.context.needs), len(self.context.helpers), len(self.after)

    def _restore(self, saved: tuple[frozenset[str], int, int]) -> None:
        needs, helpers, after = saved
        self.context.needs.intersection_update(needs)
        del self.context.helpers[helpers:]
        del self.after[after:]

    def _apply(self, rule: Rule, outcome: Outcome, original: cst.CSTNode,
               updated: cst.CSTNode, role: Role,
               saved: tuple[frozenset[str], int, int]) -> cst.CSTNode:
        if self.context.suppressions.silences(rule.id, *self.span):
            self._restore(saved)
            self._report(updated.func if isinstance(updated, cst.Call) else updated, updated)
            return updated
        new = self._outcome(rule, outcome, original, updated, role)
        if new is updated and id(updated) not in self.remove and \
                not (isinstance(outcome, ReplaceStatement) and self.statements is not None):
            if not (isinstance(outcome, Replace) and outcome.node is updated):
                self._restore(saved)
        return new

    def _outcome(self, rule: Rule, outcome: Outcome, original: cst.CSTNode,
                 updated: cst.CSTNode, role: Role) -> cst.CSTNode:
        head = updated.func if isinstance(updated, cst.Call) else updated
        outcome = replace(outcome, message=quoted_as_written(outcome.message, updated, original))
        if isinstance(outcome, Replace):
            kind = outcome.kind or rule.kind
            if kind is Kind.UNSAFE_FIX and not self.options.unsafe_fixes:
                self._report(head, updated)
                self.findings.append(self.pending(rule, kind, outcome.message, original, False,
                                                  code(outcome.node)))
                return updated
            if not self._quotes_fit(outcome.node):
                self._report(head, updated)
                self.findings.append(self.pending(
                    rule, Kind.REVIEW, f"{outcome.message} (not written: inside f-strings that "
                    "use both quote characters, the replacement's string cannot be quoted "
                    "before Python 3.12; rewrite this by hand)", original, False,
                    code(outcome.node)))
                return updated
            self.findings.append(self.pending(rule, kind, outcome.message, original, True))
            self._keep_comments(updated, (outcome.node,))
            return self._fit_quotes(outcome.node)
        if isinstance(outcome, ReplaceStatement):
            kind = outcome.kind or rule.kind
            applies = kind is not Kind.UNSAFE_FIX or self.options.unsafe_fixes
            if role is Role.STATEMENT and self.line_level and self.statements is None and applies:
                self.statements = outcome.statements
                self._keep_comments(updated, outcome.statements)
                self.remove.add(id(updated))
                self.findings.append(self.pending(rule, kind, outcome.message, original, True))
                return updated
            suggestion = "\n".join(code(s).rstrip("\n") for s in outcome.statements)
            self._report(head, updated)
            unapplied = kind if not applies else Kind.REVIEW
            message = outcome.message if not applies else \
                f"{outcome.message} (the call is not a statement of its own, rewrite it by hand)"
            self.findings.append(self.pending(rule, unapplied, message, original, False,
                                              suggestion))
            return updated
        if isinstance(outcome, Remove):
            if role is Role.EXPRESSION:
                outcome = Review(f"`{code(original)}`: its value is used here, so it cannot "
                                 f"simply be deleted; rewrite this by hand ({rule.summary})")
            elif rule.kind is Kind.UNSAFE_FIX and not self.options.unsafe_fixes:
                self._report(head, updated)
                self.findings.append(self.pending(rule, rule.kind, outcome.message, original,
                                                  False, "(delete this statement)"))
                return updated
            else:
                self.remove.add(id(updated))  # its comments go with it, as on its line
                self.findings.append(self.pending(rule, rule.kind, outcome.message, original,
                                                  True))
                return updated
        self._report(head, updated)
        self.findings.append(self.pending(rule, Kind.REVIEW, outcome.message, original, False,
                                          outcome.suggestion))
        return updated

    def _keep_comments(self, old: cst.CSTNode, new: tuple[cst.CSTNode, ...]) -> None:
        """Remember the comments in `old` that its replacement `new` drops."""
        if not self.commented:
            return
        kept = [c.value for node in new for c in _comments(node)]
        for comment in _comments(old):
            if comment.value in kept:
                kept.remove(comment.value)
            else:
                self.comments.append(comment)

    def _fit_quotes(self, node: cst.CSTNode) -> cst.CSTNode:
        """Inside an f-string's braces, a replacement's string literals must not reuse the
        quote of any f-string around them (a syntax error before Python 3.12)."""
        quotes = self._enclosing_quotes()
        if len(quotes) != 1:
            return node
        return node.visit(_Requote(quotes.pop()))  # type: ignore[return-value]

    def _enclosing_quotes(self) -> set[str]:
        """The one-character quotes of the f-strings around this place (triple-quoted ones
        do not end at a single quote character)."""
        return {p.end for p in self.parents
                if isinstance(p, cst.FormattedString) and p.end in ('"', "'")}

    def _quotes_fit(self, node: cst.CSTNode) -> bool:
        """Whether a replacement can sit here: inside f-strings that use both quote
        characters, no string literal can (before Python 3.12)."""
        return len(self._enclosing_quotes()) < 2 or not any(
            isinstance(n, (cst.SimpleString, cst.FormattedString)) for n in _nodes(node))

    def _report(self, head: cst.CSTNode, node: cst.CSTNode) -> None:
        """This finding covers `head`'s XLA name and every XLA string in `node`; other XLA
        names inside `node` (arguments) are still reported on their own."""
        self.reported.add(id(head))
        self.quiet.add(id(node))

    def _decorators(self, node: cst.FunctionDef | cst.ClassDef
                    ) -> cst.FunctionDef | cst.ClassDef:
        """Drops the decorators a rule removed; their comments stay, on lines of their own."""
        kept: list[cst.Decorator] = []
        carried: list[cst.EmptyLine] = []
        for decorator in node.decorators:
            if id(decorator.decorator) not in self.remove:
                kept.append(decorator.with_changes(
                    leading_lines=[*carried, *decorator.leading_lines]))
                carried = []
                continue
            carried.extend(decorator.leading_lines)
            comment = decorator.trailing_whitespace.comment
            if comment is not None:
                carried.append(cst.EmptyLine(comment=comment))
        if len(kept) == len(node.decorators):
            return node
        return node.with_changes(decorators=kept, lines_after_decorators=[
            *carried, *node.lines_after_decorators])

    def _with(self, node: cst.With) -> cst.With:
        items = [item for item in node.items if id(item.item) not in self.remove]
        if len(items) == len(node.items):
            return node
        if not items:
            self.unwrap = True
            return node
        items[-1] = items[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return node.with_changes(items=items)


def _not_equal(original: cst.UnaryOperation, updated: cst.UnaryOperation) -> cst.BaseExpression:
    """`not a == b`, where a rule turned the operand into that comparison (`not
    xm.is_master_ordinal()`), reads `a != b`. Comparisons the user wrote stay as they are."""
    operand = updated.expression
    if type(updated.operator) is not cst.Not or type(operand) is not cst.Comparison \
            or type(original.expression) is cst.Comparison or operand.lpar:  # type: ignore[attr-defined]
        return updated
    comparisons = operand.comparisons  # type: ignore[attr-defined]
    if len(comparisons) != 1 or type(comparisons[0].operator) is not cst.Equal:
        return updated
    equal = comparisons[0].operator
    flipped = comparisons[0].with_changes(operator=cst.NotEqual(
        whitespace_before=equal.whitespace_before, whitespace_after=equal.whitespace_after))
    return operand.with_changes(comparisons=[flipped], lpar=updated.lpar, rpar=updated.rpar)
