"""Gitignore-style patterns anchored at a folder, asked about every path of a walk: the
.gitignore files, `exclude` / `extend-exclude` of a configuration and the command line's
`--exclude` / `--extend-exclude` all read this way."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pathspec
from pathspec.util import normalize_file


class Patterns:
    """A gitignore spec anchored at a folder, asked about every path of a walk.

    pathspec tries each pattern in turn, a regular-expression search apiece, for every path:
    most of a walk's time. Most paths match none of them, so one search of all the patterns
    joined (`_any_pattern`) answers those at once; a path it matches is asked of the spec as
    before, which alone knows how the matching patterns rank."""

    def __init__(self, base: Path, spec: pathspec.GitIgnoreSpec, label: str = "") -> None:
        self.base = base
        self.spec = spec
        self.label = label  # where the patterns come from, for the reason a path is skipped
        text = str(base)
        self._prefix = text if text.endswith(os.sep) else text + os.sep
        self._any = _any_pattern(spec)

    def relative(self, path: Path) -> str | None:
        """`path` relative to the base, in gitignore's spelling; None when it is not below."""
        text = str(path)
        if text.startswith(self._prefix):
            relative = text[len(self._prefix):]
            return relative if os.sep == "/" else relative.replace(os.sep, "/")
        try:  # the base itself, or a path spelt differently (pathlib decides)
            return path.relative_to(self.base).as_posix()
        except ValueError:
            return None

    def check(self, relative: str) -> bool | None:
        """Whether the last pattern that matches includes the path (ignores it), or None
        when no pattern matches."""
        if self._any is not None and not self._any.search(normalize_file(relative)):
            return None
        return self.spec.check_file(relative).include

    def deciding(self, relative: str) -> tuple[bool, str] | None:
        """As `check`, with the text of the pattern that decides (for `-v`'s reasons)."""
        if self._any is not None and not self._any.search(normalize_file(relative)):
            return None
        checked = self.spec.check_file(relative)
        if checked.include is None or checked.index is None:
            return None
        return checked.include, str(getattr(self.spec.patterns[checked.index], "pattern", ""))


_DIR_MARK_SUFFIXES = (("(?:(?P<ps_d>/)|$)", "(?:/|$)"), ("(?P<ps_d>/)", "/"),
                      ("(?:(?P<ps_d>/).*)?$", "(?:/.*)?$"), ("(?P<ps_d>/).*$", "/.*$"))
"""How pathspec ends a gitignore pattern's expression (since 1.0, then as 0.12 wrote it): a
named group that tells a folder's match from a file's. Rewritten without the name, it
matches the same paths."""
_ANY_FOLDER = "^(?:.+/)?"
"""How pathspec begins the expression of a pattern without a slash: at any depth."""


@dataclass(frozen=True)
class _AnyPattern:
    """Whether some pattern of a spec matches a path, in one or two searches: expressions
    anchored at the start are matched together, those that begin at any depth sharing that
    beginning (`^(?:.+/)?(?:a|b)` matches where `^(?:.+/)?a` or `^(?:.+/)?b` does), and the
    few unanchored ones searched together."""

    anchored: re.Pattern[str] | None
    floating: re.Pattern[str] | None

    def search(self, path: str) -> bool:
        return (self.anchored is not None and self.anchored.match(path) is not None) or \
            (self.floating is not None and self.floating.search(path) is not None)


def _any_pattern(spec: pathspec.PathSpec) -> _AnyPattern | None:
    """One test that is true of a path when and only when some pattern of `spec` with an
    opinion (`include` not None) matches it; None when one cannot be made for sure (then
    every path is asked of the spec). A pattern's own expression is used as it is, but for
    its folder-mark group, which alone would repeat a group name: one with any other named
    group, another flag or a non-expression pattern leaves the spec without a shortcut."""
    deep: list[str] = []
    rooted: list[str] = []
    floating: list[str] = []
    for pattern in spec.patterns:
        if pattern.include is None:
            continue  # never matched by pathspec either
        regex = getattr(pattern, "regex", None)
        if not isinstance(regex, re.Pattern) or not isinstance(regex.pattern, str) or \
                regex.flags != re.UNICODE:
            return None
        text = regex.pattern
        for suffix, plain in _DIR_MARK_SUFFIXES:
            if text.endswith(suffix):
                text = text[:-len(suffix)] + plain
                break
        if "(?P" in text:
            return None
        if text.startswith(_ANY_FOLDER):
            deep.append(f"(?:{text[len(_ANY_FOLDER):]})")
        elif text.startswith("^"):
            rooted.append(f"(?:{text[1:]})")
        else:
            floating.append(f"(?:{text})")
    anchored = ([f"(?:.+/)?(?:{'|'.join(deep)})"] if deep else []) + rooted
    try:
        return _AnyPattern(re.compile("|".join(anchored)) if anchored else None,
                           re.compile("|".join(floating)) if floating else None)
    except re.error:
        return None


