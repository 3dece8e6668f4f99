"""The cache directory and its entries: one small JSON file per file result.

Every way a run can fail leaves the directory usable. An entry is written to a temporary
file beside it and renamed into place, so a reader sees the old entry, the new one or none,
never part of one, whatever kills the writer; two runs writing the same entry write the same
bytes. An entry that cannot be read or decoded (truncated by a full disk, edited by hand,
removed by another run's trim) is a miss. A directory that cannot be created or written
(a read-only checkout) makes every write a silent no-op.

The directory holds a `.gitignore` of `*` (so git, and discovery through it, never sees the
cache) and a `CACHEDIR.TAG` (so backup tools and the launch search skip it). Its size is
bounded: once a run has added entries and the total is over the limit, the entries least
recently used (their modification time, renewed on use) go first.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

DEFAULT_LIMIT = 256 * 2**20
"""Bytes of entries kept; about a hundred thousand typical entries."""
GITIGNORE = "# Automatically created by neuron-migrate.\n*\n"
CACHE_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
             "# This file is a cache directory tag created by neuron-migrate.\n"
             "# For information about cache directory tags see https://bford.info/cachedir/\n")
TEMPORARY = ".tmp"
STALE_TEMPORARY = 3600.0
"""Seconds after which a temporary file is taken to be left by a killed run."""
RENEW_AFTER = 3600.0
"""An entry used is marked as recently used at most this often (one write per hour, not one
per hit)."""
KEEP_AFTER_TRIM = 0.8
"""A trim goes below the limit by this much, so that the next runs do not trim again."""


KEPT = frozenset({"CACHEDIR.TAG", "stamps.json"})
"""Files of the folder that are no entry, never trimmed."""


class Store:
    """Entries by name (hexadecimal digits) in one directory."""

    def __init__(self, root: Path, limit: int = DEFAULT_LIMIT) -> None:
        self.root = root
        self.limit = limit
        self.writable = True
        self.added = 0

    @classmethod
    def opened(cls, root: Path, limit: int = DEFAULT_LIMIT) -> Store | None:
        """The store at `root`, created if needed; None when there is no directory there and
        none can be made. An existing directory that cannot be written is still read."""
        store = cls(root, limit)
        try:
            root.mkdir(parents=True, exist_ok=True)
            for name, text in ((".gitignore", GITIGNORE), ("CACHEDIR.TAG", CACHE_TAG)):
                if not (root / name).exists():
                    write_whole(root / name, text.encode())
        except OSError:
            if not root.is_dir():
                return None
            store.writable = False
        if store.writable and not os.access(root, os.W_OK):
            store.writable = False
        return store

    def get(self, name: str) -> dict[str, Any] | None:
        """The entry's document, or None (absent, unreadable, not an entry)."""
        path = self.root / name
        try:
            with open(path, "rb") as handle:
                data = handle.read()
                used = os.fstat(handle.fileno()).st_mtime
        except OSError:
            return None
        try:
            document = json.loads(data)
        except (ValueError, RecursionError):
            return None
        if not isinstance(document, dict):
            return None
        if self.writable and time.time() - used > RENEW_AFTER:
            with contextlib.suppress(OSError):
                os.utime(path)
        return document

    def put(self, name: str, document: dict[str, Any]) -> None:
        """Write the entry, or nothing at all: a cache that cannot be written is no error."""
        if not self.writable:
            return
        data = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
        try:
            write_whole(self.root / name, data)
        except OSError:
            return
        self.added += 1

    def trim(self) -> None:
        """Past the limit, remove the least recently used entries; remove the temporary files
        of killed runs. Only after a run added entries: a run that only read adds nothing."""
        if not self.writable or not self.added:
            return
        entries: list[tuple[float, int, str]] = []
        now = time.time()
        try:
            with os.scandir(self.root) as listing:
                for entry in listing:
                    if entry.name.startswith("."):
                        continue
                    try:
                        status = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if entry.name.endswith(TEMPORARY):
                        if now - status.st_mtime > STALE_TEMPORARY:
                            _remove(entry.path)
                    elif entry.name not in KEPT:
                        entries.append((status.st_mtime, status.st_size, entry.path))
        except OSError:
            return
        total = sum(size for _, size, _ in entries)
        if total <= self.limit:
            return
        for _, size, path in sorted(entries):
            _remove(path)
            total -= size
            if total <= self.limit * KEEP_AFTER_TRIM:
                break


def write_whole(path: Path, data: bytes) -> None:
    """Through a temporary file of this process and a rename: atomic, and never a file another
    run is writing at the same time."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{os.urandom(4).hex()}{TEMPORARY}")
    try:
        with open(temporary, "xb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        _remove(str(temporary))
        raise


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
