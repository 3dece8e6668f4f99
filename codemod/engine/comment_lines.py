"""Comment lines around rewritten statements.

A statement the migration removes hands its comments to the statement that follows (a comment
usually introduces the code below it), so nothing the user wrote is lost and the comments keep
their order; the blank lines that set a block apart do not move with them. Review notes
(`# neuron-migrate: NMxxx ...`) are comment lines too, put above the statement they are about.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from neuron_migrate.engine.context import UnitResult
    from neuron_migrate.registry import Registry


def review_note(registry: Registry, rule_id: str) -> str:
    """The comment that marks a statement for review by the rule that asks for it."""
    rule = registry.by_id.get(rule_id)
    return f"# neuron-migrate: {rule_id} {rule.summary if rule else ''}".rstrip()


def attach(lines: list[cst.EmptyLine], statement: cst.BaseStatement,
            first: bool = False) -> cst.BaseStatement:
    """Give a statement the comment lines of statements removed before it.

    Blank lines alone are not carried: the statement keeps its own spacing, except that a
    statement that became the first of its block after a removal loses its leading blank lines.
    """
    own = list(statement.leading_lines)
    if first:
        own = unspaced(own)
    if has_comment(lines):
        own = [*lines, *own]
    elif lines and not own and not first:
        own = list(lines)  # the removed statement's spacing separates what remains
    if own == list(statement.leading_lines):
        return statement
    return statement.with_changes(leading_lines=own)


def unspaced(lines: list[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """The lines without the blank ones before the first comment: the first statement of a
    block does not start with a gap."""
    start = 0
    while start < len(lines) and lines[start].comment is None:
        start += 1
    return lines[start:]


def noted(statements: tuple[cst.BaseStatement, ...],
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
            return with_notes(updated, [t for _, t in texts])

    noted = [statement.visit(Notes()) for statement in statements]
    rest = [t for i, (t, _) in enumerate(notes) if i not in placed]
    noted[0] = with_notes(noted[0], rest)  # type: ignore[arg-type]
    return tuple(noted)  # type: ignore[arg-type]


def _descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in node.children:
        yield from _descendants(child)


def with_notes(statement: cst.BaseStatement, texts: list[str]) -> cst.BaseStatement:
    present = {line.comment.value for line in statement.leading_lines if line.comment}
    lines = [cst.EmptyLine(comment=cst.Comment(t)) for t in dict.fromkeys(texts)
             if t not in present]
    if not lines:
        return statement
    return statement.with_changes(leading_lines=[*statement.leading_lines, *lines])


def moved_comments(results: Sequence[UnitResult | None]) -> list[cst.EmptyLine]:
    """Comment lines for the comments the rewrite of these units took out of the code."""
    return [cst.EmptyLine(comment=comment) for result in results if result
            for comment in result.comments]


def has_comment(lines: Sequence[cst.EmptyLine]) -> bool:
    return any(line.comment is not None for line in lines)


def footer_lines(carry: list[cst.EmptyLine],
                 footer: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    return [*carry, *footer] if has_comment(carry) else list(footer)
