"""Which files a run looks at.

Walks directories in a stable order, honours .gitignore files (from the enclosing git work
tree down) and `--exclude` globs (gitignore syntax), skips version-control, virtualenv,
package and build folders, never descends into a symlinked folder and never follows a
symlinked file out of the tree it was found in.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pathspec
from pathspec.util import normalize_file

SKIPPED_DIRS = frozenset({
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", ".eggs", "__pycache__",
    "site-packages", "dist-packages", "node_modules", "build", "dist", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints",
})
Accept = Callable[[Path], bool]
"""Which files a run takes, by name (discovery never reads a file)."""


def python_files(path: Path) -> bool:
    return path.suffix == ".py"


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


class Patterns:
    """A gitignore spec anchored at a folder, asked about every path of a walk.

    pathspec tries each pattern in turn, a regular-expression search apiece, for every path:
    most of a walk's time. Most paths match none of them, so one search of all the patterns
    joined (`_any_pattern`) answers those at once; a path it matches is asked of the spec as
    before, which alone knows how the matching patterns rank."""

    def __init__(self, base: Path, spec: pathspec.GitIgnoreSpec) -> None:
        self.base = base
        self.spec = spec
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


@dataclass(frozen=True)
class Excludes:
    """Gitignore-style patterns anchored at a folder: the configuration file's folder for
    patterns from pyproject.toml, the working directory for --exclude."""

    patterns: tuple[Patterns, ...] = ()

    @classmethod
    def of(cls, *groups: tuple[Path, Iterable[str]]) -> Excludes:
        """Raises ValueError for a pattern git cannot read (`gitignore_spec` tells which
        first, for a message that names it)."""
        return cls(tuple(Patterns(base.resolve(), pathspec.GitIgnoreSpec.from_lines(list(lines)))
                         for base, lines in groups if lines))

    def match(self, real: Path, is_dir: bool) -> bool:
        for patterns in self.patterns:
            relative = patterns.relative(real)
            if relative is not None and patterns.check(relative + ("/" if is_dir else "")):
                return True
        return False


def discover(paths: Iterable[Path], excludes: Iterable[str] | Excludes = (),
             accept: Accept = python_files) -> Discovery:
    result = Discovery()
    exclude = excludes if isinstance(excludes, Excludes) else \
        Excludes.of((Path.cwd(), list(excludes)))
    seen: set[Path] = set()
    for given in paths:
        problem = _unreadable(given)
        if problem is not None:
            result.errors.append(f"{given}: {problem}")
            continue
        real = given.resolve()
        if given.is_dir():
            walk = _Walk(real, exclude, accept, result)
            for path, real_path in walk.directory(given, real,
                                                     _parent_ignores(real, result.skipped)):
                _add(path, real_path, seen, result)
        elif exclude.match(real, is_dir=False):
            result.skipped.append(f"{given}: excluded")
        else:
            _add(given, real, seen, result)
    return result


def _unreadable(given: Path) -> str | None:
    """Why a path named on the command line cannot be taken, or None. Only folders and
    regular files are: reading a FIFO or a device would block the run or never end."""
    try:
        mode = given.stat().st_mode
        given.resolve()
    except FileNotFoundError:
        return "no such file or directory"
    except RuntimeError:  # Python before 3.13 raises this for a symlink loop
        return "symlink loop"
    except OSError as error:
        return f"cannot read ({error.strerror or error})"
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
        return None
    return "not a regular file or folder; skipped"


def _add(path: Path, real: Path, seen: set[Path], result: Discovery) -> None:
    if real not in seen:
        seen.add(real)
        result.files.append(path)


@dataclass
class _Walk:
    root_real: Path
    exclude: Excludes
    accept: Accept
    result: Discovery

    def directory(self, path: Path, real: Path,
                  ignores: list[Patterns]) -> Iterator[tuple[Path, Path]]:
        """Files to migrate below `path`, each with its resolved path."""
        local = _load_gitignore(path, real, self.result.skipped)
        if local is not None:
            ignores = [*ignores, local]
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError as error:
            self.result.errors.append(f"{path}: cannot list ({error.strerror})")
            return
        for entry in entries:
            yield from self.entry(entry, path, real, ignores)

    def entry(self, entry: os.DirEntry[str], parent: Path, parent_real: Path,
              ignores: list[Patterns]) -> Iterator[tuple[Path, Path]]:
        path = parent / entry.name
        try:
            is_link = entry.is_symlink()
            is_dir = entry.is_dir(follow_symlinks=False)
            if not (is_link or is_dir or entry.is_file(follow_symlinks=False)):
                return  # a FIFO, socket or device: reading it could block forever
        except OSError:
            return
        if is_link:
            try:
                target = path.resolve()
                if not target.is_file():
                    return  # broken, a folder (never descended into) or not a regular file
            except (OSError, RuntimeError):  # a symlink loop (RuntimeError before 3.13)
                self.result.skipped.append(f"{path}: symlink loop or unreadable link")
                return
            if not target.is_relative_to(self.root_real):
                self.result.skipped.append(f"{path}: symlink to a file outside the tree")
                return
        elif is_dir and _skipped_dir(entry):
            return
        if not is_dir and not self.accept(path):
            return  # before the patterns are asked, which say nothing else about a file
        real = parent_real / entry.name
        resolved = target if is_link else real
        if _ignored(ignores, real, is_dir):
            return
        if self.exclude.match(real, is_dir):
            return
        if is_dir:
            yield from self.directory(path, real, ignores)
        else:
            yield path, resolved


def _skipped_dir(entry: os.DirEntry[str]) -> bool:
    if entry.name in SKIPPED_DIRS or entry.name.endswith(".egg-info"):
        return True
    return os.path.exists(os.path.join(entry.path, "pyvenv.cfg"))  # any virtualenv


def _ignored(ignores: list[Patterns], path: Path, is_dir: bool) -> bool:
    for ignore in reversed(ignores):  # the deepest .gitignore with an opinion decides
        relative = ignore.relative(path)
        if relative is None:
            continue
        verdict = ignore.check(relative + ("/" if is_dir else ""))
        if verdict is not None:
            return verdict
    return False


def gitignore_spec(lines: Iterable[str]) -> tuple[pathspec.GitIgnoreSpec, list[tuple[int, str]]]:
    """The spec of the lines pathspec can read, and the lines (numbered from 1) it cannot,
    such as `!` alone. A file whose lines all read is compiled once."""
    lines = list(lines)
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines), []
    except ValueError:
        pass
    bad, good = [], []
    for number, line in enumerate(lines, start=1):
        try:
            pathspec.GitIgnoreSpec.from_lines([line])
        except ValueError:
            bad.append((number, line))
            continue
        good.append(line)
    return pathspec.GitIgnoreSpec.from_lines(good), bad


def _load_gitignore(directory: Path, real: Path, notes: list[str]) -> Patterns | None:
    """A folder's .gitignore; none when the folder cannot be read (listing it reports that).
    A line git cannot read as a pattern is passed over, as git does, with a note."""
    gitignore = directory / ".gitignore"
    try:
        if not gitignore.is_file():
            return None
        lines = gitignore.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    spec, bad = gitignore_spec(lines)
    notes += [f"{gitignore}:{number}: {line!r} is not a gitignore pattern; passed over, as "
              "git does" for number, line in bad]
    return Patterns(real, spec)


def _parent_ignores(directory: Path, notes: list[str]) -> list[Patterns]:
    """The .gitignore files above `directory`, up to the root of its git work tree."""
    chain: list[Path] = []
    current = directory.parent
    inside_git = (directory / ".git").exists()
    while not inside_git and current != current.parent:
        chain.append(current)
        if (current / ".git").exists():
            inside_git = True
            break
        current = current.parent
    if not inside_git:
        return []
    ignores = [_load_gitignore(d, d, notes) for d in reversed(chain)]
    return [i for i in ignores if i is not None]
