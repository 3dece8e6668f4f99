"""Each file's content digest, remembered by its stamp, so that a warm run need not read
every file again to know it is unchanged (reading a large tree costs more than the rest of a
warm run's look-ups).

The stamp is what the file system changes on every write: size, inode, modification time
and status-change time, in nanoseconds. The status-change time cannot be set back by any
tool (`touch -d`, `cp -p` and `rsync -t` set the modification time only), so a file whose
stamp is the same has not been written since. A stamp is only remembered once it is a few
seconds old: on a file system whose clock ticks coarsely, a write in the same tick as the
read would keep it, as git's "racily clean" index entries show. A missing, damaged or
outdated memo costs reads, never a wrong digest.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from pathlib import Path

from neuron_migrate.files.digests import blake2b
from neuron_migrate.cache.store import write_whole
from neuron_migrate.files.bounded import SOURCE_LIMIT, read_bounded

FILE = "stamps.json"
SETTLED = 3.0
"""Seconds after its last change from which a file's stamp is remembered."""
MAX_FILES = 200_000
"""Paths remembered; past it, only the files of the last run are."""


def digest(data: bytes) -> str:
    return blake2b(data, digest_size=20).hexdigest()


class Stamps:
    """The memo of one run: the stamps its pack holds (`neuron_migrate.cache.pack`), then the
    folder's memo of every file (read only when the pack lacks a file), written at the end
    of the run if it learnt anything."""

    def __init__(self, folder: Path, packed: dict[str, list] | None = None) -> None:
        self.path = folder / FILE
        self.packed = packed or {}
        self._known: dict[str, list] | None = None
        self.seen: dict[str, list] = {}
        """The settled stamps of the files this run asked about (the next pack's)."""
        self.learnt = False

    @property
    def known(self) -> dict[str, list]:
        """The folder's memo, read when first needed."""
        if self._known is None:
            self._known = {}
            with contextlib.suppress(OSError, ValueError, RecursionError):
                loaded = json.loads(self.path.read_bytes())
                if isinstance(loaded, dict):
                    self._known = loaded
        return self._known

    def digest_of(self, path: Path) -> str | None:
        """The digest of the file's bytes, or None when the runner would not read it (not
        a regular file, too large, unreadable)."""
        try:
            status = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(status.st_mode) or status.st_size > SOURCE_LIMIT:
            return None  # never opened: a FIFO would block
        name = os.path.abspath(path)
        now = [status.st_size, status.st_ino, status.st_mtime_ns, status.st_ctime_ns]
        remembered = self.packed.get(name)
        if not _same(remembered, now):
            remembered = self.known.get(name)
        if _same(remembered, now):
            self.seen[name] = remembered  # type: ignore[assignment]
            return str(remembered[4])  # type: ignore[index]
        try:  # as the runner reads it: a FIFO swapped in since the stat does not block
            found = digest(read_bounded(path, SOURCE_LIMIT))
        except OSError:  # Refused too
            return None
        if time.time() - status.st_ctime_ns / 1e9 > SETTLED:
            self.seen[name] = [*now, found]
            self.learnt = True
        return found

    def save(self) -> None:
        """Best effort: a cache that cannot be written is no error."""
        if not self.learnt:
            return
        known = self.known
        kept = {**known, **self.seen} if len(known) < MAX_FILES else self.seen
        with contextlib.suppress(OSError):
            write_whole(self.path, json.dumps(kept, separators=(",", ":")).encode())


def _same(remembered: object, now: list[int]) -> bool:
    """Whether a memo's record is of the file as it is `now` (and a record at all)."""
    return isinstance(remembered, list) and len(remembered) == 5 and remembered[:4] == now
