"""What git knows about the files of a run: which have uncommitted changes (apply will not
mix the user's work into the codemod's diff) and which changed since a revision."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path


class GitError(Exception):
    pass


def _git(root: Path, *args: str) -> bytes:
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
        top = _git(directory.resolve(), "rev-parse", "--show-toplevel").decode().strip()
    except GitError:
        return None
    return Path(top).resolve() if top else None


def work_trees(paths: Iterable[Path]) -> set[Path]:
    return {root for root in (work_tree(p) for p in paths) if root is not None}


def uncommitted(roots: Iterable[Path]) -> frozenset[Path]:
    """Files with staged, unstaged or untracked changes."""
    dirty: set[Path] = set()
    for root in roots:
        entries = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all")
        fields = entries.split(b"\0")
        index = 0
        while index < len(fields):
            entry = fields[index]
            index += 1
            if len(entry) < 4:
                continue
            dirty.add((root / entry[3:].decode()).resolve())
            if entry[:1] in (b"R", b"C"):  # a rename's source follows
                index += 1
    return frozenset(dirty)


def changed_since(roots: Iterable[Path], revision: str) -> frozenset[Path]:
    """Files that differ from `revision` in the work tree, and new untracked files."""
    changed: set[Path] = set()
    for root in roots:
        try:
            names = _git(root, "diff", "--name-only", "-z", revision, "--")
        except GitError as error:
            raise GitError(f"--changed-since {revision}: {error}") from error
        untracked = _git(root, "ls-files", "--others", "--exclude-standard", "-z")
        for name in (names + b"\0" + untracked).split(b"\0"):
            if name:
                changed.add((root / name.decode()).resolve())
    return frozenset(changed)
