"""Which statements the readiness walk looks into, and for which rules.

Most files a readiness rule wants (by its bytes, `ReadinessRule.needs`) hold nothing it
reports, and most statements of the others neither: a `Plan` leaves out what a rule's scope,
`applies` and `candidates` prove it cannot report, before the walk looks at a node.
"""

from __future__ import annotations

import ast
import bisect
import codecs
import enum
import io
import re
import tokenize
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from neuron_migrate.analysis.readiness_facts import Facts

if TYPE_CHECKING:
    from neuron_migrate.analysis.readiness import ReadinessRule


class Scope(enum.Enum):
    """Where a rule's `check` can report anything at all (it returns None elsewhere)."""

    ANYWHERE = "anywhere"
    COMPILED = "compiled"
    """Only where `where.compiled`."""
    STEP = "step"
    """Only where `where.per_step and not where.compiled`."""



class Plan:
    """Which rules the walk hands the nodes of a statement to. A rule is left out of a
    file whose facts rule it out (nothing compiled for a `Scope.COMPILED` rule, no training
    step for a `Scope.STEP` one, `applies` false, no candidate line), and out of the
    statements outside its scope or with none of its candidate lines; a statement no rule
    is left for is not walked into. Each left-out `check` would have returned None, so
    the findings are the same."""

    def __init__(self, facts: Facts, data: bytes, rules: Sequence[ReadinessRule]) -> None:
        self.rules: list[ReadinessRule] = []
        self.anywhere = self.compiled = self.step = 0
        self.targeted: list[tuple[int, Scope, list[int]]] = []
        lines: set[int] = set()
        for rule in rules:
            if rule.scope is Scope.COMPILED and not facts.compiled or \
                    rule.scope is Scope.STEP and not facts.may_step() or not rule.applies(facts):
                continue
            found = rule.candidates(facts, data)
            if found is not None:
                found = set(found)
                if not found:
                    continue
            bit = 1 << len(self.rules)
            self.rules.append(rule)
            if found is not None:
                self.targeted.append((bit, rule.scope, sorted(found)))
                lines |= found
            elif rule.scope is Scope.COMPILED:
                self.compiled |= bit
            elif rule.scope is Scope.STEP:
                self.step |= bit
            else:
                self.anywhere |= bit
        self.lines = sorted(lines)
        self.compiled_lines = sorted(f.lineno for group in facts.functions.values()
                                     for f in group if id(f) in facts.compiled)
        leaves = any(issubclass(kind, _LEAVES) for rule in self.rules for kind in rule.nodes)
        self.fields = _ALL_FIELDS if leaves else _FIELDS
        """The fields of a node the walk goes into (not operators and load/store contexts,
        unless a rule asks for them)."""
        self._by_type: dict[int, dict[type[ast.AST], list[ReadinessRule]]] = {}

    def by_type(self, statement: ast.stmt, compiled: bool, per_step: bool
                ) -> tuple[dict[type[ast.AST], list[ReadinessRule]] | None, bool]:
        """The rules for the nodes of this statement's expressions, by node type (None when
        there are none); and whether any statement inside it may have some. Without rules
        for all statements, none inside it has any when it spans no candidate line and,
        outside compiled code, holds no compiled function (which `Scope.COMPILED` rules
        without candidates wait for)."""
        step = per_step and not compiled
        mask = self.anywhere | (self.compiled if compiled else 0) | (self.step if step else 0)
        first = statement.lineno
        if type(statement) in _DEFINITIONS and statement.decorator_list:  # type: ignore[attr-defined]
            first = min(first, *(d.lineno for d in statement.decorator_list))  # type: ignore[attr-defined]
        last = statement.end_lineno or first
        hit = _meets(self.lines, first, last)
        if hit:
            within = {Scope.ANYWHERE: True, Scope.COMPILED: compiled, Scope.STEP: step}
            for bit, scope, lines in self.targeted:
                if within[scope] and _meets(lines, first, last):
                    mask |= bit
        inside = hit or bool(self.anywhere or self.step) or bool(self.compiled) and (
            compiled or _meets(self.compiled_lines, first, last))
        if not mask:
            return None, inside
        found = self._by_type.get(mask)
        if found is None:
            found = self._by_type[mask] = {}
            for index, rule in enumerate(self.rules):
                if mask >> index & 1:
                    for kind in rule.nodes:
                        found.setdefault(kind, []).append(rule)
        return found, inside


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_LEAVES = (ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop)
_IDENTIFIERS = frozenset({"id", "attr", "arg", "kind", "conversion", "is_async", "type_comment",
                          "simple", "level", "module", "kwd_attrs"})
