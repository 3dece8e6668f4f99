"""Reading and writing user files without ever leaving one half-written."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


class WriteError(Exception):
    pass


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except PermissionError as error:
        raise WriteError(f"{path}: cannot read (permission denied)") from error
    except OSError as error:
        raise WriteError(f"{path}: cannot read ({error.strerror or error})") from error


def write_atomic(path: Path, data: bytes, original: bytes) -> None:
    """Replace the file's content with `data` through a temporary file and a rename.

    The file is re-read first: if it no longer holds `original` (an editor saved it while we
    worked), nothing is written; its size, inode and modification time are compared again
    just before the rename, so an edit can only be lost in the microseconds between that
    check and the rename. Permission bits and, where the process may, owner and group are
    kept; a symlink is written through. A file with several hard links is written in place,
    since a rename would split it from its other names."""
    target = path.resolve()
    try:
        if target.read_bytes() != original:
            raise _changed(path)
        before = target.stat()
    except OSError as error:
        raise WriteError(f"{path}: cannot re-read before writing ({error.strerror})") from error
    if not before.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or \
            not os.access(target, os.W_OK):
        # a rename would replace a file its owner made read-only (even as root)
        raise WriteError(f"{path}: read-only; not written")
    if before.st_nlink > 1:
        _write_in_place(path, target, data, before)
        return
    try:
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                         suffix=".neuron-migrate")
    except OSError as error:
        raise WriteError(f"{path}: cannot write ({error.strerror})") from error
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, stat.S_IMODE(before.st_mode))
        _keep_owner(temporary, before)
        if _signature(target.stat()) != _signature(before):
            raise _changed(path)
        os.replace(temporary, target)
    except (OSError, WriteError) as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(error, WriteError):
            raise
        raise WriteError(f"{path}: cannot write ({error.strerror})") from error


def _write_in_place(path: Path, target: Path, data: bytes, before: os.stat_result) -> None:
    """Overwrite a hard-linked file through its own inode, so every name keeps the change."""
    try:
        with open(target, "r+b") as handle:
            if _signature(os.fstat(handle.fileno())) != _signature(before):
                raise _changed(path)
            handle.write(data)
            handle.truncate()
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as error:
        raise WriteError(f"{path}: cannot write ({error.strerror})") from error


def _keep_owner(temporary: str, before: os.stat_result) -> None:
    """Give the new file the old one's owner and group; a process that may not (not root,
    not the owner) leaves them as they are, as editors do."""
    if hasattr(os, "chown"):
        with contextlib.suppress(PermissionError):
            os.chown(temporary, before.st_uid, before.st_gid)


def _signature(status: os.stat_result) -> tuple[int, int, int, int]:
    return status.st_ino, status.st_dev, status.st_size, status.st_mtime_ns


def _changed(path: Path) -> WriteError:
    return WriteError(f"{path}: changed on disk while neuron-migrate was working; "
                      "not written, run again")
