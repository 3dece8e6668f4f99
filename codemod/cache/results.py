"""What a run asks of the cache: the results it already holds for the files of a run, and to
keep the ones computed.

Looked up in the main process before any file is handed to a worker, so a run where every
file hits starts no worker and loads neither the rule catalogue nor LibCST. Kept where they
are computed (the worker), from the very bytes that were migrated: a file edited between the
look-up and the migration is kept under its new content.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from neuron_migrate.cache import codec, replay
from neuron_migrate.cache.key import entry_name
from neuron_migrate.cache.stamps import Stamps, digest
from neuron_migrate.cache.store import Store
from neuron_migrate.files import outside
from neuron_migrate.model import FileResult, Options


@dataclass
class ResultCache:
    """One run's view of the store. `request` spells what the run asks for (a diff, writes,
    code or dependencies only, an audit): results computed for another request are never
    given to this one. `write`: only results that change nothing are taken from the cache,
    since a file `apply` changes is migrated again and written as it would be without one."""

    store: Store
    request: str
    write: bool = False
    hits: int = 0
    misses: int = 0
    stamps: Stamps | None = None  # the main process's alone (workers read what they migrate)

    def lookup(self, path: Path, options: Options) -> FileResult | None:
        """The result kept for the file as it is now, or None."""
        if self.stamps is None:
            self.stamps = Stamps(self.store.root)
        content = self.stamps.digest_of(path)
        if content is None:
            return self._missed()  # reading it again reports the problem
        name = entry_name(str(path), content, options, self.request)
        document = self.store.get(name)
        if document is None or document.get("key") != name:
            return self._missed()
        try:
            result = codec.decode(document["result"])
        except (KeyError, TypeError, ValueError, AttributeError):
            return self._missed()
        if not outside.unchanged(document.get("seen", []), replay.ANSWERS):
            return self._missed()
        if result.path != str(path) or (self.write and result.changed):
            return self._missed()
        self.hits += 1
        return result

    def __getstate__(self) -> dict[str, object]:
        """What a worker is sent: not the memo of stamps, which may be large."""
        return {**self.__dict__, "stamps": None}

    def _missed(self) -> None:
        self.misses += 1
        return None

    def computed(self, path: Path, data: bytes, options: Options,
                 compute: Callable[[], FileResult]) -> FileResult:
        """`compute()`, kept for the next run with what it saw of other files, unless that
        cannot be replayed, it failed, or (when writing) it changes the file."""
        with outside.recording() as seen:
            result = compute()
        if outside.was_unrepeatable() or result.error or result.skipped or \
                (self.write and result.changed):
            return result
        name = entry_name(str(path), digest(data), options, self.request)
        document = {"key": name, "result": codec.encode(result)}
        if seen:
            document["seen"] = seen
        self.store.put(name, document)
        return result

    def merged(self, phases: list[list[Path]], options_of: Callable[[Path], Options],
               compute: Callable[[list[list[Path]]], Iterator[FileResult]]
               ) -> Iterator[FileResult]:
        """Each file's result in order: kept ones from the store, the others from `compute`
        (handed only the files that missed, phase by phase)."""
        replay.forget()
        found = [[(path, self.lookup(path, options_of(path))) for path in phase]
                 for phase in phases]
        if self.stamps is not None and self.store.writable:
            self.stamps.save()
        missing = [[path for path, hit in phase if hit is None] for phase in found]
        computed = compute([phase for phase in missing if phase])
        for phase in found:
            for _, hit in phase:
                yield hit if hit is not None else next(computed)
        for _ in computed:  # lets it end its workers as it would without a cache
            pass
        if self.misses:
            self.store.trim()

