"""Rewriting a module, phase one: pair LibCST statements with `ast` statements and rewrite the
flagged ones, so that every finding is known before the module is rebuilt
(`neuron_migrate.engine.rebuild`).

The two trees agree statement for statement (a LibCST line of `a; b` is two `ast` statements),
so the pairing costs a walk over the statements on the path, not over the whole module.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

import libcst as cst

from neuron_migrate.analysis.analyse import Analysis
from neuron_migrate.analysis.scopes import Binding, Scope
from neuron_migrate.analysis.script_entry import main_block
from neuron_migrate.engine.comment_lines import noted, review_note
from neuron_migrate.engine.context import FileContext, Pending, Residual, UnitResult
from neuron_migrate.engine.dead_statements import dead_import_guard
from neuron_migrate.engine.entry_hooks import entry_hooks
from neuron_migrate.engine.imports import ImportNote, plan_removals
from neuron_migrate.engine.nameguard import exports
from neuron_migrate.engine.pairing import map_blocks, paired_units
from neuron_migrate.engine.probes import probe_notes
from neuron_migrate.engine.rebuild import ModuleBuilder
from neuron_migrate.engine.residual import ResidualScanner
from neuron_migrate.engine.suppress import span
from neuron_migrate.engine.transform import UnitRewriter
from neuron_migrate.syntax.walk import transform, walk
from neuron_migrate.model import Kind
from neuron_migrate.registry import Registry


class ModuleRewriter:
    def __init__(self, analysis: Analysis, registry: Registry, context: FileContext,
                 keep: dict[str, str] | None = None) -> None:
        self.analysis = analysis
        # imports to keep although nothing the rewrite read uses them: name -> why (the
        # name guard found a use the rewrite does not read)
        self.keep = keep or {}
        self.registry = registry
        self.context = context
        self.results: dict[int, UnitResult] = {}
        self.before: dict[int, tuple[cst.BaseStatement, ...]] = {}  # inserted above a unit
        self.planned: set[int] = set()  # units with `Rule.on_before` statements above them
        self.shared: str | None = None  # the module the helpers are imported from, if any
        self.findings: list[tuple[Pending | Residual, ast.stmt]] = []
        self.import_notes: list[ImportNote] = []
        self.used: set[int] = set(analysis.used)  # what the statements it skips name
        self.removals: dict[int, set[int]] = {}
        # lines the rewrite may change (1-based, inclusive); a change elsewhere makes the
        # caller check that LibCST reproduces the file
        self.touched: list[tuple[int, int]] = []

    @property
    def applies(self) -> bool:
        """After `plan`: whether anything would be applied, that is whether the file changes
        (review items alone leave it as it is)."""
        return any(isinstance(item, Pending) and item.applied for item, _ in self.findings) \
            or any(note.applied for note in self.import_notes)
    def build(self, module: cst.Module) -> cst.Module:
        """The new module, once `plan` has run."""
        return ModuleBuilder(self).build(module)

    def plan(self, module: cst.Module) -> None:
        """Rewrite the flagged statements and decide which imports go: every finding is known
        after this, before the module is rebuilt."""
        self._visit(module.body, self.analysis.tree.body)
        self.removals, self.import_notes = plan_removals(
            self.analysis.xla_imports, self.used, self.registry, self._silenced, self._kept())
        self.import_notes += probe_notes(self.analysis, self.removals, self.registry,
                                         self._silenced,
                                         lambda unit: dead_import_guard(unit, self.removals))

    def _silenced(self, rule_id: str, unit: ast.stmt) -> bool:
        return self.context.suppressions.silences(rule_id, *span(unit))

    def _kept(self) -> Callable[[Binding], str | None]:
        """Why an import the rewritten code does not use must stay, if it must: a module-level
        name listed in `__all__` is part of the module's interface."""
        exported = {name for name, _ in exports(self.analysis.tree)}
        module = self.analysis.module_scope

        def kept(binding: Binding) -> str | None:
            if binding.name in self.keep:
                return self.keep[binding.name]
            statement = binding.statement
            if binding.name in exported and statement is not None and \
                    self.analysis.scope_of.get(id(statement)) is module:
                return (f"`{binding.name}` is listed in `__all__`, so other modules may import "
                        "it from here; export a native replacement, or take it out of "
                        "`__all__`, by hand")
            return None
        return kept

    # ------------------------------------------------------------ phase 1: rewrite
    def _visit(self, statements: Sequence[cst.CSTNode], body: list[ast.stmt],
               suite: bool = False) -> None:
        """`suite`: the statements of a one-line block (`if x: a(); b()`), each of which can
        become a line of its own (the block is then indented)."""
        on_path, flagged = self.analysis.on_path, self.analysis.flagged
        for node, unit, alone in paired_units(statements, body, suite):
            if id(unit) not in on_path:
                continue
            if id(unit) in flagged:
                if id(unit) in self.analysis.edited:
                    self._before(node, unit, alone)
                self._rewrite_unit(node, unit, alone)
            if unit is self.analysis.entry:
                self._entry(node, unit, alone)
            if isinstance(node, cst.BaseCompoundStatement):
                map_blocks(node, unit, self._visit_suite, self._visit_elif)

    def _visit_suite(self, suite: cst.BaseSuite, body: list[ast.stmt]) -> cst.BaseSuite:
        self._visit(suite.body, body, suite=isinstance(suite, cst.SimpleStatementSuite))
        return suite

    def _visit_elif(self, node: cst.If, unit: ast.If) -> cst.If:
        self._visit([node], [unit])
        return node

    def _entry(self, node: cst.CSTNode, unit: ast.stmt, alone: bool) -> None:
        """The rules' set-up at the script's entry (`neuron_migrate.analysis.script_entry`)."""
        rewriter = UnitRewriter(node, self.analysis.scope_of[id(unit)], self.registry,
                                self.analysis, unit, self.context,
                                line_level=alone and isinstance(node, cst.BaseSmallStatement))
        inserted, findings = entry_hooks(rewriter, self.registry.entry, node)
        self.findings.extend((p, unit) for p in findings)
        if inserted:
            self.before[id(unit)] = (*self.before.get(id(unit), ()), *inserted)
            block = main_block(self.analysis.tree)  # its one-line body becomes a block
            self.touched.append((block.lineno if block else unit.lineno, unit.lineno))

    def _before(self, node: cst.CSTNode, unit: ast.stmt, alone: bool) -> None:
        """What the rules insert above a statement they planned for (`Rule.on_before`)."""
        rewriter = UnitRewriter(node, self.analysis.scope_of[id(unit)], self.registry,
                                self.analysis, unit, self.context,
                                line_level=alone and isinstance(node, cst.BaseSmallStatement))
        inserted, findings = entry_hooks(rewriter, self.registry.before, node, "on_before")
        self.findings.extend((p, unit) for p in findings)
        if inserted:
            self.before[id(unit)] = (*self.before.get(id(unit), ()), *inserted)
            self.planned.add(id(unit))
            self.touched.append((unit.lineno, unit.lineno))

    def _rewrite_unit(self, node: cst.CSTNode, unit: ast.stmt, alone: bool) -> None:
        scope = self.analysis.scope_of[id(unit)]
        rewriter = UnitRewriter(node, scope, self.registry, self.analysis, unit, self.context,
                                line_level=alone and isinstance(node, cst.BaseSmallStatement))
        new = transform(node, rewriter)
        self.findings.extend((p, unit) for p in rewriter.findings)
        after, comments = tuple(rewriter.after), tuple(rewriter.comments)
        if new is not node or rewriter.statements is not None:
            self.touched.append((span(unit)[0], unit.end_lineno or unit.lineno)
                                if rewriter.unwrap else span(unit))
        if isinstance(new, cst.RemovalSentinel) or rewriter.statements is not None:
            self.results[id(unit)] = UnitResult(None, statements=rewriter.statements, after=after,
                                                comments=comments)
            written: tuple[cst.CSTNode, ...] = (*(rewriter.statements or ()), *after)
        else:
            self.results[id(unit)] = UnitResult(new, rewriter.unwrap, after=after,
                                                comments=comments)
            written = (*(() if rewriter.unwrap else (new,)), *after)
        if not written:
            return
        # what the new code still references: the imports it keeps, and the XLA names left
        # in it (a rewritten call's arguments included), each reported
        scanner = self._scan(written, scope, rewriter.clean, rewriter.reported, rewriter.quiet,
                             blocks=len(written) > 1 or written[0] is not new)
        notes: list[tuple[str, cst.CSTNode | None]] = []
        for rule_id, message, anchor in scanner.findings:
            if self.context.suppressions.silences(rule_id, *span(unit)):
                continue
            sig, rank = scanner.occurrence(anchor)
            self.findings.append((Residual(rule_id, message, sig, rank), unit))
            notes.append((rule_id, anchor))
        if rewriter.statements is not None and self.context.options.annotate:
            # notes go above the new statement that holds what they are about, where the next
            # run would put them
            notes += [(p.rule_id, p.anchor) for p in rewriter.findings if p.kind is Kind.REVIEW]
            texts = [(review_note(self.registry, rule_id), anchor) for rule_id, anchor in notes]
            result = self.results[id(unit)]
            self.results[id(unit)] = UnitResult(
                None, statements=noted(rewriter.statements, texts), after=result.after,
                comments=result.comments)

    def _scan(self, nodes: Sequence[cst.CSTNode], scope: Scope, clean: set[int],
              reported: set[int] | None = None, quiet: set[int] | None = None,
              blocks: bool = False) -> ResidualScanner:
        """What the new code still references. The subtrees the rewriter found clean are
        skipped; when something is left to report, the code is scanned again in full, since
        a finding's position counts the nodes like it before it, skipped ones included.
        With `blocks`, the nodes are new statements, read with their bodies."""
        reported = reported or set()
        scanner = self._scanner(nodes, scope, reported, quiet, clean, blocks)
        if scanner.findings:
            scanner = self._scanner(nodes, scope, reported, quiet, None, blocks)
        return scanner

    def _scanner(self, nodes: Sequence[cst.CSTNode], scope: Scope, reported: set[int],
                 quiet: set[int] | None, clean: set[int] | None,
                 blocks: bool) -> ResidualScanner:
        scanner = ResidualScanner(nodes[0], scope, self.registry, reported, self.used, quiet,
                                  clean)
        scanner.blocks = blocks
        for node in nodes:
            walk(node, scanner)
        return scanner
