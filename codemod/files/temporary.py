"""The temporary files an atomic write goes through, and the ones a killed run left behind.

A temporary file's name is short and the same shape whatever file it stands in for: a name
built from the file's own (`.<name>.XXXXXXXX...`) passes the 255-byte limit for a long but
valid file name, which could then never be written. While a run uses a temporary file it
holds an exclusive `flock` on it; the kernel drops the lock when the process dies, even by
`kill -9`, so a later run that writes can tell a dead run's leftover (no lock) from a file
another run is writing at this moment (locked), and removes only the former. Runs that only
read (`check`) do not look: listing every folder again would cost them a few percent.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

try:
    import fcntl
except ImportError:  # not a POSIX system: no locks, so no file can be known to be a leftover
    fcntl = None  # type: ignore[assignment]

PREFIX = ".nm-"
SUFFIX = ".neuron-migrate"

_OURS = (
    re.compile(r"\.nm-[a-z0-9_]{8}\.neuron-migrate"),
    # the names earlier releases gave them: the file's own name inside
    re.compile(r"\..+\.[a-z0-9_]{8}\.neuron-migrate", re.DOTALL),
)


def create(folder: Path) -> tuple[int, str]:
    """A new temporary file in `folder` (so the rename stays on one file system), locked
    for as long as the returned descriptor is open."""
    import tempfile  # here: a run that writes nothing never loads it (nor shutil, random)

    fd, name = tempfile.mkstemp(dir=folder, prefix=PREFIX, suffix=SUFFIX)
    if fcntl is None:
        return fd, name
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
    return fd, name


def is_ours(name: str) -> bool:
    """Whether a file name is one neuron-migrate gives its temporary files (no other tool
    names files `.nm-XXXXXXXX.neuron-migrate`)."""
    return any(pattern.fullmatch(name) for pattern in _OURS)


def remove_leftovers(folders: Iterable[Path]) -> list[str]:
    """Remove the temporary files killed runs left in `folders`, one line for each. The file
    each stood in for was never replaced, so nothing of the user's is in it that is not in
    the file itself. A file another run holds is left alone."""
    if fcntl is None:
        return []
    lines = []
    for folder in sorted(set(folders)):
        for name in _candidates(folder):
            line = _leftover(folder / name)
            if line is not None:
                lines.append(line)
    return lines


def _candidates(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return sorted(e.name for e in entries if e.name.endswith(SUFFIX) and is_ours(e.name))
    except OSError:
        return []  # an unreadable folder is reported by discovery, not here


def _leftover(path: Path) -> str | None:
    """The line for a candidate removed, or None when it is in use or not a plain file of ours.
    Opened without following a symlink and without blocking, locked, then checked to be
    still the file of that name before it is removed. (Another run's file in the instant
    between its creation and its lock could be taken for a leftover: that run's write then
    fails with a message, and its file keeps the old text.)"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None  # a symlink, gone already, or not ours to open
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or not _unlocked(fd):
            return None
        if not _same_file(path, status):
            return None
        os.unlink(path)
        return f"{path}: removed a temporary file left by an interrupted neuron-migrate run"
    except OSError:
        return None
    finally:
        os.close(fd)


def _unlocked(fd: int) -> bool:
    """Whether no live process holds the file's lock (our lock is released by closing)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    return True


def _same_file(path: Path, status: os.stat_result) -> bool:
    """The name still points at the file we opened and locked (not one created since)."""
    now = os.lstat(path)
    return (now.st_dev, now.st_ino) == (status.st_dev, status.st_ino)
