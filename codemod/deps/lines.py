"""Physical and logical lines with their offsets in the file, so every edit is a span.

Requirements files, Dockerfiles and shell scripts all continue a line with a trailing
backslash. Joining the pieces loses where each character came from, so a `LogicalLine` keeps
the map back to file offsets and says whether a span of it is contiguous in the file (a span
across a continuation is never edited).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Physical:
    start: int
    content_end: int
    """Where the line's text ends, before its newline."""
    end: int


def physical_lines(text: str) -> list[Physical]:
    lines: list[Physical] = []
    start = 0
    for chunk in text.splitlines(keepends=True):
        body = chunk.rstrip("\r\n")
        lines.append(Physical(start, start + len(body), start + len(chunk)))
        start += len(chunk)
    return lines


def newline_of(text: str) -> str:
    """The file's own line ending, for the lines an edit adds."""
    index = text.find("\n")
    if index < 0:
        return "\r" if "\r" in text else "\n"  # old Mac files end lines with "\r" alone
    return "\r\n" if index > 0 and text[index - 1] == "\r" else "\n"


@dataclass(frozen=True)
class LogicalLine:
    text: str
    pieces: tuple[tuple[int, int], ...]
    """(offset in `text`, offset in the file) where each physical piece starts."""
    first: Physical
    last: Physical
    unterminated: bool = False

    def offset(self, position: int) -> int:
        pieces = self.pieces
        index = 0 if len(pieces) == 1 else \
            bisect.bisect_right(pieces, position, key=lambda piece: piece[0]) - 1
        logical, physical = pieces[index]
        return physical + position - logical

    def contiguous(self, start: int, end: int) -> bool:
        if len(self.pieces) == 1:  # most lines: one piece is contiguous throughout
            return True
        return end <= start or self.offset(end - 1) - self.offset(start) == end - 1 - start


def logical_lines(text: str, skip: Callable[[str], bool] = lambda line: False,
                  escape: str = "\\") -> Iterator[LogicalLine]:
    """Join lines ending in `escape`; lines for which `skip` is true inside a continuation
    (Dockerfile comments) are dropped, as the builder drops them."""
    pending: list[tuple[Physical, str]] = []
    for line in physical_lines(text):
        body = text[line.start:line.content_end]
        if pending and skip(body):
            continue
        if body.endswith(escape):
            pending.append((line, body[:-len(escape)]))
            continue
        pending.append((line, body))
        yield _join(pending)
        pending = []
    if pending:
        yield _join(pending, unterminated=True)


def _join(parts: list[tuple[Physical, str]], unterminated: bool = False) -> LogicalLine:
    pieces: list[tuple[int, int]] = []
    texts: list[str] = []
    length = 0
    for line, body in parts:
        pieces.append((length, line.start))
        texts.append(body)
        length += len(body)
    return LogicalLine("".join(texts), tuple(pieces), parts[0][0], parts[-1][0], unterminated)


@dataclass(frozen=True)
class Guarded:
    """A regular expression searched for across a whole file, with words of which every
    match holds one: a text holding none is not scanned. Most files hold none, and an
    expression that does not begin with a plain word is tried at every position of the text,
    where a substring search is many times cheaper."""

    pattern: re.Pattern[str]
    needles: tuple[str, ...]

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        if any(needle in text for needle in self.needles):
            return self.pattern.finditer(text)
        return iter(())
