"""What git knows about the files of a run: which have uncommitted changes (apply will not
mix the user's work into the codemod's diff) and which changed since a revision."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path


class GitError(Exception):
    pass


def _git(root: Path, *args: str) -> bytes:
    import subprocess  # here: a run that asks git nothing (a plain check) never loads it

    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                              check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise GitError(f"cannot run git: {error}") from error
    if done.returncode != 0:
        raise GitError(done.stderr.decode(errors="replace").strip() or "git failed")
    return done.stdout


def work_tree(path: Path) -> Path | None:
    """The top of the git work tree `path` is in, or None (not in git, or git missing)."""
    directory = path if path.is_dir() else path.parent
    try:
        top = _name(_git(directory.resolve(), "rev-parse", "--show-toplevel").strip())
    except GitError:
        return None
    return Path(top).resolve() if top else None


def work_trees(paths: Iterable[Path]) -> set[Path]:
    return {root for root in (work_tree(p) for p in paths) if root is not None}


def uncommitted(roots: Iterable[Path]) -> frozenset[Path]:
    """Files with staged, unstaged or untracked changes, inside submodules and nested
    repositories too: git reports such a repository as one entry (its folder), so its own
    status is asked for its files."""
    dirty: set[Path] = set()
    pending = list(roots)
    asked: set[Path] = set()
    while pending:
        root = pending.pop()
        if root in asked:
            continue
        asked.add(root)
        for path in _status_paths(root):
            if path.is_dir() and (path / ".git").exists():
                pending.append(path)
            dirty.add(path)
    return frozenset(dirty)


def _status_paths(root: Path) -> Iterator[Path]:
    entries = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all",
                   "--ignore-submodules=none")
    fields = entries.split(b"\0")
    index = 0
    while index < len(fields):
        entry = fields[index]
        index += 1
        if len(entry) < 4:
            continue
        yield (root / _name(entry[3:])).resolve()
        if entry[:1] in (b"R", b"C"):  # a rename's source follows
            index += 1


def _name(raw: bytes) -> str:
    """A path as git printed it (bytes, whatever their encoding), as the OS names it."""
    return os.fsdecode(raw.rstrip(b"/"))


def changed_since(roots: Iterable[Path], revision: str) -> frozenset[Path]:
    """Files that differ from `revision` in the work tree, and new untracked files."""
    changed: set[Path] = set()
    for root in roots:
        try:
            # resolved first, so a revision that looks like an option is never read as one
            commit = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options",
                          f"{revision}^{{commit}}").decode().strip()
            names = _git(root, "diff", "--name-only", "-z", commit, "--")
        except GitError as error:
            raise GitError(f"--changed-since {revision}: "
                           f"{error if str(error) != 'git failed' else 'not a commit'}") from error
        untracked = _git(root, "ls-files", "--others", "--exclude-standard", "-z")
        for name in (names + b"\0" + untracked).split(b"\0"):
            if name:
                changed.add((root / _name(name)).resolve())
    return frozenset(changed)
