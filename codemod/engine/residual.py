"""Reading a rewritten unit: which imports it still uses, and which XLA references and
strings remain (each reported, so nothing XLA-specific is left behind silently)."""

from __future__ import annotations

import ast
from collections.abc import Iterable

import libcst as cst

from neuron_migrate.registry import AMBIGUOUS, UNMAPPED, Registry
from neuron_migrate.analysis.scopes import Resolution, Scope
from neuron_migrate.engine.scoped_visitor import ScopedVisitor
from neuron_migrate.rule import Rule
from neuron_migrate.syntax.names import dotted, string_literal


def scanned_string(node: cst.CSTNode, registry: Registry) -> tuple[Rule, str] | None:
    """The rule that reports this string (or the first text of an f-string that one reports,
    as the `ast` analysis flags a statement for any of them) if it is left behind, and the
    text it reports."""
    if type(node) is cst.SimpleString:
        value = string_literal(node)  # type: ignore[arg-type]
        texts: Iterable[str] = () if value is None else (value,)
    else:
        texts = (part.value for part in node.parts  # type: ignore[attr-defined]
                 if type(part) is cst.FormattedStringText)
    for text in texts:
        rule = registry.string_rule(text)
        if rule is not None:
            return rule, text
    return None


class ResidualScanner(ScopedVisitor):
    """Reads a rewritten unit: which imports it still uses, and which XLA references remain."""

    def __init__(self, root: cst.CSTNode, scope: Scope, registry: Registry,
                 reported: set[int], used: set[int], quiet: set[int] | None = None,
                 clean: set[int] | None = None) -> None:
        super().__init__(root, scope)
        self.registry = registry
        self.reported = reported
        self.used = used
        self.quiet = quiet or set()
        self.clean = clean or set()  # subtrees the rewriter found nothing in
        self.quiet_depth = 0
        self.findings: list[tuple[str, str, cst.CSTNode]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if not self.enter(node):
            return False
        if id(node) in self.quiet:
            self.quiet_depth += 1
        if id(node) in self.clean:
            return False
        if id(node) in self.reported:
            self._mark_used(node)
            return False
        kind = type(node)
        if kind is cst.Name or kind is cst.Attribute:
            return self._reference(node)  # type: ignore[arg-type]
        if (kind is cst.SimpleString or kind is cst.FormattedString) and not self.quiet_depth:
            found = scanned_string(node, self.registry)
            if found is not None:
                rule, value = found
                self.findings.append((rule.id, rule.leftover_string(value), node))
        return True

    def on_leave(self, original_node: cst.CSTNode, updated: cst.CSTNode) -> None:
        self.exit(original_node)
        if id(original_node) in self.quiet:
            self.quiet_depth -= 1

    def _mark_used(self, node: cst.CSTNode) -> None:
        if isinstance(node, (cst.Name, cst.Attribute)):
            resolution = self.resolve(node)
            if resolution is not None:
                self.used.update(id(b) for b in resolution.bindings)

    def _reference(self, node: cst.Name | cst.Attribute) -> bool:
        resolution = self.resolve(node)
        if resolution is None:
            return dotted(node) is None  # descend into `f().attr`, not into plain names
        self.used.update(id(b) for b in resolution.bindings)
        if resolution.touches_xla or self.registry.prefix_rule(resolution.qualnames[0]):
            owner = self.registry.call_rule(resolution.qualnames) or \
                self.registry.name_rule(resolution.qualnames)
            if owner is not None and not self.registry.enabled(owner):
                return False
            prefix_rule = None if resolution.ambiguous else \
                self.registry.prefix_rule(resolution.qualnames[0])
            if prefix_rule is not None:
                if self.registry.enabled(prefix_rule):
                    self.findings.append((prefix_rule.id,
                                          prefix_rule.leftover_reference(resolution.qualnames[0]),
                                          node))
                return False
            rule_id = AMBIGUOUS if resolution.ambiguous else UNMAPPED
            self.findings.append((rule_id, describe(resolution, type(node) is cst.Name), node))
        return False


def describe(resolution: Resolution, plain_name: bool) -> str:
    """The message for an XLA reference no rule handles; `plain_name`: a bare name, not a
    dotted one."""
    names = ", ".join(sorted(set(resolution.qualnames)))
    module_value = plain_name and all(
        isinstance(b.statement, ast.Import) for b in resolution.bindings if b.is_import)
    if resolution.ambiguous:
        return (f"`{names}`: this name is also bound to something else in this scope, so "
                "neuron-migrate cannot tell which one is used here; migrate it by hand")
    if module_value:
        return (f"the module `{names}` is used as a value here (stored, passed or returned), "
                "so its uses cannot be followed; migrate them by hand")
    return f"`{names}` has no automatic rewrite; migrate it by hand"


