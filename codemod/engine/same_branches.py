"""An `if ... else` whose two branches the migration made the same.

`if version >= 2.1: xm.mark_step(); log() else: log()` reads `if version >= 2.1: log() else:
log()` once the XLA call is gone: the test no longer decides anything. Where evaluating the
test does nothing (the caller checks that: names, attributes, constants, comparisons of
those), one branch takes the whole statement's place. Branches that were already the same
before the migration are the author's, and stay, unless the migration emptied both to
`pass`.
"""

from __future__ import annotations

import libcst as cst

_MODULE = cst.Module(body=[])


def same_branches(before: cst.CSTNode, rebuilt: cst.BaseCompoundStatement
                  ) -> list[cst.BaseStatement] | None:
    """The statements of the body, when `rebuilt` is an `if` with a plain `else` whose block
    is now the body's to the character (comments included), and was not in `before`; else
    None."""
    if not isinstance(rebuilt, cst.If) or not isinstance(before, cst.If):
        return None
    orelse, was = rebuilt.orelse, before.orelse
    if not isinstance(orelse, cst.Else) or not isinstance(was, cst.Else) or \
            not isinstance(rebuilt.body, cst.IndentedBlock) or \
            not isinstance(orelse.body, cst.IndentedBlock) or \
            any(line.comment for line in orelse.leading_lines):
        return None
    if _text(rebuilt.body) != _text(orelse.body):
        return None
    kept = list(rebuilt.body.body)
    if _text(before.body) == _text(was.body) and not all(bare_pass(s) for s in kept):
        return None
    return kept


def bare_pass(statement: cst.BaseStatement) -> bool:
    """A `pass` line with no comment on it or above it."""
    return isinstance(statement, cst.SimpleStatementLine) and \
        all(isinstance(s, cst.Pass) for s in statement.body) and \
        statement.trailing_whitespace.comment is None and \
        not any(line.comment for line in statement.leading_lines)


def _text(block: cst.BaseSuite) -> str:
    return _MODULE.code_for_node(block)
