"""Statements the migration leaves doing nothing, which the rebuild drops: a guard around
imports that are all gone, an `if` whose body was emptied, and the section comment
(`# XLA imports`) above imports that all went.

Dropping them is safe only when nothing else happens there, so each check is strict: only a
handler that sets the removed names to constants, only a test that merely reads.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

import libcst as cst

from neuron_migrate.analysis.import_guards import catches_import_error, imported_names, stops
from neuron_migrate.engine.imports import xla_heading
from neuron_migrate.engine.mask import hidden_units
from neuron_migrate.engine.pairing import unit_count


def dead_import_guard(unit: ast.Try, removals: dict[int, set[int]]) -> bool:
    """`try: import torch_xla... except ImportError: xm = None` once every import in it
    has gone: the whole statement is dead and goes too. So does a guard whose branch only
    stopped the program (`raise ImportError("install torch_xla")`): with nothing left to
    fail in its body the branch never runs, and a `try: pass` would only puzzle a reader.

    A branch that falls back to something else is kept (and reported, NM715): what it did on a
    machine without torch_xla is a question for the user. Nothing a branch binds may go
    unless it was one of the removed names, or the scope of a name could change; `except
    ImportError as error` binds nothing that outlives the branch (Python deletes the name when
    the branch ends)."""
    if unit.orelse or unit.finalbody or not unit.handlers:
        return False
    removed: set[str] = set()
    for statement in unit.body:
        if not isinstance(statement, (ast.Import, ast.ImportFrom)) or \
                len(removals.get(id(statement), ())) != len(statement.names):
            return False
        removed |= imported_names([statement])
    for handler in unit.handlers:
        if not catches_import_error(handler):
            return False
        stopping = stops(handler)
        for statement in handler.body:
            if isinstance(statement, ast.Pass) or stopping and _binds_nothing(statement):
                continue
            if not (isinstance(statement, ast.Assign)
                    and isinstance(statement.value, ast.Constant)
                    and all(isinstance(t, ast.Name) and t.id in removed
                            for t in statement.targets)):
                return False
    return True


def _binds_nothing(statement: ast.stmt) -> bool:
    """A message or the stop itself: an expression, `raise` or `assert` with no `:=`."""
    return isinstance(statement, (ast.Expr, ast.Raise, ast.Assert)) and \
        not any(isinstance(node, ast.NamedExpr) for node in ast.walk(statement))


def emptied_if(rebuilt: cst.BaseCompoundStatement, unit: ast.stmt) -> bool:
    """An `if` without `else` whose body the migration emptied to `pass`, over a test that
    only reads names, attributes and constants: removing it changes nothing."""
    if not isinstance(unit, ast.If) or unit.orelse or not isinstance(rebuilt, cst.If) or \
            all(isinstance(s, ast.Pass) for s in unit.body) or not pure(unit.test):
        return False
    block = rebuilt.body
    smalls = block.body if isinstance(block, cst.SimpleStatementSuite) else [
        small for line in block.body if isinstance(line, cst.SimpleStatementLine)
        for small in line.body] if len(block.body) == 1 else []
    return len(smalls) == 1 and isinstance(smalls[0], cst.Pass) and not any(
        line.comment for line in getattr(block.body[0], "leading_lines", ()))


def pure(test: ast.expr) -> bool:
    """A condition whose evaluation does nothing but read: names, attributes, constants,
    comparisons and boolean operators of those."""
    if isinstance(test, (ast.Name, ast.Constant)):
        return True
    if isinstance(test, ast.Attribute):
        return pure(test.value)
    if isinstance(test, ast.Compare):
        return pure(test.left) and all(pure(c) for c in test.comparators)
    if isinstance(test, ast.BoolOp):
        return all(pure(v) for v in test.values)
    if isinstance(test, ast.UnaryOp):
        return pure(test.operand)
    if isinstance(test, (ast.Tuple, ast.List, ast.Set)):
        return all(pure(e) for e in test.elts)
    return False


def unheaded(statement: cst.BaseStatement, units: list[ast.stmt],
             following: Sequence[cst.BaseStatement], body: list[ast.stmt],
             removals: dict[int, set[int]]) -> tuple[Sequence[cst.EmptyLine], int | None]:
    """The leading lines of a removed statement, without a section comment such as
    `# XLA imports` when every import it heads (up to a blank or comment line) went; and the
    line of that comment when it goes."""
    lines = statement.leading_lines
    heading = xla_heading(lines) if _gone(statement, units, removals) else None
    if heading is None:
        return lines, None
    position = 0
    for other in following:
        if other.leading_lines:
            break  # a blank line or a comment ends the section
        count = unit_count(other)
        if hidden_units(other) or not _gone(other, body[position:position + count], removals):
            return lines, None
        position += count
    line = units[0].lineno - (len(lines) - heading)
    kept = list(lines[:heading])
    while kept and kept[-1].comment is None:
        kept.pop()  # the blank lines that set the section apart go with it
    return kept, line


def _gone(statement: cst.BaseStatement, units: list[ast.stmt],
          removals: dict[int, set[int]]) -> bool:
    """Whether the rewrite removes this line: every import on it, or a dead import guard."""
    if isinstance(statement, cst.SimpleStatementLine):
        return bool(units) and all(
            isinstance(u, (ast.Import, ast.ImportFrom))
            and len(removals.get(id(u), ())) == len(u.names) for u in units)
    return len(units) == 1 and isinstance(units[0], ast.Try) and \
        dead_import_guard(units[0], removals)
