"""The file a report goes to (`--output`), checked and opened before any file is migrated.

`apply` writes the user's files first and its report last. A destination that fails only
then (a symlink into a missing folder, `/dev/full`) leaves files migrated and no report of
what changed; a pipe nobody reads would hang the run after the work was done; and a
destination that is one of the inputs would be overwritten by the report. So the
destination is refused or opened up front, and the report is written through that open file.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from neuron_migrate.files.fileio import write_all


class DestinationError(Exception):
    """Why the report cannot go there; the run stops before anything is written."""


@dataclass
class Destination:
    """An open report file. A regular file is emptied only when the report is written (an
    interrupted run leaves the previous report as it was); a file that is also this
    process's standard output or error (`-o /dev/stdout > log`) is appended to, not
    emptied."""

    path: Path
    fd: int
    empty_first: bool

    def write(self, text: str) -> None:
        if self.empty_first:
            os.ftruncate(self.fd, 0)
            os.lseek(self.fd, 0, os.SEEK_SET)
        write_all(self.fd, text.encode("utf-8"))

    def close(self) -> None:
        os.close(self.fd)


def refuse_inputs(output: Path, inputs: Iterable[Path], what: str = "the report") -> None:
    """Raise when `what` (the report, the baseline) would overwrite a file of the run.
    Compared by identity (device and inode), so a hard link or symlink to an input, or an
    input found in a folder being walked, is caught whatever name it is given by."""
    try:
        wanted = _identity(os.stat(output))
    except OSError:
        return  # nothing there yet (or unreachable): not a file being read
    for path in inputs:
        try:
            if _identity(os.stat(path)) == wanted:
                raise DestinationError(f"is {path}, a file this run reads; {what} would "
                                       "replace it (choose another file)")
        except OSError:
            continue


def open_destination(output: Path) -> Destination:
    """Open (creating it if need be) the report file, without waiting: a pipe with no
    reader, a socket, a block device or a device other than a terminal or /dev/null is
    refused, since a report could not be written there (or only after the run hung)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(output, flags, 0o666)
    except OSError as error:
        if error.errno == errno.ENXIO:  # a FIFO nobody has open for reading, or a socket
            raise DestinationError("a pipe or socket with no reader; the report would wait "
                                   "for one forever") from error
        raise DestinationError(f"cannot open ({error.strerror or error})") from error
    try:
        return _accepted(output, fd)
    except BaseException:
        os.close(fd)
        raise


def _accepted(output: Path, fd: int) -> Destination:
    """The open file as a destination, once its kind is one a report can go to; writes to
    it block again as ordinary writes do (a slow reader of a pipe is waited for)."""
    status = os.fstat(fd)
    mode = status.st_mode
    shared = _is_standard_stream(status)
    if stat.S_ISCHR(mode) and not (shared or os.isatty(fd) or _is_dev_null(status)):
        raise DestinationError("a device other than a terminal or /dev/null; write the report "
                               "to a file")
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
        raise DestinationError("not a regular file")
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    if shared and stat.S_ISREG(mode):
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
    return Destination(output, fd, empty_first=stat.S_ISREG(mode) and not shared)


def _identity(status: os.stat_result) -> tuple[int, int]:
    return status.st_dev, status.st_ino


def _is_standard_stream(status: os.stat_result) -> bool:
    """Whether the destination is where this process's standard output or error already go
    (`-o /dev/stdout`, `-o /dev/fd/2`)."""
    for stream in (sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None and _identity(os.fstat(stream.fileno())) == _identity(status):
                return True
        except (OSError, ValueError):
            continue
    return False


def _is_dev_null(status: os.stat_result) -> bool:
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(null.st_mode) and null.st_rdev == status.st_rdev
