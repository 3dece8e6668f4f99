"""Which files a run looks at, and why each other path was skipped.

Walks directories in a stable order. Each folder is judged by its scope
(`neuron_migrate.files.scope`): the nearest configuration's `exclude` (or the default
excludes, at the project root only) and `extend-exclude`, the command line's patterns, and,
with `respect-gitignore` (the default), the .gitignore files from the enclosing git work tree
down and the work tree's `.git/info/exclude`. Version-control, virtualenv, installed-package
and cache folders are never entered. A symlinked folder is never descended into and a
symlinked file is never followed out of the tree it was found in.

A path named on the command line is taken even when excluded, as ruff takes it, unless
`force-exclude` applies to it.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from neuron_migrate.config import Config, ConfigFinder
from neuron_migrate.files.bounded import CONFIG_LIMIT, SOURCE_LIMIT, Refused, read_bounded
from neuron_migrate.files.patterns import Patterns, anchored, matching_nothing
from neuron_migrate.files.scope import Overrides, Scope, Scopes, always_skipped

Accept = Callable[[Path], bool]
"""Which files a run takes, by name (discovery never reads a file)."""
NOT_READ = "not a file type neuron-migrate reads"
"""Why a file found in a walk is passed over when `Accept` refuses it."""


def python_files(path: Path) -> bool:
    return path.suffix == ".py"


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Notes (a link that leads out of the tree...) and, when verbose, every path skipped
    with the reason."""
    warnings: list[str] = field(default_factory=list)
    """What the user should hear of without -v: an ignore pattern that can match nothing."""
    excluded: Counter[str] = field(default_factory=Counter)
    """How many paths each reason skipped: what a run that found nothing says."""
    scopes: dict[Path, Scope] = field(default_factory=dict)
    """The scope of each file found: its configuration."""


def discover(paths: Iterable[Path], excludes: Iterable[str] = (),
             accept: Accept = python_files, scopes: Scopes | None = None,
             verbose: bool = False, not_read: str = NOT_READ) -> Discovery:
    """The files under `paths`. Without `scopes`, no configuration is read and `excludes`
    (gitignore-style, from the working directory) add to the defaults. `verbose` lists
    every path skipped in `skipped`; `not_read` is the reason given for a file `accept`
    refuses."""
    if scopes is None:
        scopes = Scopes(ConfigFinder(frozenset(), fixed=Config()),
                        Overrides(extend_exclude=tuple(excludes)))
    result = Discovery()
    seen: set[Path] = set()
    for given in paths:
        problem = _unreadable(given)
        if problem is not None:
            result.errors.append(f"{given}: {problem}")
            continue
        real = given.resolve()
        is_dir = given.is_dir()
        root = _project_root(real, is_dir, scopes.overrides.cwd)
        scope = scopes.nearest(real if is_dir else real.parent, root=root)
        why = scope.named_excluded(real, is_dir) if scope.force_exclude else None
        if why is not None:
            _skip(result, f"{given}{'/' if is_dir else ''}", why, verbose=True)
        elif is_dir:
            walk = _Walk(real, accept, result, scopes, verbose, not_read)
            for path, real_path, found in walk.directory(
                    given, real, scope, _parent_ignores(real, result)):
                _add(path, real_path, found, seen, result)
        else:
            _add(given, real, scope, seen, result)
    return result


def _project_root(real: Path, is_dir: bool, cwd: Path) -> Path:
    """The project root of a path named without a configuration (the default excludes are
    anchored there): the working directory, as ruff's, when the path is in it; else the
    folder named, or the named file's folder."""
    if real.is_relative_to(cwd):
        return cwd
    return real if is_dir else real.parent


def _skip(result: Discovery, shown: str, why: str, verbose: bool) -> None:
    result.excluded[why] += 1
    if verbose:
        result.skipped.append(f"{shown}: {why}")


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


def _add(path: Path, real: Path, scope: Scope, seen: set[Path], result: Discovery) -> None:
    if real not in seen:
        seen.add(real)
        result.files.append(path)
        result.scopes[path] = scope