class ReadPatterns(NamedTuple):
    spec: pathspec.GitIgnoreSpec
    """What the lines that read as patterns match."""
    bad: list[tuple[int, str]]
    """Lines (numbered from 1) that are no pattern at all, such as `!` alone."""
    matching_nothing: list[tuple[int, str, str]]
    """Lines git reads but no path can match, such as `[z-a]` (a range from high to low),
    which Python's regular expressions refuse; each with that reason."""
    too_costly: list[tuple[int, str]] = []
    """Lines with more wildcards than `MAX_WILDCARDS`, passed over."""


MAX_WILDCARDS = 3
"""The most wildcards (`*` or `**`) one pattern may hold. A pattern's expression tries every
split of a name among its wildcards, so `*a*a*a*a*a*b` against a long name of `a`s takes
minutes: a hostile `.gitignore` or configuration could stall every run. Real patterns
(`**/build/**/*.o`, `*_pb2*.py`) hold three at most."""

_STAR_RUN = re.compile(r"(\\.)|(\*{2,})|(\*)")


def _tamed(line: str) -> tuple[str, int]:
    """`line` with each run of asterisks written as git reads it (`**` where the run is a
    whole path segment, `*` elsewhere), and how many wildcards it holds then."""
    count = 0

    def one(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(1):  # an escaped character, a literal
            return match.group()
        count += 1
        if match.group(3):
            return "*"
        start, end = match.span()
        whole = (start == 0 or line[start - 1] == "/") and (end == len(line) or line[end] == "/")
        return "**" if whole else "*"

    return _STAR_RUN.sub(one, line), count


def gitignore_spec(lines: Iterable[str]) -> ReadPatterns:
    """The lines read as gitignore patterns. A file whose lines all read is compiled once;
    otherwise each line is tried alone, and the spec holds those that read. Leaving out a
    line that matches nothing matches what git matches; a line with too many wildcards is
    left out too (and said)."""
    tamed = [_tamed(line) for line in lines]
    lines = [line for line, _ in tamed]
    costly = [(number, line) for number, (line, count) in enumerate(tamed, start=1)
              if count > MAX_WILDCARDS and not line.lstrip().startswith("#")]
    if not costly:
        try:
            return ReadPatterns(pathspec.GitIgnoreSpec.from_lines(lines), [], [])
        except (ValueError, re.error):
            pass
    skipped = {number for number, _ in costly}
    bad, empty, good = [], [], []
    for number, line in enumerate(lines, start=1):
        if number in skipped:
            continue
        try:
            pathspec.GitIgnoreSpec.from_lines([line])
        except re.error as error:
            empty.append((number, line, str(error.msg)))
            continue
        except ValueError:
            bad.append((number, line))
            continue
        good.append(line)
    return ReadPatterns(pathspec.GitIgnoreSpec.from_lines(good), bad, empty, costly)


def matching_nothing(where: str, read: ReadPatterns, numbered: bool = True) -> list[str]:
    """A warning for each pattern that matches nothing, naming where it is written (a file,
    with the line when `numbered`; an option or a configuration key)."""
    at = (lambda number: f"{where}:{number}") if numbered else (lambda number: where)
    return [f"{at(number)}: {line!r} can match no path ({why}); passed over"
            for number, line, why in read.matching_nothing] + \
        [f"{at(number)}: {_shown(line)} has more than {MAX_WILDCARDS} wildcards, too costly to "
         f"match against every path; passed over" for number, line in read.too_costly]


def _shown(line: str) -> str:
    """A pattern quoted in a warning, cut short when long."""
    return repr(line) if len(line) <= 80 else f"{line[:60]!r}... ({len(line)} characters)"
