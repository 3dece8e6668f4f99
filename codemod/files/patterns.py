"""Gitignore-style patterns anchored at a folder, asked about every path of a walk: the
.gitignore files, `exclude` / `extend-exclude` of a configuration and the command line's
`--exclude` / `--extend-exclude` all read this way.

pathspec decides what a set of patterns matches. Importing it and compiling a pattern file
costs more than the rest of a warm re-check's walk, and in most walks no path matches any
pattern (ignored folders are seldom there in a checkout). So patterns written in the plain
subset of the syntax that nearly every .gitignore uses (names, `*`, `?`, simple `[...]`,
slashes, `!`) are read here without pathspec (`_plain_test`): a test that is true of every
path some pattern matches, and of few others, answers most paths, and the pathspec spec is
built only for a path that passes it. Patterns outside that subset are compiled by pathspec
at once."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:
    import pathspec


class _Test(Protocol):
    def search(self, path: str) -> bool: ...


class Patterns:
    """A gitignore spec anchored at a folder, asked about every path of a walk.

    pathspec tries each pattern in turn, a regular-expression search apiece, for every path:
    most of a walk's time. Most paths match none of them, so one test true of every path
    some pattern matches (`_any_pattern` of a compiled spec, `_plain_test` of plain lines)
    answers those at once; a path it passes is asked of the spec, which alone knows how the
    matching patterns rank. Made from plain `lines` (`anchored`), the spec is compiled when
    a path first passes the test."""

    def __init__(self, base: Path, spec: pathspec.GitIgnoreSpec | None, label: str = "",
                 lines: Sequence[str] = ()) -> None:
        self.base = base
        self._spec = spec
        self._lines = lines
        self.label = label  # where the patterns come from, for the reason a path is skipped
        text = str(base)
        self._prefix = text if text.endswith(os.sep) else text + os.sep
        self._any: _Test | None = _any_pattern(spec) if spec is not None else \
            _plain_test(lines)

    @property
    def spec(self) -> pathspec.GitIgnoreSpec:
        if self._spec is None:
            self._spec = gitignore_spec(self._lines).spec
        return self._spec

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
        if self._any is not None and not self._any.search(_normalized(relative)):
            return None
        return self.spec.check_file(relative).include

    def deciding(self, relative: str) -> tuple[bool, str] | None:
        """As `check`, with the text of the pattern that decides (for `-v`'s reasons)."""
        if self._any is not None and not self._any.search(_normalized(relative)):
            return None
        checked = self.spec.check_file(relative)
        if checked.include is None or checked.index is None:
            return None
        return checked.include, str(getattr(self.spec.patterns[checked.index], "pattern", ""))


def _normalized(relative: str) -> str:
    """The path as pathspec matches it (`pathspec.util.normalize_file` of a path whose
    separators are already `/`)."""
    if relative.startswith("/"):
        return relative[1:]
    return relative[2:] if relative.startswith("./") else relative


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


def _any_pattern(spec: pathspec.GitIgnoreSpec) -> _AnyPattern | None:
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
    import pathspec

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


class Read(NamedTuple):
    """Lines read as the patterns of a folder, with what `ReadPatterns` says of the lines."""

    patterns: Patterns
    bad: list[tuple[int, str]]
    matching_nothing: list[tuple[int, str, str]]
    too_costly: list[tuple[int, str]]


def anchored(base: Path, lines: Iterable[str], label: str) -> Read:
    """`lines` as patterns anchored at `base`; compiled by pathspec now only when some line
    is outside the plain subset (the module docstring), which alone can be a bad line or
    one that matches nothing."""
    lines = list(lines)
    if _plain_test(lines) is not None:
        return Read(Patterns(base, None, label, lines), [], [], [])
    read = gitignore_spec(lines)
    return Read(Patterns(base, read.spec, label), read.bad, read.matching_nothing,
                read.too_costly)


def bad_lines(lines: Sequence[str]) -> list[tuple[int, str]]:
    """`ReadPatterns.bad` of the lines, asked of pathspec only when some line is not plain."""
    if _plain_test(lines) is not None:
        return []
    return gitignore_spec(lines).bad


_PLAIN_LINE = re.compile(r"!?(?:[A-Za-z0-9._+@,~$%=*?/-]|\[[A-Za-z0-9]+\])+")
"""A line of the plain subset: no space, backslash, bracket range or negated class, and no
other punctuation whose reading could differ from a name's."""
_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class _PlainTest:
    """True of a path that begins with one of `paths` (whole names), or whose first name,
    or any of whose names, passes the matching `_NameTest`: every pattern of the lines gives
    one of these that a path it matches passes."""

    paths: tuple[str, ...]
    below: tuple[str, ...]  # each of `paths` with a `/`: the paths below it
    first: _NameTest
    any: _NameTest

    def search(self, path: str) -> bool:
        names = path.split("/")
        if not self.any.names.isdisjoint(names) or names[0] in self.first.names:
            return True
        if self.any.globs is not None and self.any.globs.search(path) is not None:
            return True
        if self.first.globs is not None and self.first.globs.match(path) is not None:
            return True
        return path in self.paths or path.startswith(self.below)


@dataclass(frozen=True)
class _NameTest:
    """Folder or file names: `names` as they are, and `globs`, an expression matching a
    name that one of the globs matches, with the `/` or end that follows it."""

    names: frozenset[str]
    globs: re.Pattern[str] | None

    @classmethod
    def of(cls, globs: list[str], anywhere: bool) -> _NameTest:
        """The test of names matching one of `globs` (names with `*`, `?`, `[...]`): of any
        name of a path (`search`) when `anywhere`, else of its first (`match`)."""
        names = {glob for glob in globs if _GLOB.search(glob) is None}
        expressions = ["".join(
            "[^/]*" if piece == "*" else "[^/]" if piece == "?" else
            piece if piece.startswith("[") else re.escape(piece)
            for piece in re.findall(r"\[[^\]]*\]|[*?]|[^*?\[]+", glob))
            for glob in globs if glob not in names]
        if not expressions:
            return cls(frozenset(names), None)
        start = "(?:^|/)" if anywhere else ""
        return cls(frozenset(names), re.compile(f"{start}(?:{'|'.join(expressions)})(?:/|$)"))


def _plain_test(lines: Sequence[str]) -> _PlainTest | None:
    """The test of lines that are all plain (comments and blank lines aside), else None.

    A gitignore pattern matches a path when each of its slash-separated parts but `**`
    matches one of the path's names, in order (a folder it matches takes everything below
    it along, so the path may go on); one with a slash before its end is anchored: its
    first part matches the path's first name. So a path an anchored pattern matches begins
    with the names its first parts spell, or has a first name matching its first part (a
    glob); and any path a pattern matches has among its names one that matches each of
    the pattern's parts, of which the most telling is tested (a name rather than a glob,
    the last name rather than the leading ones). A pattern whose parts are all `*` or
    `**`, or that a `.`, `..` or a `**` inside a name makes unusual, is not plain."""
    paths: list[str] = []
    first: list[str] = []
    anywhere: list[str] = []
    for line in lines:
        if not line or line.startswith("#"):
            continue
        if _PLAIN_LINE.fullmatch(line) is None:
            return None
        tamed, wildcards = _tamed(line)
        if tamed != line or wildcards > MAX_WILDCARDS:
            return None  # star runs and costly lines: as `gitignore_spec` reads them
        pattern = line.removeprefix("!")
        parts = [part for part in pattern.split("/") if part]
        if not parts or any(part in (".", "..") or ("**" in part and part != "**")
                            for part in parts):
            return None
        telling = [part for part in parts if part.strip("*")]
        if not telling:
            return None
        if "/" in pattern.rstrip("/") and telling[0] == parts[0]:
            leading = []
            for part in parts:
                if _GLOB.search(part) is not None:
                    break
                leading.append(part)
            later = [part for part in parts[len(leading):]
                     if part != "**" and _GLOB.search(part) is None]
            if later:  # `a/**/runs/`: the name `runs` tells more than the folder `a`
                anywhere.append(later[-1])
            elif leading:
                paths.append("/".join(leading))
            else:
                first.append(parts[0])
            continue
        literal = [part for part in telling if _GLOB.search(part) is None]
        anywhere.append(max(literal, key=len) if literal else
                        max(telling, key=lambda p: len(_GLOB.sub("", p))))
    return _PlainTest(tuple(paths), tuple(f"{path}/" for path in paths),
                      _NameTest.of(first, anywhere=False),
                      _NameTest.of(anywhere, anywhere=True))
