"""Where each finding ends, and the edit a fix makes, for reports that hand fixes on (JSON,
SARIF): a review bot turns them into suggestions, an editor into code actions.

Both are worked out from the file as it was and as the run rewrote it, after the run, so the
engine and the rules stay as they are. The end of a Python finding is the end of the `ast`
node that starts where the finding does (the call, the name, the statement); elsewhere
(dependency files, notebooks, a position no node starts at) it is the end of the line. A
fix's edit is the part of the file's change at the finding's line: the lines the rewrite
replaces there, narrowed to the names that differ, with the unified diff hunk holding
them. Positions are 1-based; an end column is the column just after the last character, as
in ruff's JSON and SARIF regions.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from neuron_migrate.analysis.nodes import in_walk_order
from neuron_migrate.collector import collected_after
from neuron_migrate.files.diff import KnownAlignment, LineMatcher, diff_of_lines, split_lines
from neuron_migrate.model import FileResult, Finding
from neuron_migrate.report.summary import line_in_file
from neuron_migrate.report.text import hunks

Position = tuple[int, int]
"""(line, column), both 1-based."""


@dataclass(frozen=True)
class Edit:
    """Replace the text from `start` up to (not including) `end` with `content`; an insertion
    when the two are equal. Positions in the file as it was."""

    start: Position
    end: Position
    content: str


@dataclass(frozen=True)
class Fix:
    edit: Edit
    hunk: str
    """The unified diff hunk (with its `@@` header) that holds the edit."""


class FileEdits:
    """The positions and edits of one file's findings; built once per file, lazily."""

    def __init__(self, file: FileResult) -> None:
        self.file = file

    @cached_property
    def _old(self) -> list[str] | None:
        return self._lines(self.file.original)

    @cached_property
    def _new(self) -> list[str] | None:
        if self.file.error or not self.file.changed:
            return None
        return self._lines(self.file.new_source)

    def _lines(self, data: bytes | None) -> list[str] | None:
        """The text's lines as the unified diff splits them; None when there is none."""
        if data is None:
            return None
        try:
            return split_lines(data.decode(self.file.encoding))
        except (UnicodeDecodeError, LookupError):
            return None

    @cached_property
    def _matcher(self) -> difflib.SequenceMatcher | None:
        """The alignment of the two texts, found once for the edits and the diff: the one
        kept with the result when there is one (`FileResult.changes`)."""
        if self._old is None or self._new is None:
            return None
        if self.file.changes:
            return KnownAlignment(self.file.changes, len(self._old), len(self._new))
        return LineMatcher(self._old, self._new)  # type: ignore[arg-type]

    @cached_property
    def _opcodes(self) -> list[tuple[str, int, int, int, int]]:
        # only the blocks that differ: difflib's `get_grouped_opcodes` trims the first and
        # last `equal` opcodes, in place, of the list it shares with `get_opcodes`
        if self._matcher is None:
            return []
        return [op for op in self._matcher.get_opcodes() if op[0] != "equal"]

    def changes(self) -> tuple[tuple[int, int, int, int], ...]:
        """What `FileResult.changes` keeps: the lines of each block the rewrite changes."""
        return tuple((i1, i2, j1, j2) for _, i1, i2, j1, j2 in self._opcodes)

    @cached_property
    def _hunks(self) -> list[tuple[str, int, int]]:
        """(text, first original line, last original line) of each hunk of the file's diff."""
        if self._matcher is None or self._old is None or self._new is None:
            return []
        diff = diff_of_lines(self.file.path, self._old, self._new, self._matcher)
        # the first hunk comes with the file's `---`/`+++` header, which is not the hunk's
        return [(text[text.find("@@"):], first, last) for text, first, last in hunks(diff)]

    @cached_property
    def _tree(self) -> ast.Module | None:
        if self._old is None or not self.file.path.endswith((".py", ".pyi", "-")):
            return None
        try:  # no collection while it parses: each would walk every result the run holds
            with warnings.catch_warnings(), collected_after():
                warnings.simplefilter("ignore")
                return ast.parse("".join(self._old))
        except (SyntaxError, ValueError):
            return None

    @cached_property
    def _starts(self) -> dict[tuple[int, int], ast.AST]:
        """The outermost expression-like node starting at each (line, byte offset); simple
        statements where no expression starts (a compound statement would span its body)."""
        starts: dict[tuple[int, int], ast.AST] = {}
        statements: dict[tuple[int, int], ast.AST] = {}
        if self._tree is None:
            return starts
        for node in in_walk_order(self._tree):  # outer nodes come first
            if not hasattr(node, "end_lineno") or node.end_lineno is None:  # type: ignore[attr-defined]
                continue
            key = (node.lineno, node.col_offset)  # type: ignore[attr-defined]
            if isinstance(node, ast.stmt):
                if not hasattr(node, "body"):
                    statements.setdefault(key, node)
            else:
                starts.setdefault(key, node)
        return {**statements, **starts}

    @cached_property
    def _cells(self) -> list[list[str]] | None:
        """The source lines of each cell of a notebook."""
        if self.file.original is None or not self.file.path.endswith(".ipynb"):
            return None
        try:
            cells = json.loads(self.file.original).get("cells", [])
            return [split_lines(_source(cell)) for cell in cells]
        except (ValueError, AttributeError, TypeError):
            return None

    @cached_property
    def _known(self) -> dict[Position, Position]:
        return {(line, column): (end_line, end_column)
                for line, column, end_line, end_column in self.file.ends}

    def ends(self) -> tuple[tuple[int, int, int, int], ...]:
        """What `FileResult.ends` keeps: the end of each finding outside a notebook cell
        (whose end is its line's, found without parsing)."""
        return tuple(sorted({(f.line, f.column, *self.end(f)) for f in self.file.findings
                             if f.cell is None}))

    def end(self, finding: Finding) -> Position:
        """Where the finding's code ends, in the coordinates of its `line` and `column`."""
        line, column = finding.line, finding.column
        if finding.cell is None and (line, column) in self._known:
            return self._known[(line, column)]
        if finding.cell is not None:
            cells = self._cells
            text = cells[finding.cell][line - 1] if cells is not None and \
                finding.cell < len(cells) and line <= len(cells[finding.cell]) else None
            return line, max(column, _length(text) + 1) if text is not None else column
        old = self._old
        if old is None or line > len(old):
            return line, column
        text = old[line - 1]
        node = self._starts.get((line, len(text[:column - 1].encode("utf-8"))))
        if node is not None:
            end_line = node.end_lineno  # type: ignore[attr-defined]
            end_text = old[end_line - 1].encode("utf-8")[:node.end_col_offset]  # type: ignore[attr-defined]
            return end_line, len(end_text.decode("utf-8", "replace")) + 1
        return line, max(column, _length(text) + 1)

    def whole(self) -> tuple[list[Edit], str] | None:
        """Every edit of the file's rewrite (line blocks, in order) and its whole unified
        diff: what `apply` writes, including the parts at no finding's line (an added import,
        a helper defined once), so a tool can apply the change without the command; None
        when the file does not change or its text is not known."""
        if self._old is None or self._new is None or not self._opcodes:
            return None
        edits = [Edit((i1 + 1, 1), (i2 + 1, 1), "".join(self._new[j1:j2]))
                 for _, i1, i2, j1, j2 in self._opcodes]
        return edits, "".join(text for text, _, _ in self._hunks)

    def fix(self, finding: Finding) -> Fix | None:
        """The edit of a fix that is part of the run's rewrite, at the finding's line of the
        file (in a notebook, the .ipynb's line); None for anything else."""
        if not finding.applied or self._old is None or self._new is None:
            return None
        if finding.cell is not None and finding.file_line is None:
            return None
        line = line_in_file(finding)
        opcode = _at(self._opcodes, line)
        if opcode is None:
            return None
        edit = _narrowed(self._old, self._new, opcode, line)
        hunk = next((text for text, first, last in self._hunks
                     if first <= max(edit.start[0], 1) <= last), "")
        return Fix(edit, hunk)