"""Fields that never hold a node: names, flags, numbers."""


class _Fields(dict):  # type: ignore[type-arg]
    """Node type -> the fields that may hold nodes to walk (() for anything not a node)."""

    def __init__(self, skipped: frozenset[str]) -> None:
        super().__init__()
        self.skipped = skipped

    def __missing__(self, kind: type) -> tuple[str, ...]:
        fields: tuple[str, ...] = ()
        if isinstance(kind, type) and issubclass(kind, ast.AST) and kind is not ast.Constant \
                and not issubclass(kind, ast.stmt):
            fields = tuple(f for f in kind._fields if f not in self.skipped)
        self[kind] = fields
        return fields


_ALL_FIELDS = _Fields(_IDENTIFIERS)
_FIELDS = _Fields(_IDENTIFIERS | {"ctx", "op", "ops"})


def _meets(lines: list[int], first: int, last: int) -> bool:
    """Whether the sorted `lines` hold one from `first` to `last`."""
    index = bisect.bisect_left(lines, first)
    return index < len(lines) and lines[index] <= last


def text_lines(data: bytes, words: dict[str, bool]) -> set[int]:
    """The lines of `data` (numbered as `ast` does) on which a word of `words` is spelled as
    an identifier, or begins one where `words` says True. For `candidates` of ASCII files
    only: elsewhere an identifier may be spelled with other characters."""
    if not words:
        return set()
    pattern = b"|".join(re.escape(w.encode()) + (b"" if prefix else rb"(?![A-Za-z0-9_])")
                        for w, prefix in sorted(words.items()))
    if not all(_IDENTIFIER.fullmatch(word) for word in words):
        found = re.finditer(rb"(?<![A-Za-z0-9_])(?:" + pattern + rb")", data)
        return line_numbers(data, (match.start() for match in found))
    # Without the look-behind first, `re` skips ahead to the bytes a word can start with
    # instead of trying every position; a match inside a longer identifier is dropped after.
    # No match is lost by it: one starting inside a dropped match would follow one of its
    # letters, so the look-behind would have refused it too.
    starts = (start for match in re.finditer(pattern, data)
              if not ((start := match.start()) and data[start - 1] in _WORD_BYTES))
    return line_numbers(data, starts)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def line_numbers(data: bytes, offsets: Iterable[int]) -> set[int]:
    """The lines (numbered as `ast` does) of these byte offsets of `data`, given in increasing
    order, none between the two bytes of a `\r\n`: each line's number is counted from the line
    endings since the offset before it, so the whole costs one pass over the bytes."""
    found: set[int] = set()
    line, counted, returns = 1, 0, b"\r" in data
    for start in offsets:
        # `\r\n`, `\r` and `\n` end a line for Python's tokenizer
        line += data.count(b"\n", counted, start)
        if returns:
            line += data.count(b"\r", counted, start) - data.count(b"\r\n", counted, start)
        counted = start
        found.add(line)
    return found


_TWO_LINES = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)?[^\r\n]*")


def may_declare_encoding(data: bytes) -> bool:
    """Whether the first two lines, where a coding cookie may be, may declare an encoding
    other than UTF-8: in one the bytes spell other words than they seem to. A cookie that
    declares UTF-8 (`# coding=utf-8` opens every Hugging Face file) changes nothing; the
    cookie is read as Python reads it (`tokenize.detect_encoding`), and one it refuses
    counts as another encoding."""
    head = _TWO_LINES.match(data).group()  # type: ignore[union-attr]
    if b"coding" not in head:
        return False
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(head).readline)
    except SyntaxError:
        return True
    return codecs.lookup(encoding).name not in ("utf-8", "utf-8-sig")  # `utf8`, `UTF_8`


def lines_of(nodes: Iterable[ast.AST]) -> set[int]:
    """The first line of each node: a candidate line for `ReadinessRule.candidates`."""
    return {node.lineno for node in nodes}  # type: ignore[attr-defined]
