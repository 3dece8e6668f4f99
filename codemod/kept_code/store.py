"""One file of compiled things, kept from one run to the next as Python keeps module bytecode.

A file starts with a header naming the interpreter that wrote it (bytecode version and the
full `sys.version`, so a patch release that compiles differently never reads an older file,
plus what the user adds: the regular expression engine's version); a file with any other
header, or one that does not load, counts as empty. It is read when first asked, and what
the process compiled that the file lacked is added when the process ends, through a
temporary file and a rename: a concurrent run reads the old file or the new one, never half
of one. Nothing is written when Python is told not to write bytecode, or where the folder
cannot be written (the next run compiles again, as it would without the file).
"""

from __future__ import annotations

import marshal
import os
import sys
from collections.abc import Hashable
from pathlib import Path
from typing import Any

LIMIT = 5000
"""Entries kept at most per file; past it, a file keeps only those the last run used."""
FOLDER = Path(__file__).parent.parent / "__pycache__"
"""The package's own bytecode folder: a user's tree never holds the files."""


def header(salt: str = "") -> bytes:
    from importlib.util import MAGIC_NUMBER

    return MAGIC_NUMBER + f"{sys.version}\0{salt}\0".encode()


class KeptFile:
    """Compiled values by key (marshal-able both), in one file."""

    def __init__(self, path: Path, salt: str = "") -> None:
        self.path = path
        self.header = header(salt)
        self._kept: dict[Hashable, Any] | None = None
        self.new: dict[Hashable, Any] = {}
        self.used: set[Hashable] = set()

    @property
    def kept(self) -> dict[Hashable, Any]:
        """What the file held when first asked."""
        if self._kept is None:
            self._kept = self._read()
        return self._kept

    def get(self, key: Hashable) -> Any:
        """The value kept for `key` (in the file, or compiled earlier in this process), or
        None."""
        self.used.add(key)
        found = self.kept.get(key)
        return self.new.get(key) if found is None else found

    def add(self, key: Hashable, value: Any) -> None:
        self.new[key] = value

    def save(self) -> None:
        """Add what this process compiled to the file (at the end of the process)."""
        if not self.new or sys.dont_write_bytecode:
            return
        kept = {**self.kept, **self.new}
        if len(kept) > LIMIT:
            kept = {key: value for key, value in kept.items() if key in self.used}
        self._kept, self.new = kept, {}
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(exist_ok=True)
            temporary.write_bytes(self.header + marshal.dumps(kept))
            os.replace(temporary, self.path)
        except (OSError, ValueError):  # ValueError: a value marshal cannot write
            try:
                temporary.unlink()
            except OSError:
                pass

    def _read(self) -> dict[Hashable, Any]:
        try:
            data = self.path.read_bytes()
        except OSError:
            return {}
        if not data.startswith(self.header):
            return {}
        try:
            kept = marshal.loads(data[len(self.header):])
        except (EOFError, ValueError, TypeError):
            return {}
        return kept if isinstance(kept, dict) else {}
