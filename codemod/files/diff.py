"""Unified diffs that `git apply` accepts, whatever the line endings.

Lines are split on "\\n" only, as git does (str.splitlines also splits on form feeds and other
separators, which would produce hunks git rejects); a last line without a newline gets git's
"\\ No newline at end of file" marker.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

_LINES = re.compile(r"[^\n]*\n|[^\n]+\Z")
_BYTE_LINES = re.compile(rb"[^\n]*\n|[^\n]+\Z")
NO_NEWLINE = "\\ No newline at end of file\n"


def split_lines(text: str) -> list[str]:
    return _LINES.findall(text)


def unified_diff(path: str, old: str, new: str, context: int = 3) -> str:
    out: list[str] = []
    name = path.replace("\\", "/").lstrip("/")
    for line in difflib.unified_diff(split_lines(old), split_lines(new), f"a/{name}",
                                     f"b/{name}", n=context):
        out.append(line)
        if not line.endswith("\n"):
            out.append("\n" + NO_NEWLINE)
    return "".join(out)


def carry_over(original: bytes, reproduced: bytes, new: bytes) -> bytes | None:
    """Apply the lines that differ between `reproduced` and `new` to `original`.

    LibCST reproduces almost every file byte for byte, but not all (it drops the space in
    `except (A, B) :`). When it does not, the edit is replayed onto the original lines so
    that lines the migration did not touch stay exactly as they were. None when the two
    differ in line structure and no such replay is possible.
    """
    old_lines = _BYTE_LINES.findall(original)
    base_lines = _BYTE_LINES.findall(reproduced)
    if len(old_lines) != len(base_lines):
        return None
    new_lines = _BYTE_LINES.findall(new)
    out: list[bytes] = []
    matcher = difflib.SequenceMatcher(None, base_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        out.extend(old_lines[i1:i2] if tag == "equal" else new_lines[j1:j2])
    return b"".join(out)


def confined(original: bytes, new: bytes, spans: list[tuple[int, int]]) -> bool:
    """Whether every original line that `new` changes or drops lies in one of `spans`
    (1-based, inclusive). Added lines are fine anywhere."""
    allowed: set[int] = set()
    for first, last in spans:
        allowed.update(range(first - 1, last))
    old_lines = _BYTE_LINES.findall(original)
    new_lines = _BYTE_LINES.findall(new)
    # lines the two share at the start and the end are aligned as they are; the matcher,
    # whose cost grows with the square of what it is given, aligns only the rest
    head = _shared(zip(old_lines, new_lines))
    room = min(len(old_lines), len(new_lines)) - head
    tail = min(_shared(zip(reversed(old_lines), reversed(new_lines))), room)
    matcher = difflib.SequenceMatcher(None, old_lines[head:len(old_lines) - tail],
                                      new_lines[head:len(new_lines) - tail], autojunk=False)
    return all(tag == "insert" or allowed.issuperset(range(head + i1, head + i2))
               for tag, i1, i2, _, _ in matcher.get_opcodes() if tag != "equal")


def _shared(pairs: Iterable[tuple[bytes, bytes]]) -> int:
    """How many pairs come before the first that differ."""
    count = 0
    for old, new in pairs:
        if old != new:
            break
        count += 1
    return count


def file_diff(path: str, original: bytes, new: bytes, encoding: str) -> str:
    """The unified diff of one migrated file, decoded the way the file is."""
    return unified_diff(path, original.decode(encoding), new.decode(encoding))
