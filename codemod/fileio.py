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
    worked), nothing is written. Permission bits are kept; a symlink is written through.
    """
    target = path.resolve()
    try:
        if target.read_bytes() != original:
            raise WriteError(f"{path}: changed on disk while neuron-migrate was working; "
                             "not written, run again")
        mode = stat.S_IMODE(target.stat().st_mode)
    except OSError as error:
        raise WriteError(f"{path}: cannot re-read before writing ({error.strerror})") from error
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
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise WriteError(f"{path}: cannot write ({error.strerror})") from error
