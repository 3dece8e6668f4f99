"""When the cyclic garbage collector runs during a run. A run holds every module it imported
and, while a file is migrated, that file's syntax trees: each collection walked them all to
find almost nothing, so collections are moved to where they find something."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Each full collection walked every object imported at start-up: objects that exist now
    are frozen out of collections (worker processes inherit that). Files are migrated with the
    collector off (`collected_after`); between them (results arriving, the report) young
    objects are collected less often. Memory stays flat: files are still processed one at a
    time."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


@contextlib.contextmanager
def collected_after() -> Iterator[None]:
    """No cyclic collection while one file is migrated; the young generations are collected
    once it is done. A file's syntax trees stay alive until the end of its migration, so
    every collection during it walked them again to find nothing (tens of thousands of nodes
    in a long file, each collection); the few cycles a file leaves are freed at its end, so
    memory still does not grow with the tree."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        if gc.get_count()[0] > YOUNG:
            gc.collect(1)


YOUNG = 2_000
"""Objects allocated (and not freed) during a file above which it is worth a collection: a
file no rule reads leaves a handful."""