def _source(cell: dict[str, object]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _length(text: str) -> int:
    """The line's length without its line ending."""
    return len(text.rstrip("\r\n"))


def _at(opcodes: Sequence[tuple[str, int, int, int, int]],
        line: int) -> tuple[str, int, int, int, int] | None:
    """The change to the original line (1-based) `line`: one that replaces or deletes it, else
    lines inserted right after it, else right before it."""
    index = line - 1
    for opcode in opcodes:
        if opcode[1] <= index < opcode[2]:
            return opcode
    for wanted in (line, index):
        for opcode in opcodes:
            if opcode[0] == "insert" and opcode[1] == wanted:
                return opcode
    return None


def _narrowed(old: list[str], new: list[str], opcode: tuple[str, int, int, int, int],
              line: int) -> Edit:
    """The change at original line `line` (1-based) as one edit. A block of changed lines
    that keeps its length is taken line by line, and a single changed line is narrowed to
    the words that differ (`xm.xla_device()` in `device = xm.xla_device()`); a block that
    grows or shrinks is replaced whole, as a suggestion on a pull request replaces lines."""
    tag, i1, i2, j1, j2 = opcode
    if tag == "replace" and i2 - i1 == j2 - j1:
        k = min(max(line - 1 - opcode[1], 0), opcode[2] - opcode[1] - 1)
        i1, i2, j1, j2 = opcode[1] + k, opcode[1] + k + 1, opcode[3] + k, opcode[3] + k + 1
    before, after = "".join(old[i1:i2]), "".join(new[j1:j2])
    if i2 - i1 != 1 or j2 - j1 != 1:
        return Edit(_position(i1, ""), _position(i1, before), after)
    head = len(os.path.commonprefix([before, after]))
    while head and _word(before[head - 1]) and _word(before[head:head + 1] + after[head:head + 1]):
        head -= 1  # whole names: `xla_device` becomes `device`, not `xla_` nothing
    tail = min(len(os.path.commonprefix([before[::-1], after[::-1]])),
               min(len(before), len(after)) - head)
    while tail and _word(before[-tail]) and \
            _word(before[-tail - 1:len(before) - tail] + after[-tail - 1:len(after) - tail]):
        tail -= 1
    return Edit(_position(i1, before[:head]), _position(i1, before[:len(before) - tail]),
                after[head:len(after) - tail])


def _word(chars: str) -> bool:
    """Whether any of these characters can be part of a name."""
    return any(c.isalnum() or c == "_" for c in chars)


def _position(first: int, text: str) -> Position:
    """The position just after `text`, which starts at the start of line `first` (0-based)."""
    breaks = text.count("\n")
    if breaks == 0:
        return first + 1, len(text) + 1
    return first + 1 + breaks, len(text) - text.rfind("\n")
