"""Reading and writing user files without ever leaving one half-written."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from neuron_migrate.files import temporary as temporary_files
from neuron_migrate.files.attributes import keep_attributes


class WriteError(Exception):
    pass


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise WriteError(cannot_read(path, error)) from error


def cannot_read(path: Path, error: OSError) -> str:
    """What a file that cannot be read reports."""
    if isinstance(error, PermissionError):
        return f"{path}: cannot read (permission denied)"
    return f"{path}: cannot read ({error.strerror or error})"


def write_atomic(path: Path, data: bytes, original: bytes) -> str | None:
    """Replace the file's content with `data` through a temporary file and a rename, so that
    whatever stops the write (a full disk, a kill) the file holds either its old text or the
    new one, never part of each. A note for the user, or None.

    The file is re-read first: if it no longer holds `original` (an editor saved it while we
    worked), nothing is written; its size, inode and modification time are compared again
    just before the rename, so an edit can only be lost in the microseconds between that
    check and the rename. Owner and group (where the process may), every mode bit (setuid,
    setgid and sticky too) and extended attributes are kept; a symlink is written through.

    A file with several hard links is replaced like any other, which splits it from its
    other names: they keep the old text, and the note says so. Writing such a file in place
    is the only way to keep the link, and it leaves the file part new, part old when the
    write stops half-way; its other names are also more often a backup (`cp -al`, rsync
    snapshots) or a package cache shared by several environments than a second copy the user
    wants migrated."""
    target = path.resolve()
    before = _unchanged_status(path, target, original)
    if not before.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or \
            not os.access(target, os.W_OK):
        # a rename would replace a file its owner made read-only (even as root)
        raise WriteError(f"{path}: read-only; not written")
    _replace(path, target, data, before)
    if before.st_nlink > 1:
        others = before.st_nlink - 1
        return (f"{path}: had {others} other hard link{'s' if others > 1 else ''}; written as a "
                "file of its own, so a name this run does not migrate keeps the old text")
    return None


def _unchanged_status(path: Path, target: Path, original: bytes) -> os.stat_result:
    """The file's status, once its content is checked to be what was migrated."""
    try:
        if target.read_bytes() != original:
            raise _changed(path)
        return target.stat()
    except OSError as error:
        raise WriteError(f"{path}: cannot re-read before writing ({error.strerror})") from error


def _replace(path: Path, target: Path, data: bytes, before: os.stat_result) -> None:
    """Write a temporary file beside the target and rename it over the target. The
    temporary file stays open (and locked) until the rename, so that a later run knows a
    leftover of a killed run from a file being written."""
    try:
        fd, temporary = temporary_files.create(target.parent)
    except OSError as error:
        raise WriteError(f"{path}: cannot write ({error.strerror})") from error
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
            keep_attributes(fd, str(target), before)
            if _signature(target.stat()) != _signature(before):
                raise _changed(path)
            os.replace(temporary, target)
        finally:
            os.close(fd)
    except (OSError, WriteError) as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(error, WriteError):
            raise
        raise WriteError(f"{path}: cannot write ({error.strerror})") from error


def write_all(fd: int, data: bytes) -> None:
    """`os.write` may write less than asked (a signal, a nearly full disk): go on until all
    is written or it raises."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _signature(status: os.stat_result) -> tuple[int, int, int, int]:
    return status.st_ino, status.st_dev, status.st_size, status.st_mtime_ns


def _changed(path: Path) -> WriteError:
    return WriteError(f"{path}: changed on disk while neuron-migrate was working; "
                      "not written, run again")
