"""Rewriting a module: pair LibCST statements with `ast` statements, rewrite the flagged ones,
then rebuild only the blocks on the way to them.

The two trees agree statement for statement (a LibCST line of `a; b` is two `ast` statements),
so the pairing costs a walk over the statements on the path, not over the whole module. Blocks
that lose every statement get `pass`; comments above a deleted statement move to the next one.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import libcst as cst

from neuron_migrate.analysis.analyse import Analysis, catches_import_error, imported_names
from neuron_migrate.engine.entry_hooks import entry_hooks
from neuron_migrate.engine.shared_helpers import add_helpers_import, used_helpers
from neuron_migrate.engine.imports import (ImportNote, add_helpers, add_imports, plan_removals, remove_aliases,
                             xla_heading)
from neuron_migrate.model import Kind
from neuron_migrate.registry import Registry
from neuron_migrate.engine.nameguard import exports
from neuron_migrate.engine.probes import probe_notes
from neuron_migrate.engine.mask import hidden_units
from neuron_migrate.engine.pairing import (StructureMismatch, check_pair, map_blocks, paired_units,
                                          unit_count)
from neuron_migrate.analysis.scopes import Binding, Scope
from neuron_migrate.engine.suppress import span
from neuron_migrate.engine.residual import ResidualScanner
from neuron_migrate.engine.lazy_imports import lazy_modules
from neuron_migrate.engine.same_branches import bare_pass, same_branches
from neuron_migrate.analysis.script_entry import main_block
from neuron_migrate.engine.context import FileContext, Pending
from neuron_migrate.engine.transform import UnitRewriter
from neuron_migrate.syntax.walk import transform, walk

@dataclass(frozen=True)
class UnitResult:
    node: cst.CSTNode | None  # None: the statement was removed
    unwrap: bool = False
    statements: tuple[cst.BaseStatement, ...] | None = None  # replaces the whole line
    after: tuple[cst.BaseStatement, ...] = ()  # inserted after the line
    comments: tuple[cst.Comment, ...] = ()  # from replaced code, to go above the line


@dataclass(frozen=True)
class Residual:
    rule_id: str
    message: str
    signature: tuple[str, str | None] | None
    rank: int


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
        self.annotations: dict[int, list[str]] = {}
        self.header: set[str] = set()  # the comments above the module's first statement
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
            inside = lazy_modules(self.analysis.tree, self.context.needs, self.context.named,
                                  self.context.helpers)
            body = add_helpers(body, self.context.helpers, self.analysis.module_scope,
                               module.default_newline, inside)
            body = add_imports(body, self.context.needs - inside)
        if body and module.body and body[0] is not module.body[0]:
            body[0] = _attach([], body[0], first=True)  # no blank lines at the top of a file
        footer = _footer(carry, module.footer)
        if not body and not footer and not module.header:
            return module.with_changes(body=[], footer=[], has_trailing_newline=False)
        return module.with_changes(body=body, footer=footer)

    def plan(self, module: cst.Module) -> None:
        """Rewrite the flagged statements and decide which imports go: every finding is known
        after this, before the module is rebuilt."""
        self._visit(module.body, self.analysis.tree.body)
        self.removals, self.import_notes = plan_removals(
            self.analysis.xla_imports, self.used, self.registry, self._silenced, self._kept())
        self.import_notes += probe_notes(self.analysis, self.removals, self.registry,
                                         self._silenced, self._dead_import_guard)

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
            texts = [(self._note(rule_id), anchor) for rule_id, anchor in notes]
            result = self.results[id(unit)]
            self.results[id(unit)] = UnitResult(
                None, statements=_noted(rewriter.statements, texts), after=result.after,
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

    def _annotations(self) -> dict[int, list[str]]:
        """`# neuron-migrate: NMxxx summary` lines to put above statements needing review."""
        notes: dict[int, list[str]] = {}
        items = [(f.rule_id, unit) for f, unit in self.findings
                 if isinstance(f, Residual) or f.kind is Kind.REVIEW]
        items += [(n.rule_id, n.statement) for n in self.import_notes if not n.applied]
        for rule_id, unit in items:
            text = self._note(rule_id)
            if text not in notes.setdefault(id(unit), []):
                notes[id(unit)].append(text)
        return notes

    def _note(self, rule_id: str) -> str:
        rule = self.registry.by_id.get(rule_id)
        return f"# neuron-migrate: {rule_id} {rule.summary if rule else ''}".rstrip()

    def _annotate(self, statement: cst.BaseStatement, units: list[ast.stmt]) -> cst.BaseStatement:
        if not self.annotations:
            return statement
        # comments above a file's first statement are the module's header to LibCST
        header = self.header if units and units[0] is self.analysis.tree.body[0] else ()
        return _with_notes(statement, [t for u in units for t in self.annotations.get(id(u), ())
                                       if t not in header])

    # ------------------------------------------------------------ phase 2: rebuild
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
                out.append(_attach(carry, statement, first=first))
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
                out.append(_attach(carry, ahead[0].with_changes(leading_lines=lines),
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
                moved = _comment_lines(results)
                if replaced:
                    new = [*replaced, *inserted]
                    trailing = statement.trailing_whitespace.comment
                    if trailing is not None and isinstance(new[-1], cst.SimpleStatementLine) \
                            and new[-1].trailing_whitespace.comment is None:
                        new[-1] = new[-1].with_changes(
                            trailing_whitespace=statement.trailing_whitespace)
                    elif trailing is not None:
                        moved.append(cst.EmptyLine(comment=trailing))
                    lines = [*(carry if _has_comment(carry) else []), *statement.leading_lines,
                             *moved, *new[0].leading_lines]
                    out.append(new[0].with_changes(
                        leading_lines=_unspaced(lines) if first else lines))
                    out.extend(new[1:])
                elif smalls is None:
                    out.append(_attach(carry, self._annotate(statement, units), first=first))
                elif smalls:
                    out.append(_attach(carry, self._annotate(statement.with_changes(
                        body=smalls, leading_lines=[*statement.leading_lines, *moved]),
                        units), first=first))
                    out.extend(inserted)
                elif inserted:
                    out.append(_attach([*carry, *statement.leading_lines, *moved], inserted[0],
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
                out.append(_attach(carry, statement, first=first))
                carry = []
                continue
            result = self.results.get(id(unit))
            header = result.node if result and result.node is not None else statement
            assert isinstance(header, cst.BaseCompoundStatement)
            if ahead:
                header = header.with_changes(leading_lines=statement.leading_lines)
            moved = _comment_lines([result])
            if moved:
                header = header.with_changes(leading_lines=[*header.leading_lines, *moved])
            if result and result.unwrap:
                inner, inner_carry = self._suite_statements(header.body, unit.body)  # type: ignore[attr-defined]
                lines = [*(carry if _has_comment(carry) else []), *header.leading_lines]
                if inner:
                    lines = [*lines, *inner[0].leading_lines]
                    out.append(inner[0].with_changes(
                        leading_lines=_unspaced(lines) if first else lines))
                    out.extend(inner[1:])
                    carry = inner_carry
                else:
                    carry = [*lines, *inner_carry]
                continue
            if isinstance(unit, ast.Try) and self._dead_import_guard(unit):
                self.touched.append((unit.lineno, unit.end_lineno or unit.lineno))
                lines = self._unheaded(statement, [unit], statements[index + 1:],
                                       body[position:])
                carry = [*carry, *lines]
                dropped = True
                continue
            rebuilt = map_blocks(header, unit, self._rebuild_suite, self._rebuild_elif)
            if _emptied_if(rebuilt, unit):
                # `if backend == "xla": xm.mark_step()` left as `if ...: pass`: nothing to keep
                self.touched.append((unit.lineno, unit.end_lineno or unit.lineno))
                lines = self._unheaded(statement, [unit], statements[index + 1:],
                                       body[position:])
                carry = [*carry, *lines]
                dropped = True
                continue
            kept = same_branches(statement, rebuilt) \
                if isinstance(unit, ast.If) and _pure(unit.test) else None
            if kept:
                # `if version >= 2.1: ... else: ...` with both branches now the same
                self.touched.append((unit.lineno, unit.end_lineno or unit.lineno))
                if all(bare_pass(s) for s in kept):  # both emptied: nothing to keep
                    carry = [*carry, *self._unheaded(statement, [unit], statements[index + 1:],
                                                     body[position:])]
                    dropped = True
                    continue
                lines = [*(carry if _has_comment(carry) else []), *rebuilt.leading_lines,
                         *kept[0].leading_lines]
                out.append(self._annotate(kept[0].with_changes(
                    leading_lines=_unspaced(lines) if first else lines), [unit]))
                out.extend(kept[1:])
                carry = []
                continue
            out.append(_attach(carry, self._annotate(rebuilt, [unit]), first=first))
            carry = []
        if position != len(body):
            raise StructureMismatch("fewer LibCST statements than ast statements")
        return out, carry

    def _unheaded(self, statement: cst.BaseStatement, units: list[ast.stmt],
                  following: Sequence[cst.BaseStatement], body: list[ast.stmt]
                  ) -> Sequence[cst.EmptyLine]:
        """The leading lines of a removed statement, without a section comment such as
        `# XLA imports` when every import it heads (up to a blank or comment line) went."""
        lines = statement.leading_lines
        heading = xla_heading(lines) if self._gone(statement, units) else None
        if heading is None:
            return lines
        position = 0
        for other in following:
            if other.leading_lines:
                break  # a blank line or a comment ends the section
            count = unit_count(other)
            if hidden_units(other) or not self._gone(other, body[position:position + count]):
                return lines
            position += count
        line = units[0].lineno - (len(lines) - heading)
        self.touched.append((line, line))
        kept = list(lines[:heading])
        while kept and kept[-1].comment is None:
            kept.pop()  # the blank lines that set the section apart go with it
        return kept

    def _gone(self, statement: cst.BaseStatement, units: list[ast.stmt]) -> bool:
        """Whether the rewrite removes this line: every import on it, or a dead import
        guard."""
        if isinstance(statement, cst.SimpleStatementLine):
            return bool(units) and all(
                isinstance(u, (ast.Import, ast.ImportFrom))
                and len(self.removals.get(id(u), ())) == len(u.names) for u in units)
        return len(units) == 1 and isinstance(units[0], ast.Try) and \
            self._dead_import_guard(units[0])

    def _dead_import_guard(self, unit: ast.Try) -> bool:
        """`try: import torch_xla... except ImportError: xm = None` once every import in it
        has gone: the whole statement is dead and goes too."""
        if unit.orelse or unit.finalbody or not unit.handlers:
            return False
        removed: set[str] = set()
        for statement in unit.body:
            if not isinstance(statement, (ast.Import, ast.ImportFrom)) or \
                    len(self.removals.get(id(statement), ())) != len(statement.names):
                return False
            removed |= imported_names([statement])
        for handler in unit.handlers:
            if not catches_import_error(handler):
                return False
            for statement in handler.body:
                if isinstance(statement, ast.Pass):
                    continue
                if not (isinstance(statement, ast.Assign)
                        and isinstance(statement.value, ast.Constant)
                        and all(isinstance(t, ast.Name) and t.id in removed
                                for t in statement.targets)):
                    return False
        return True

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
            return statements, _footer(carry, suite.footer)
        smalls = self._smalls(suite.body, body)  # type: ignore[arg-type]
        smalls = list(suite.body) if smalls is None else smalls
        return ([cst.SimpleStatementLine(body=smalls)] if smalls else []), []

    def _rebuild_suite(self, suite: cst.BaseSuite, body: list[ast.stmt]) -> cst.BaseSuite:
        suite = self._expanded(suite, body)
        if isinstance(suite, cst.IndentedBlock):
            statements, carry = self._rebuild(suite.body, body)
            if not statements:
                statements, carry = [_attach(carry, cst.SimpleStatementLine([cst.Pass()]))], []
            return suite.with_changes(body=statements, footer=_footer(carry, suite.footer))
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


def _emptied_if(rebuilt: cst.BaseCompoundStatement, unit: ast.stmt) -> bool:
    """An `if` without `else` whose body the migration emptied to `pass`, over a test that
    only reads names, attributes and constants: removing it changes nothing."""
    if not isinstance(unit, ast.If) or unit.orelse or not isinstance(rebuilt, cst.If) or \
            all(isinstance(s, ast.Pass) for s in unit.body) or not _pure(unit.test):
        return False
    block = rebuilt.body
    smalls = block.body if isinstance(block, cst.SimpleStatementSuite) else [
        small for line in block.body if isinstance(line, cst.SimpleStatementLine)
        for small in line.body] if len(block.body) == 1 else []
    return len(smalls) == 1 and isinstance(smalls[0], cst.Pass) and not any(
        line.comment for line in getattr(block.body[0], "leading_lines", ()))


def _pure(test: ast.expr) -> bool:
    """A condition whose evaluation does nothing but read: names, attributes, constants,
    comparisons and boolean operators of those."""
    if isinstance(test, (ast.Name, ast.Constant)):
        return True
    if isinstance(test, ast.Attribute):
        return _pure(test.value)
    if isinstance(test, ast.Compare):
        return _pure(test.left) and all(_pure(c) for c in test.comparators)
    if isinstance(test, ast.BoolOp):
        return all(_pure(v) for v in test.values)
    if isinstance(test, ast.UnaryOp):
        return _pure(test.operand)
    if isinstance(test, (ast.Tuple, ast.List, ast.Set)):
        return all(_pure(e) for e in test.elts)
    return False


def _attach(lines: list[cst.EmptyLine], statement: cst.BaseStatement,
            first: bool = False) -> cst.BaseStatement:
    """Give a statement the comment lines of statements removed before it.

    Blank lines alone are not carried: the statement keeps its own spacing, except that a
    statement that became the first of its block after a removal loses its leading blank lines.
    """
    own = list(statement.leading_lines)
    if first:
        own = _unspaced(own)
    if _has_comment(lines):
        own = [*lines, *own]
    elif lines and not own and not first:
        own = list(lines)  # the removed statement's spacing separates what remains
    if own == list(statement.leading_lines):
        return statement
    return statement.with_changes(leading_lines=own)


def _unspaced(lines: list[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """The lines without the blank ones before the first comment: the first statement of a
    block does not start with a gap."""
    start = 0
    while start < len(lines) and lines[start].comment is None:
        start += 1
    return lines[start:]


def _noted(statements: tuple[cst.BaseStatement, ...],
           notes: list[tuple[str, cst.CSTNode | None]]) -> tuple[cst.BaseStatement, ...]:
    """New statements with each note above the line that holds its anchor (the first
    statement when none does)."""
    placed: set[int] = set()

    class Notes(cst.CSTTransformer):
        def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                      updated: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
            inside = {id(n) for n in _descendants(original)}
            texts = [(i, t) for i, (t, anchor) in enumerate(notes) if id(anchor) in inside]
            placed.update(i for i, _ in texts)
            return _with_notes(updated, [t for _, t in texts])

    noted = [statement.visit(Notes()) for statement in statements]
    rest = [t for i, (t, _) in enumerate(notes) if i not in placed]
    noted[0] = _with_notes(noted[0], rest)  # type: ignore[arg-type]
    return tuple(noted)  # type: ignore[arg-type]


def _descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in node.children:
        yield from _descendants(child)


def _with_notes(statement: cst.BaseStatement, texts: list[str]) -> cst.BaseStatement:
    present = {line.comment.value for line in statement.leading_lines if line.comment}
    lines = [cst.EmptyLine(comment=cst.Comment(t)) for t in dict.fromkeys(texts)
             if t not in present]
    if not lines:
        return statement
    return statement.with_changes(leading_lines=[*statement.leading_lines, *lines])


def _comment_lines(results: Sequence[UnitResult | None]) -> list[cst.EmptyLine]:
    """Comment lines for the comments the rewrite of these units took out of the code."""
    return [cst.EmptyLine(comment=comment) for result in results if result
            for comment in result.comments]


def _has_comment(lines: Sequence[cst.EmptyLine]) -> bool:
    return any(line.comment is not None for line in lines)


def _footer(carry: list[cst.EmptyLine], footer: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    return [*carry, *footer] if _has_comment(carry) else list(footer)
