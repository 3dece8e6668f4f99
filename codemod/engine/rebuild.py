"""Rebuilding a module once its rewrite is planned: only the blocks on the way to a rewritten
statement are rebuilt, each statement put back, replaced or dropped as the plan says.

The plan (`neuron_migrate.engine.rewrite`) already knows every finding; this stage decides
only how the new code is laid out: blocks that lose every statement get `pass`, comments
above a deleted statement move to the next one, a section comment goes with the imports it
headed, and the imports and helpers the rules asked for are added.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import TYPE_CHECKING

import libcst as cst

from neuron_migrate.engine.comment_lines import (attach, footer_lines, has_comment, moved_comments,
                                                 review_note, unspaced, with_notes)
from neuron_migrate.engine.context import Residual
from neuron_migrate.engine.dead_statements import dead_import_guard, emptied_if, pure, unheaded
from neuron_migrate.engine.imports import add_helpers, add_imports, remove_aliases
from neuron_migrate.engine.lazy_imports import lazy_modules
from neuron_migrate.engine.mask import hidden_units
from neuron_migrate.engine.pairing import StructureMismatch, check_pair, map_blocks, unit_count
from neuron_migrate.engine.same_branches import bare_pass, same_branches
from neuron_migrate.engine.shared_helpers import add_helpers_import, used_helpers
from neuron_migrate.engine.suppress import span
from neuron_migrate.model import Kind

if TYPE_CHECKING:
    from neuron_migrate.engine.rewrite import ModuleRewriter


class ModuleBuilder:
    """The new module from a planned `ModuleRewriter`: reads its results and adds to its
    `touched` lines (the lines the rewrite may change)."""

    def __init__(self, plan: ModuleRewriter) -> None:
        self.analysis = plan.analysis
        self.registry = plan.registry
        self.context = plan.context
        self.results = plan.results
        self.before = plan.before
        self.planned = plan.planned
        self.shared = plan.shared
        self.findings = plan.findings
        self.import_notes = plan.import_notes
        self.removals = plan.removals
        self.touched = plan.touched
        self.annotations: dict[int, list[str]] = {}
        self.header: set[str] = set()  # the comments above the module's first statement

    def build(self, module: cst.Module) -> cst.Module:
        """The new module."""
        self.annotations = self._annotations() if self.context.options.annotate else {}
        self.header = {line.comment.value for line in module.header if line.comment}
        self.touched.extend(span(b.statement) for b in self.analysis.xla_imports
                            if b.statement is not None and id(b.statement) in self.removals)
        body, carry = self._rebuild(module.body, self.analysis.tree.body, top_level=True)
        if self.shared is not None:  # the helpers live in the user's helpers module
            names = used_helpers(body, self.context.helpers)
            body = add_helpers_import(body, self.shared, names, module.default_newline)
            body = add_imports(body, self.context.named)
        else:
            helpers = self.registry.helper_table
            inside = lazy_modules(self.analysis.tree, self.context.needs, self.context.named,
                                  self.context.helpers, helpers)
            body = add_helpers(body, self.context.helpers, helpers, self.analysis.module_scope,
                               module.default_newline, inside)
            body = add_imports(body, self.context.needs - inside)
        if body and module.body and body[0] is not module.body[0]:
            body[0] = attach([], body[0], first=True)  # no blank lines at the top of a file
        footer = footer_lines(carry, module.footer)
        if not body and not footer and not module.header:
            return module.with_changes(body=[], footer=[], has_trailing_newline=False)
        return module.with_changes(body=body, footer=footer)

    def _annotations(self) -> dict[int, list[str]]:
        """`# neuron-migrate: NMxxx summary` lines to put above statements needing review."""
        notes: dict[int, list[str]] = {}
        items = [(f.rule_id, unit) for f, unit in self.findings
                 if isinstance(f, Residual) or f.kind is Kind.REVIEW]
        items += [(n.rule_id, n.statement) for n in self.import_notes if not n.applied]
        for rule_id, unit in items:
            text = review_note(self.registry, rule_id)
            if text not in notes.setdefault(id(unit), []):
                notes[id(unit)].append(text)
        return notes

    def _annotate(self, statement: cst.BaseStatement, units: list[ast.stmt]) -> cst.BaseStatement:
        if not self.annotations:
            return statement
        # comments above a file's first statement are the module's header to LibCST
        header = self.header if units and units[0] is self.analysis.tree.body[0] else ()
        return with_notes(statement, [t for u in units for t in self.annotations.get(id(u), ())
                                       if t not in header])

    def _rebuild(self, statements: Sequence[cst.BaseStatement], body: list[ast.stmt],
                 top_level: bool = False
                 ) -> tuple[list[cst.BaseStatement], list[cst.EmptyLine]]:
        """The new statements of a block, and comment lines still waiting for a statement.

        In an indented block, a statement that becomes the first one after a removal loses its
        leading blank lines; at the top of a module that waits until imports are added."""
        out: list[cst.BaseStatement] = []
        carry: list[cst.EmptyLine] = []
        position = 0
        dropped = False  # a statement was removed before any was kept
        for index, statement in enumerate(statements):
            first = dropped and not out and not top_level
            hidden = hidden_units(statement)
            if hidden:  # untouched statements, whatever comes before or after them
                out.append(attach(carry, statement, first=first))
                carry = []
                position += hidden
                continue
            count = unit_count(statement)
            ahead = [s for u in body[position:position + count] for s in self.before.get(id(u), ())]
            kept_lines: Sequence[cst.EmptyLine] = []
            if ahead:  # inserted statements take the line's leading comments and blank lines
                lines = statement.leading_lines
                if any(id(u) in self.planned for u in body[position:position + count]):
                    # code set up for a loop goes above it, after the blank lines that end
                    # what comes before; the loop keeps its comments and its spacing
                    blank = next((i for i, line in enumerate(lines) if line.comment), len(lines))
                    lines, kept_lines = lines[:blank], lines
                out.append(attach(carry, ahead[0].with_changes(leading_lines=lines),
                                   first=first))
                out.extend(ahead[1:])
                statement, carry, first = statement.with_changes(leading_lines=kept_lines), [], \
                    False
            if isinstance(statement, cst.SimpleStatementLine):
                count = len(statement.body)
                units = body[position:position + count]
                position += count
                smalls = self._smalls(statement.body, units)
                results = [self.results.get(id(u)) for u in units]
                replaced = next((r.statements for r in results if r and r.statements), None)
                inserted = [s for r in results if r for s in r.after]
                moved = moved_comments(results)
                if replaced:
                    new = [*replaced, *inserted]
                    trailing = statement.trailing_whitespace.comment
                    if trailing is not None and isinstance(new[-1], cst.SimpleStatementLine) \
                            and new[-1].trailing_whitespace.comment is None:
                        new[-1] = new[-1].with_changes(
                            trailing_whitespace=statement.trailing_whitespace)
                    elif trailing is not None:
                        moved.append(cst.EmptyLine(comment=trailing))
                    lines = [*(carry if has_comment(carry) else []), *statement.leading_lines,
                             *moved, *new[0].leading_lines]
                    out.append(new[0].with_changes(
                        leading_lines=unspaced(lines) if first else lines))
                    out.extend(new[1:])
                elif smalls is None:
                    out.append(attach(carry, self._annotate(statement, units), first=first))
                elif smalls:
                    out.append(attach(carry, self._annotate(statement.with_changes(
                        body=smalls, leading_lines=[*statement.leading_lines, *moved]),
                        units), first=first))
                    out.extend(inserted)
                elif inserted:
                    out.append(attach([*carry, *statement.leading_lines, *moved], inserted[0],
                                       first=first))
                    out.extend(inserted[1:])
                else:
                    lines = self._unheaded(statement, units, statements[index + 1:],
                                           body[position:])
                    carry = [*carry, *lines, *moved]
                    dropped = True
                    continue
                carry = []
                continue
            if position >= len(body):
                raise StructureMismatch("more LibCST statements than ast statements")
            unit = body[position]
            position += 1
            check_pair(statement, unit)
            if id(unit) not in self.analysis.on_path:
                out.append(attach(carry, statement, first=first))
                carry = []
                continue
            result = self.results.get(id(unit))
            header = result.node if result and result.node is not None else statement
            assert isinstance(header, cst.BaseCompoundStatement)
            if ahead:
                header = header.with_changes(leading_lines=statement.leading_lines)
            moved = moved_comments([result])
            if moved:
                header = header.with_changes(leading_lines=[*header.leading_lines, *moved])
            if result and result.unwrap:
                inner, inner_carry = self._suite_statements(header.body, unit.body)  # type: ignore[attr-defined]
                lines = [*(carry if has_comment(carry) else []), *header.leading_lines]
                if inner:
                    lines = [*lines, *inner[0].leading_lines]
                    out.append(inner[0].with_changes(
                        leading_lines=unspaced(lines) if first else lines))
                    out.extend(inner[1:])
                    carry = inner_carry
                else:
                    carry = [*lines, *inner_carry]
                continue
            if isinstance(unit, ast.Try) and dead_import_guard(unit, self.removals):
                self.touched.append((unit.lineno, unit.end_lineno or unit.lineno))
                lines = self._unheaded(statement, [unit], statements[index + 1:],
                                       body[position:])
                carry = [*carry, *lines]
                dropped = True
                continue
            rebuilt = map_blocks(header, unit, self._rebuild_suite, self._rebuild_elif)
            if emptied_if(rebuilt, unit):
                # `if backend == "xla": xm.mark_step()` left as `if ...: pass`: nothing to keep
                self.touched.append((unit.lineno, unit.end_lineno or unit.lineno))
                lines = self._unheaded(statement, [unit], statements[index + 1:],
                                       body[position:])
                carry = [*carry, *lines]
                dropped = True
                continue
            kept = same_branches(statement, rebuilt) \
                if isinstance(unit, ast.If) and pure(unit.test) else None
            if kept:
                # `if version >= 2.1: ... else: ...` with both branches now the same
                self.touched.append((unit.lineno, unit.end_lineno or unit.lineno))
                if all(bare_pass(s) for s in kept):  # both emptied: nothing to keep
                    carry = [*carry, *self._unheaded(statement, [unit], statements[index + 1:],
                                                     body[position:])]
                    dropped = True
                    continue
                lines = [*(carry if has_comment(carry) else []), *rebuilt.leading_lines,
                         *kept[0].leading_lines]
                out.append(self._annotate(kept[0].with_changes(
                    leading_lines=unspaced(lines) if first else lines), [unit]))
                out.extend(kept[1:])
                carry = []
                continue
            out.append(attach(carry, self._annotate(rebuilt, [unit]), first=first))
            carry = []
        if position != len(body):
            raise StructureMismatch("fewer LibCST statements than ast statements")
        return out, carry

    def _unheaded(self, statement: cst.BaseStatement, units: list[ast.stmt],
                  following: Sequence[cst.BaseStatement], body: list[ast.stmt]
                  ) -> Sequence[cst.EmptyLine]:
        """The leading lines of a removed statement, its section comment gone with it if the
        section is (`dead_statements.unheaded`)."""
        lines, heading_line = unheaded(statement, units, following, body, self.removals)
        if heading_line is not None:
            self.touched.append((heading_line, heading_line))
        return lines

    def _smalls(self, smalls: Sequence[cst.BaseSmallStatement],
                units: list[ast.stmt]) -> list[cst.BaseSmallStatement] | None:
        """New small statements of a line; None when nothing in it changes."""
        if len(units) != len(smalls):
            raise StructureMismatch("a statement line does not match its ast statements")
        if not any(id(u) in self.analysis.on_path for u in units):
            return None
        kept: list[cst.BaseSmallStatement] = []
        for small, unit in zip(smalls, units):
            check_pair(small, unit)
            new = self._small(small, unit)
            if new is not None:
                kept.append(new)
        if kept and kept[-1] is not smalls[-1]:
            kept[-1] = kept[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return kept

    def _small(self, small: cst.BaseSmallStatement,
               unit: ast.stmt) -> cst.BaseSmallStatement | None:
        indices = self.removals.get(id(unit))
        if indices is not None and isinstance(small, (cst.Import, cst.ImportFrom)):
            new = remove_aliases(small, indices)
            return None if isinstance(new, cst.RemovalSentinel) else new
        result = self.results.get(id(unit))
        if result is None:
            return small
        return result.node  # type: ignore[return-value]

    def _expanded(self, suite: cst.BaseSuite, body: list[ast.stmt]) -> cst.BaseSuite:
        """A one-line block whose statements become several lines (a statement replaced by
        statements, statements inserted after one, comments moved above one), as an indented
        block with each of its statements on a line of its own; any other block as it is."""
        if not isinstance(suite, cst.SimpleStatementSuite) or not any(
                id(u) in self.before or (r := self.results.get(id(u))) is not None
                and (r.statements or r.after or r.comments) for u in body):
            return suite
        lines = [cst.SimpleStatementLine([small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)])
                 for small in suite.body]
        return cst.IndentedBlock(body=lines, header=suite.trailing_whitespace)

    def _suite_statements(self, suite: cst.BaseSuite, body: list[ast.stmt]
                          ) -> tuple[list[cst.BaseStatement], list[cst.EmptyLine]]:
        suite = self._expanded(suite, body)
        if isinstance(suite, cst.IndentedBlock):
            statements, carry = self._rebuild(suite.body, body)
            return statements, footer_lines(carry, suite.footer)
        smalls = self._smalls(suite.body, body)  # type: ignore[arg-type]
        smalls = list(suite.body) if smalls is None else smalls
        return ([cst.SimpleStatementLine(body=smalls)] if smalls else []), []

    def _rebuild_suite(self, suite: cst.BaseSuite, body: list[ast.stmt]) -> cst.BaseSuite:
        suite = self._expanded(suite, body)
        if isinstance(suite, cst.IndentedBlock):
            statements, carry = self._rebuild(suite.body, body)
            if not statements:
                statements, carry = [attach(carry, cst.SimpleStatementLine([cst.Pass()]))], []
            return suite.with_changes(body=statements, footer=footer_lines(carry, suite.footer))
        smalls = self._smalls(suite.body, body)  # type: ignore[arg-type]
        if smalls is None:
            return suite
        return suite.with_changes(body=smalls or [cst.Pass()])

    def _rebuild_elif(self, node: cst.If, unit: ast.If) -> cst.If:
        if id(unit) not in self.analysis.on_path:
            return node
        result = self.results.get(id(unit))
        header = result.node if result and isinstance(result.node, cst.If) else node
        return map_blocks(header, unit, self._rebuild_suite, self._rebuild_elif)
