"""Suppression and acknowledgement comments in Python code: what silences a rule where.

- `# neuron-migrate: ignore[NM101]` (or `# neuron-migrate: ignore` for every rule) on a
  statement silences those rules there: no finding, and no fix either.
- `# noqa: NM101` (also `# noqa: NM101,E501` or `# noqa: NM101 NM715`, as ruff reads them)
  means the same as `ignore[NM101]`: ruff does not fix what a noqa silences either. Only the
  codes starting with `NM` count; a bare `# noqa` (or one naming only other linters' codes) is
  left to the linters it was written for, so that adding neuron-migrate to a repository full of
  `# noqa` markers silences nothing by accident.
- `# neuron-migrate: reviewed[NM715]` acknowledges a review item: the review findings (and
  the unsafe fixes not applied) of those rules on that statement no longer fail `check`, but a
  fix that would change the file is still made and still reported. It is the marker
  `check --add-noqa` writes.
- `# neuron-migrate: ignore-file` in the comments before the first statement silences the
  whole file.

A marker that silences nothing is reported (NM002), like ruff's unused noqa, so markers do
not outlive the code they were written for.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from neuron_migrate.analysis.nodes import walked
from neuron_migrate.model import Finding, Kind
from neuron_migrate.registry import UNUSED_SUPPRESSION

_OURS = re.compile(r"#\s*neuron-migrate:\s*(ignore-file|ignore|reviewed)\b(?:\[([^\]]*)\])?")
# one way only to split the spaces around a comma: `\s*,?\s*` tried every split of a long run
_NOQA = re.compile(r"#\s*noqa\s*:\s*([A-Za-z]+[0-9]+(?:\s*(?:,\s*)?[A-Za-z]+[0-9]+)*)",
                   re.IGNORECASE)
_CODE = re.compile(r"(?<![A-Za-z])[A-Za-z]+[0-9]+")  # from a word's start: linear
_NOQA_REST = re.compile(rb"noqa[^\r\n]*", re.IGNORECASE)  # to the line's end: linear

Codes = frozenset[str] | None
"""Rule ids (or prefixes) a marker names; None names every rule."""


@dataclass(frozen=True)
class Marker:
    verb: str  # "ignore" (`noqa` included), "reviewed" or "ignore-file"
    codes: Codes
    text: str  # as written, for the message that says it is unused


def markers(comment: str) -> Iterator[Marker]:
    """The markers in one comment's text (a comment may hold several: `# noqa: E501  #
    neuron-migrate: reviewed[NM710]`)."""
    for match in _OURS.finditer(comment):
        codes = match.group(2)
        yield Marker(match.group(1), None if codes is None else frozenset(
            c.strip().upper() for c in codes.split(",") if c.strip()), match.group(0))
    for match in _NOQA.finditer(comment):
        ours = frozenset(c.upper() for c in _CODE.findall(match.group(1))
                         if c.upper().startswith("NM"))
        if ours:  # other linters' codes only: not ours to read
            yield Marker("ignore", ours, match.group(0))


def may_hold_markers(data: bytes) -> bool:
    """A cheap test before tokenizing: most files hold no marker at all, and most `noqa`
    comments name other linters' codes only. A `noqa` marker counts only when it names a
    code starting with `NM` (in any case) later on its line, which a comment never leaves."""
    if b"neuron-migrate:" in data:
        return True
    if b"noqa" not in data and b"NOQA" not in data:
        return False
    return any(b"nm" in match.group().lower() for match in _NOQA_REST.finditer(data))


def _names(codes: Codes, rule_id: str) -> bool:
    return codes is None or any(rule_id.startswith(code) for code in codes)


@dataclass
class Suppressions:
    whole_file: bool = False
    lines: dict[int, Codes] = field(default_factory=dict)
    """Line -> rule ids (prefixes) silenced there (ignore, noqa); None silences every rule."""
    reviewed: dict[int, Codes] = field(default_factory=dict)
    """Line -> rule ids whose review items are acknowledged there."""
    used: set[int] = field(default_factory=set)
    written: dict[int, str] = field(default_factory=dict)
    """Line -> its markers as written, for the NM002 message."""

    def silences(self, rule_id: str, first: int, last: int) -> bool:
        """Whether an `ignore` (or `noqa`) marker on these lines names the rule."""
        return self._names(self.lines, rule_id, first, last)

    def _names(self, table: dict[int, Codes], rule_id: str, first: int, last: int) -> bool:
        for line in range(first, last + 1):
            if line in table and _names(table[line], rule_id):
                self.used.add(line)
                return True
        return False

    def unused(self) -> list[int]:
        """Lines whose markers silenced nothing. Call after `acknowledge`, which uses the
        `reviewed` markers."""
        return sorted(line for line in {*self.lines, *self.reviewed} if line not in self.used)

    def add(self, line: int, marker: Marker) -> None:
        table = self.reviewed if marker.verb == "reviewed" else self.lines
        if line in table and table[line] is not None:
            table[line] = None if marker.codes is None else table[line] | marker.codes
        elif line not in table:
            table[line] = marker.codes
        self.written[line] = " ".join(filter(None, (self.written.get(line), marker.text)))

    def acknowledge(self, findings: Iterable[Finding], tree: ast.Module | None
                    ) -> list[Finding]:
        """The findings without those a `reviewed` marker acknowledges on their statement
        (the whole statement for a simple one, the header of a compound one)."""
        findings = list(findings)
        if not self.reviewed:
            return findings
        owner = statement_lines(tree) if tree is not None else {}
        return [f for f in findings if not self._acknowledged(f, owner)]

    def _acknowledged(self, finding: Finding, owner: dict[int, tuple[int, int]]) -> bool:
        if not acknowledgeable(finding):
            return False
        return self.acknowledges(finding.rule_id,
                                 *owner.get(finding.line, (finding.line, finding.line)))

    def acknowledges(self, rule_id: str, first: int, last: int) -> bool:
        """Whether a `reviewed` marker on these lines names the rule."""
        return self._names(self.reviewed, rule_id, first, last)


def unused_finding(path: str, line: int, written: str) -> Finding:
    """NM002 for a line whose markers silenced nothing."""
    return Finding(path, line, 1, UNUSED_SUPPRESSION, Kind.REVIEW,
                   f"this `{written or '# neuron-migrate: ignore'}` comment silences nothing "
                   "here; remove it")


def acknowledgeable(finding: Finding) -> bool:
    """What `reviewed` may hide: nothing that `apply` would write."""
    return finding.kind is Kind.REVIEW or (finding.kind is Kind.UNSAFE_FIX and not finding.applied)


def statement_lines(tree: ast.Module) -> dict[int, tuple[int, int]]:
    """Each line of the file -> the span (`span`) of the innermost statement it belongs to."""
    owner: dict[int, tuple[int, int]] = {}
    for node in walked(tree):  # outer statements before inner ones: inner spans win
        if isinstance(node, ast.stmt):
            first, last = span(node)
            for line in range(first, last + 1):
                owner[line] = (first, last)
    return owner


def read_suppressions(data: bytes) -> Suppressions:
    """The suppression comments of a file (tokenized, so a marker inside a string is not one)."""
    if not may_hold_markers(data):
        return Suppressions()
    found = Suppressions()
    header = True
    try:
        for token in tokenize.tokenize(io.BytesIO(data).readline):
            if token.type in (tokenize.ENCODING, tokenize.NL, tokenize.NEWLINE):
                continue
            if token.type != tokenize.COMMENT:
                header = False
                continue
            for marker in markers(token.string):
                if marker.verb == "ignore-file":
                    found.whole_file = found.whole_file or header
                else:
                    found.add(token.start[0], marker)
    except (tokenize.TokenError, SyntaxError):
        return found  # the parser reports the real problem
    return found


def span(unit: ast.stmt) -> tuple[int, int]:
    """The lines a suppression on a statement may sit on: a compound statement's header
    only, a simple statement's every line."""
    body = getattr(unit, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
        first = min([body[0].lineno, *(d.lineno for d in getattr(unit, "decorator_list", []))])
        return min(unit.lineno, first), max(unit.lineno, body[0].lineno - 1)
    return unit.lineno, unit.end_lineno or unit.lineno
