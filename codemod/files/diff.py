"""Unified diffs that `git apply` accepts, whatever the line endings.

Lines are split on "\\n" only, as git does (str.splitlines also splits on form feeds and other
separators, which would produce hunks git rejects); a last line without a newline gets git's
"\\ No newline at end of file" marker.
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections.abc import Iterable

_LINES = re.compile(r"[^\n]*\n|[^\n]+\Z")
_BYTE_LINES = re.compile(rb"[^\n]*\n|[^\n]+\Z")
NO_NEWLINE = "\\ No newline at end of file\n"


def split_lines(text: str) -> list[str]:
    return _LINES.findall(text)


def unified_diff(path: str, old: str, new: str, context: int = 3) -> str:
    """`difflib.unified_diff`'s text, aligned by `LineMatcher`: difflib's own matcher treats
    lines that fill over 1% of a long file as junk, and a file whose lines all repeat (a
    thousand copies of one function) then came out as one hunk replacing every line."""
    a, b = split_lines(old), split_lines(new)
    return diff_of_lines(path, a, b, LineMatcher(a, b), context)  # type: ignore[arg-type]


def diff_of_lines(path: str, a: list[str], b: list[str], matcher: difflib.SequenceMatcher,
                  context: int = 3) -> str:
    """`unified_diff` of two texts already split into lines, with the matcher that aligns
    them: a caller that also reads the matcher's opcodes has them aligned once."""
    name = path.replace("\\", "/").lstrip("/")
    out: list[str] = []
    for group in matcher.get_grouped_opcodes(context):
        if not out:
            out += [f"--- {quoted_name(f'a/{name}')}\n", f"+++ {quoted_name(f'b/{name}')}\n"]
        out.append(f"@@ -{_range(group[0][1], group[-1][2])} "
                   f"+{_range(group[0][3], group[-1][4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [_line(" ", line) for line in a[i1:i2]]
                continue
            out += [_line("-", line) for line in a[i1:i2]]
            out += [_line("+", line) for line in b[j1:j2]]
    return "".join(out)


def _line(mark: str, line: str) -> str:
    return mark + line if line.endswith("\n") else f"{mark}{line}\n{NO_NEWLINE}"


def _range(start: int, stop: int) -> str:
    """A hunk's `start,length` as unified diffs write it (difflib's `_format_range_unified`)."""
    length = stop - start
    first = start + 1 if length else start
    return str(first) if length == 1 else f"{first},{length}"


_GIT_QUOTED = re.compile('["\\x00-\\x1f\\x7f-\\x9f\\u202a-\\u202e\\u2066-\\u2069\\udc80-\\udcff]')
"""What git quotes in a name it prints (besides non-ASCII text, left as it is here): a name
holding one of these goes in double quotes with C escapes, which `git apply` reads back."""
_C_ESCAPES = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f",
              "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def quoted_name(name: str) -> str:
    """A `---`/`+++` file name as git writes it: quoted, with control characters (and the
    bytes of C1 controls, bidi overrides and undecodable bytes) as octal escapes, when it
    holds any; so a hostile name neither reaches the terminal nor breaks the patch."""
    if _GIT_QUOTED.search(name) is None:
        return name
    out = []
    for character in name:
        if character in _C_ESCAPES:
            out.append(_C_ESCAPES[character])
        elif _GIT_QUOTED.match(character):
            out += [f"\\{byte:03o}" for byte in character.encode("utf-8", "surrogateescape")]
        else:
            out.append(character)
    return '"' + "".join(out) + '"'


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
    matcher = LineMatcher(base_lines, new_lines)
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
    matcher = LineMatcher(old_lines[head:len(old_lines) - tail],
                          new_lines[head:len(new_lines) - tail])
    return all(tag == "insert" or allowed.issuperset(range(head + i1, head + i2))
               for tag, i1, i2, _, _ in matcher.get_opcodes() if tag != "equal")


class LineMatcher(difflib.SequenceMatcher):
    """`SequenceMatcher(None, a, b, autojunk=False)`, with the same matching blocks and
    opcodes, found faster in long files that differ in a few places.

    The matcher's cost is its search for the longest matching block, which visits every
    pair of equal lines (every blank line of one file against every blank line of the other).
    Without junk, that block is defined by its result alone: the longest run of equal lines
    within the ranges, the first by position in `a`, then in `b`. When a run of `floor` lines
    is known to exist (read off the two diagonals the ranges start and end on, or grown from
    a few pairs of equal lines), every run at least as long contains a line of `a` whose index
    is a multiple of `floor`; growing runs from those lines only finds every candidate, and
    the same one wins. Small ranges, and ranges without such a run, are searched pair by pair
    as `SequenceMatcher` does. tests/files/test_confined.py compares the two.

    That search still grows with the square of the lines (the cube, over the recursion) where
    the same lines repeat all through a file: a thousand copies of one function took minutes.
    Past a budget of steps the matcher gives up on the best alignment and aligns the two in
    one linear pass instead (`_resynced_blocks`): still blocks of equal lines in order, so
    opcodes and diffs stay valid, only not always the shortest."""

    def __init__(self, a: list[bytes], b: list[bytes], budget: int | None = None) -> None:
        super().__init__(None, a, b, autojunk=False)
        self.budget = STEP_BUDGET if budget is None else budget
        self.exhausted = False
        """Whether the budget ran out and the blocks are the linear pass's."""

    def get_matching_blocks(self) -> list[difflib.Match]:
        if self.matching_blocks is not None:
            return self.matching_blocks
        self._left = self.budget
        try:
            return super().get_matching_blocks()
        except _OverBudget:
            self.exhausted = True
            self.matching_blocks = _resynced_blocks(self.a, self.b)
            return self.matching_blocks

    def _spend(self, steps: int) -> None:
        self._left -= steps
        if self._left < 0:
            raise _OverBudget

    def find_longest_match(self, alo: int = 0, ahi: int | None = None, blo: int = 0,
                           bhi: int | None = None) -> difflib.Match:
        if ahi is None or bhi is None:
            return super().find_longest_match(alo, ahi, blo, bhi)
        if (ahi - alo) * (bhi - blo) < _SMALL:
            return self._every_pair(alo, ahi, blo, bhi)
        a, b, b2j = self.a, self.b, self.b2j
        floor = max(_diagonal_run(a, b, alo, ahi, blo, bhi, blo - alo),
                    _diagonal_run(a, b, alo, ahi, blo, bhi, bhi - ahi))
        if floor < _SAMPLED:
            floor = max(floor, self._probe(alo, ahi, blo, bhi))
        if floor < _SAMPLED:
            return self._every_pair(alo, ahi, blo, bhi)
        best = (0, alo, blo)  # minus the size, then the positions: the least wins
        for i in range(alo + (-alo) % floor, ahi, floor):
            where = b2j.get(a[i], ())
            first = bisect.bisect_left(where, blo)
            self._spend(len(where) - first + 1)
            for index in range(first, len(where)):
                j = where[index]
                if j >= bhi:
                    break
                start, other = i, j
                while start > alo and other > blo and a[start - 1] == b[other - 1]:
                    start, other = start - 1, other - 1
                end = i + 1
                while end < ahi and end - i + j < bhi and a[end] == b[end - i + j]:
                    end += 1
                self._spend(end - start)
                found = (start - end, start, other)
                if found < best:
                    best = found
        return difflib.Match(best[1], best[2], -best[0])

    def _probe(self, alo: int, ahi: int, blo: int, bhi: int) -> int:
        """The longest run through a few pairs of equal lines, at a quarter, half and three
        quarters of the way through `a`: a run that exists, when the ranges' own diagonals
        (an insertion at each end) have none to offer."""
        a, b, b2j = self.a, self.b, self.b2j
        longest = 0
        for i in (alo + (ahi - alo) // 4, alo + (ahi - alo) // 2, alo + (ahi - alo) * 3 // 4):
            where = b2j.get(a[i], ())
            first = bisect.bisect_left(where, blo)
            for j in where[first:first + 4]:
                if j >= bhi:
                    break
                start = i
                while start > alo and start - i + j > blo and a[start - 1] == b[start - 1 - i + j]:
                    start -= 1
                end = i + 1
                while end < ahi and end - i + j < bhi and a[end] == b[end - i + j]:
                    end += 1
                longest = max(longest, end - start)
        return longest

    def _every_pair(self, alo: int, ahi: int, blo: int, bhi: int) -> difflib.Match:
        """`SequenceMatcher`'s own search (without junk, whose steps are then no-ops), except
        that each line's positions in `b` are read from `blo` on, found by bisection, rather
        than from the start of the file: the same pairs, in the same order."""
        a, b2j = self.a, self.b2j
        besti, bestj, bestsize = alo, blo, 0
        lengths: dict[int, int] = {}
        for i in range(alo, ahi):
            get = lengths.get
            lengths = {}
            where = b2j.get(a[i], ())
            first = bisect.bisect_left(where, blo)
            self._spend(len(where) - first + 1)  # an upper bound: pairs past `bhi` are not seen
            for index in range(first, len(where)):
                j = where[index]
                if j >= bhi:
                    break
                k = lengths[j] = get(j - 1, 0) + 1
                if k > bestsize:
                    besti, bestj, bestsize = i - k + 1, j - k + 1, k
        return difflib.Match(besti, bestj, bestsize)


class KnownAlignment(difflib.SequenceMatcher):
    """The alignment of two texts of `old_length` and `new_length` lines from its changed
    blocks, as `FileResult.changes` keeps them: `get_opcodes` (and so the grouped opcodes of
    a unified diff) answers what the matcher that found them answered, without the texts.
    Between two changed blocks `SequenceMatcher` puts exactly one `equal` run; a block is a
    replacement, a deletion or an insertion by which side has lines."""

    def __init__(self, changes: Iterable[tuple[int, int, int, int]], old_length: int,
                 new_length: int) -> None:
        super().__init__(None, [], [], autojunk=False)
        opcodes: list[tuple[str, int, int, int, int]] = []
        i = j = 0
        for i1, i2, j1, j2 in changes:
            if i1 > i or j1 > j:
                opcodes.append(("equal", i, i1, j, j1))
            tag = "replace" if i1 < i2 and j1 < j2 else "delete" if i1 < i2 else "insert"
            opcodes.append((tag, i1, i2, j1, j2))
            i, j = i2, j2
        if i < old_length or j < new_length:
            opcodes.append(("equal", i, old_length, j, new_length))
        self.known = opcodes

    def get_opcodes(self) -> list[tuple[str, int, int, int, int]]:
        """A fresh list each time: difflib's grouping trims the one it is handed."""
        return list(self.known)


class _OverBudget(Exception):
    pass


STEP_BUDGET = 1_000_000
"""Pairs of lines the exact search may visit (half a second or so here) before the
linear pass aligns the files instead."""
RESYNC_WINDOW = 40
"""How far past a difference the linear pass looks for the files to agree again."""


def _resynced_blocks(a: list, b: list) -> list[difflib.Match]:
    """Matching blocks found in one pass: equal lines are taken as they come; at a difference,
    the nearest point (fewest lines skipped in both) where the files agree again, within
    `RESYNC_WINDOW` lines of each, found through each line's positions. No such point within
    the window: the rest is one replacement. Each line of `b` is visited a bounded number of
    times, so this is linear in the files' length."""
    where: dict[object, list[int]] = {}
    for j, line in enumerate(b):
        where.setdefault(line, []).append(j)
    blocks: list[difflib.Match] = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            start_i, start_j = i, j
            while i < len(a) and j < len(b) and a[i] == b[j]:
                i, j = i + 1, j + 1
            blocks.append(difflib.Match(start_i, start_j, i - start_i))
            continue
        resync = _resync(a, where, i, j, RESYNC_WINDOW)
        if resync is None:
            break
        i, j = resync
    blocks.append(difflib.Match(len(a), len(b), 0))
    return blocks


def _resync(a: list, where: dict[object, list[int]], i: int, j: int,
            window: int) -> tuple[int, int] | None:
    """The pair (i + x, j + y), x and y below `window`, with a[i + x] == b[j + y] and x + y
    the least (then x the least)."""
    best: tuple[int, int, int] | None = None
    for x in range(min(window, len(a) - i)):
        if best is not None and x >= best[0]:
            break
        positions = where.get(a[i + x], ())
        k = bisect.bisect_left(positions, j)
        if k < len(positions) and positions[k] - j < window:
            found = (x + positions[k] - j, x, positions[k])
            if best is None or found < best:
                best = found
    return None if best is None else (i + best[1], best[2])


_SAMPLED = 4
"""Below this run length, sampling saves too little to pay for itself."""
_SMALL = 400
"""Below this many pairs of lines, looking for a run to sample by costs more than it saves."""


def _diagonal_run(a: list[bytes], b: list[bytes], alo: int, ahi: int, blo: int, bhi: int,
                  offset: int) -> int:
    """The longest run of equal lines `a[i] == b[i + offset]` within the ranges."""
    best = run = 0
    for i in range(max(alo, blo - offset), min(ahi, bhi - offset)):
        if a[i] == b[i + offset]:
            run += 1
            if run > best:
                best = run
        else:
            run = 0
    return best


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