@dataclass
class _Walk:
    root_real: Path
    accept: Accept
    result: Discovery
    scopes: Scopes
    verbose: bool
    not_read: str

    def directory(self, path: Path, real: Path, scope: Scope,
                  ignores: list[Patterns]) -> Iterator[tuple[Path, Path, Scope]]:
        """Files to migrate below `path`, each with its resolved path and its scope. A
        folder that holds a configuration starts a scope of its own."""
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError as error:
            self.result.errors.append(f"{path}: cannot list ({error.strerror})")
            return
        names = {entry.name for entry in entries}
        scope = self.scopes.own(real, names) or scope
        if ".gitignore" in names:
            local = _load_gitignore(path, real, self.result)
            if local is not None:
                ignores = [*ignores, local]
        for entry in entries:
            yield from self.entry(entry, path, real, scope, ignores)

    def entry(self, entry: os.DirEntry[str], parent: Path, parent_real: Path, scope: Scope,
              ignores: list[Patterns]) -> Iterator[tuple[Path, Path, Scope]]:
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
        elif is_dir and (why := always_skipped(entry.name, entry.path)) is not None:
            _skip(self.result, f"{path}/", why, self.verbose)
            return
        if not is_dir and not self.accept(path):
            # before the patterns are asked, which say nothing else about a file
            _skip(self.result, str(path), self.not_read, self.verbose)
            return
        real = parent_real / entry.name
        why = scope.excluded(real, is_dir, parent_real)
        if why is None and scope.gitignore:
            why = _ignored(ignores, real, is_dir)
        if why is not None:
            _skip(self.result, f"{path}/" if is_dir else str(path), why, self.verbose)
        elif is_dir:
            yield from self.directory(path, real, scope, ignores)
        else:
            yield path, target if is_link else real, scope


def _ignored(ignores: list[Patterns], path: Path, is_dir: bool) -> str | None:
    """Why git ignores the path (the file and the pattern), or None."""
    for ignore in reversed(ignores):  # the deepest file with an opinion decides
        relative = ignore.relative(path)
        if relative is None:
            continue
        verdict = ignore.deciding(relative + ("/" if is_dir else ""))
        if verdict is not None:
            return f"{ignore.label} {verdict[1]!r}" if verdict[0] else None
    return None


def _load_gitignore(directory: Path, real: Path, found: Discovery,
                    name: str = ".gitignore") -> Patterns | None:
    """A folder's .gitignore (or another file of gitignore patterns at `name` below it);
    none when it cannot be read (listing the folder reports that). A line git cannot read
    as a pattern is passed over, as git does, with a note. One that is not a regular file
    (a FIFO, a link to /dev/zero) or is over 5 MiB is not read, with a warning."""
    gitignore = directory / name
    try:
        lines = read_bounded(gitignore, SOURCE_LIMIT).decode("utf-8", "replace").splitlines()
    except Refused as refused:
        if not refused.folder:
            found.warnings.append(f"{refused}; its patterns are not applied")
        return None
    except OSError:
        return None
    read = anchored(real, lines, label=f"ignored by {gitignore}")
    found.skipped += [f"{gitignore}:{number}: {line!r} is not a gitignore pattern; passed "
                      "over, as git does" for number, line in read.bad]
    found.warnings += matching_nothing(str(gitignore), read)
    return read.patterns


def _parent_ignores(directory: Path, found: Discovery) -> list[Patterns]:
    """What git ignores that is not in `directory`'s own .gitignore, lowest priority first:
    the work tree's `.git/info/exclude`, then the .gitignore files above `directory` up to
    the root of its git work tree. Nothing outside a work tree."""
    chain = [directory, *directory.parents]
    root = next((folder for folder in chain if os.path.lexists(folder / ".git")), None)
    if root is None:
        return []
    above = chain[1:chain.index(root) + 1]
    ignores = [_info_exclude(root, found),
               *(_load_gitignore(d, d, found) for d in reversed(above))]
    return [i for i in ignores if i is not None]


def _info_exclude(root: Path, found: Discovery) -> Patterns | None:
    """The work tree's `.git/info/exclude`. In a linked work tree or a submodule `.git` is a
    file naming the git folder (`gitdir: ...`), and a linked work tree shares the main
    one's info folder (named by `commondir`)."""
    dot_git = root / ".git"
    git_dir = dot_git
    try:
        if dot_git.is_file():
            line = read_bounded(dot_git, CONFIG_LIMIT).decode("utf-8").strip()
            if not line.startswith("gitdir:"):
                return None
            git_dir = root / line.removeprefix("gitdir:").strip()
            common = git_dir / "commondir"
            if common.is_file():
                git_dir = git_dir / read_bounded(common, CONFIG_LIMIT).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return _load_gitignore(git_dir, root, found, name="info/exclude")


def nothing_found(found: Discovery) -> str:
    """Why a walk found no file: each reason with the number of paths it skipped, most
    first, rather than a bare "0 files scanned"."""
    if not found.excluded:
        return "no file found under the paths given (nothing but empty folders)"
    reasons = found.excluded.most_common()
    shown = [f"{count} {'path' if count == 1 else 'paths'} {_as_clause(why)}"
             for why, count in reasons[:4]]
    if len(reasons) > 4:
        shown.append(f"{sum(count for _, count in reasons[4:])} more for other reasons")
    return f"no file to check: {'; '.join(shown)} (-v lists every path and why)"


def _as_clause(why: str) -> str:
    """"--exclude 'x'" as "excluded by --exclude 'x'"; reasons that are sentences stay."""
    return why if why.startswith(("not ", "always ", "ignored ")) else f"excluded by {why}"
