"""The files below a folder as the launch search reads them (`deps.script_mentions`), and
their stamps, which a kept result compares to learn whether the search would read the same.

Kept apart from the search itself: a warm run asks only for the stamps, and should not load
the launch parsers and `packaging` to get them.
"""

from __future__ import annotations

import os
import time

from neuron_migrate.files.digests import blake2b

SKIPPED_FOLDERS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__",
                             "site-packages", ".venv", "venv", ".tox", ".mypy_cache",
                             ".neuron-migrate-cache"})
CACHE_TAG = "CACHEDIR.TAG"
"""A folder holding it is a cache (this tool's, wherever `cache-dir` put it): its entries
quote file names and launcher words, and are not read."""
MAX_FILES = 20_000
SETTLED = 3.0
"""Seconds after its last change from which a file's stamp tells it is unchanged."""


def tree_stamps(root: str) -> list[list[object]] | None:
    """The stamp (size, inode, modification and status-change times) of every file the
    search reads below `root`, in a stable order; None when one changed too recently to tell
    (`neuron_migrate.cache.stamps`)."""
    found: list[list[object]] = []
    settled = time.time() - SETTLED
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED_FOLDERS)
        if CACHE_TAG in names:
            subfolders[:] = []
            continue
        for file_name in sorted(names):
            try:
                status = os.lstat(os.path.join(folder, file_name))
            except OSError:
                continue
            if status.st_ctime_ns / 1e9 > settled:
                return None
            found.append([os.path.join(folder, file_name), status.st_size, status.st_ino,
                          status.st_mtime_ns, status.st_ctime_ns, status.st_mode])
            if len(found) > MAX_FILES:
                break
    return found


def tree_digest(root: str) -> str | None:
    """`tree_stamps` in a few bytes, as a cached result keeps it."""
    stamps = tree_stamps(root)
    return None if stamps is None else \
        blake2b(repr(stamps).encode(), digest_size=20).hexdigest()
