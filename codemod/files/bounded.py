"""Reading a file the tree supplies, but only a regular file and only up to a size.

Any name in a repository may be a symlink to `/dev/zero` or `/dev/urandom` (endless), a FIFO
(a read blocks until some other process writes) or a socket; and a file may be far larger
than anything a person wrote. Every file neuron-migrate reads because of where it sits in the
tree (configurations, .gitignore files, requirements a Dockerfile names, scripts a launch line
runs) is read through here, so that none of those can hang a run or exhaust its memory.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MiB = 1024 * 1024
CONFIG_LIMIT = 1 * MiB
"""Configuration files (pyproject.toml, .neuron-migrate.toml, --config), .gitignore files and
git's own small files: far larger than any a person writes."""
SOURCE_LIMIT = 5 * MiB
"""Code and dependency files: larger ones are generated or data, not code a person wrote."""


class Refused(OSError):
    """A file that is there but is not read: not a regular file, or too large. Its text
    names the file and says why; the caller says what is then not done."""

    def __init__(self, path: Path | str, reason: str, folder: bool = False,
                 too_large: bool = False) -> None:
        super().__init__(f"{path}: {reason}")
        self.folder = folder
        """A folder: for most callers, simply not the file they look for."""
        self.too_large = too_large
        """A regular file over the limit: for code, skipped rather than an error."""


def read_bounded(path: Path | str, limit: int) -> bytes:
    """The bytes of `path` (a symlink followed), which must be a regular file of at most
    `limit` bytes: `Refused` otherwise, `OSError` when it cannot be read at all.

    The file is opened without blocking (a FIFO put in its place after the check does not
    hang the open) and checked again through the open descriptor; at most `limit` + 1 bytes
    are read, so a file that grows while it is read is refused too."""
    status = os.stat(path)
    _check(path, status, limit)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    descriptor = os.open(path, flags)
    try:
        _check(path, os.fstat(descriptor), limit)
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(descriptor, min(left, MiB))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(descriptor)
    data = b"".join(chunks)
    if len(data) > limit:
        raise Refused(path, f"larger than {_size(limit)}", too_large=True)
    return data


def _check(path: Path | str, status: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(status.st_mode):
        raise Refused(path, f"not a regular file ({_kind(status.st_mode)})",
                      folder=stat.S_ISDIR(status.st_mode))
    if status.st_size > limit:
        raise Refused(path, f"larger than {_size(limit)}", too_large=True)


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a file")


def _size(limit: int) -> str:
    return f"{limit // MiB} MiB" if limit % MiB == 0 else f"{limit} bytes"
