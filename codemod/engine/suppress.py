"""`# neuron-migrate: ignore[NM101]` comments: silence a rule on a statement's lines.

`# neuron-migrate: ignore` (no list) silences every rule there; `# neuron-migrate: ignore-file`
in the comments before the first statement silences the whole file. A suppression that
silences nothing is reported (NM002), like ruff's unused noqa, so they do not rot.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field

MARKER = b"neuron-migrate:"
_COMMENT = re.compile(r"#\s*neuron-migrate:\s*(ignore-file|ignore)\b(?:\[([^\]]*)\])?")


@dataclass
class Suppressions:
    whole_file: bool = False
    lines: dict[int, frozenset[str] | None] = field(default_factory=dict)
    """Line -> rule ids (prefixes) silenced there; None silences every rule."""
    used: set[int] = field(default_factory=set)

    def silences(self, rule_id: str, first: int, last: int) -> bool:
        for line in range(first, last + 1):
            codes = self.lines.get(line, frozenset())
            if codes is None or any(rule_id.startswith(code) for code in codes):
                self.used.add(line)
                return True
        return False

    def unused(self) -> list[int]:
        return sorted(line for line in self.lines if line not in self.used)


def read_suppressions(data: bytes) -> Suppressions:
    """The suppression comments of a file (tokenized, so a marker inside a string is not one)."""
    if MARKER not in data:
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
            match = _COMMENT.search(token.string)
            if match is None:
                continue
            if match.group(1) == "ignore-file":
                found.whole_file = found.whole_file or header
                continue
            codes = match.group(2)
            found.lines[token.start[0]] = None if codes is None else frozenset(
                c.strip().upper() for c in codes.split(",") if c.strip())
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
