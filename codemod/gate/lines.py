"""Suppression markers in requirements files, Dockerfiles, shell scripts, YAML and TOML.

All of them comment with `#`, so one reader serves every scanner: the markers are those of
Python code (`neuron_migrate.engine.suppress`), read from each line's text. A marker counts on
the line of the finding, on any line joined to it by a trailing backslash (a comment can
only close such a command, on its last line), or alone on a comment line right above it. The text is searched line by line, not parsed:
a marker inside a quoted string would count too, which no real file does by accident.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from neuron_migrate.engine.suppress import Suppressions, markers


_PYTHON_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_LINES = re.compile(r"[^\n]*\n|[^\n]+\Z")


def lines_of(text: str, python: bool) -> list[str]:
    """The physical lines, with their endings, numbered as findings number them: Python's
    tokenizer ends a line at \\r too, the dependency scanner only at \\n (and neither at a
    form feed, where `str.splitlines` would)."""
    return (_PYTHON_LINES if python else _LINES).findall(text)


def may_hold_markers(text: str) -> bool:
    return "neuron-migrate:" in text or "noqa" in text.lower()


@dataclass
class LineMarkers:
    """The markers of one text, by the text's own 1-based line numbers."""

    table: Suppressions = field(default_factory=Suppressions)
    groups: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Line -> the first and last line of its backslash-continued command."""

    @classmethod
    def of(cls, text: str) -> LineMarkers:
        found = cls()
        if not may_hold_markers(text):
            return found
        lines = [line.rstrip("\r\n") for line in lines_of(text, python=False)]
        start = 1
        for number, line in enumerate(lines, start=1):
            for marker in markers(line):
                if marker.verb != "ignore-file":  # whole files: per-file-ignores
                    found.table.add(number, marker)
            if not line.rstrip().endswith("\\"):
                first = start
                # a marker alone on the comment lines right above a command covers it: a
                # Dockerfile allows no comment after FROM, ENV or an exec-form RUN
                while first > 1 and first - 1 in found.table.written and \
                        lines[first - 2].lstrip().startswith("#"):
                    first -= 1
                for member in range(first, number + 1):
                    found.groups[member] = (first, number)
                start = number + 1
        return found

    def _group(self, line: int) -> tuple[int, int]:
        return self.groups.get(line, (line, line))

    def ignores(self, rule_id: str, line: int) -> bool:
        """Whether `ignore` or `noqa` silences the rule there (its edit is not made)."""
        return bool(self.table.lines) and self.table.silences(rule_id, *self._group(line))

    def acknowledges(self, rule_id: str, line: int) -> bool:
        """Whether `reviewed` acknowledges a review item of the rule there."""
        return bool(self.table.reviewed) and \
            self.table.acknowledges(rule_id, *self._group(line))

    def unused(self) -> list[tuple[int, str]]:
        """The lines whose markers silenced nothing, each with its markers as written."""
        return [(line, self.table.written.get(line, "")) for line in self.table.unused()]
