"""What a run asks of the cache: the results it already holds for the files of a run, and to
keep the ones computed.

Looked up in the main process before any file is handed to a worker, so a run where every
file hits starts no worker and loads neither the rule catalogue nor LibCST. Kept where they
are computed (the worker), from the very bytes that were migrated: a file edited between the
look-up and the migration is kept under its new content.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuron_migrate.cache import codec, replay
from neuron_migrate.cache.key import entry_name
from neuron_migrate.cache.pack import Pack, pack_name
from neuron_migrate.cache.stamps import Stamps, digest
from neuron_migrate.cache.store import Store
from neuron_migrate.files import outside
from neuron_migrate.model import FileResult, Options


@dataclass
class ResultCache:
    """One run's view of the store. `request` spells what the run asks for (a diff, writes,
    code or dependencies only, an audit): results computed for another request are never
    given to this one. `write`: only results that change nothing are taken from the cache,
    since a file `apply` changes is migrated again and written as it would be without one.
    `command`: the paths the run was given, which with `request` and the working directory
    name its pack (`neuron_migrate.cache.pack`)."""

    store: Store
    request: str
    write: bool = False
    command: str = ""
    hits: int = 0
    misses: int = 0
    # the main process's alone (workers read what they migrate and write entries only):
    stamps: Stamps | None = None
    pack: Pack | None = None
    missed: dict[str, Path] = field(default_factory=dict)
    """The entry each missed file's result is kept under if its bytes stay as looked up."""

    def lookup(self, path: Path, options: Options) -> FileResult | None:
        """The result kept for the file as it is now, or None."""
        pack, stamps = self._opened()
        content = stamps.digest_of(path)
        if content is None:
            return self._missed()  # reading it again reports the problem
        name = entry_name(str(path), content, options, self.request)
        document = pack.document(name)
        result = None if document is None else self._taken(name, document, path)
        if result is None:
            self.missed[name] = path
            return self._missed()
        pack.keep(name, document)  # type: ignore[arg-type]
        self.hits += 1
        return result

    def _opened(self) -> tuple[Pack, Stamps]:
        if self.pack is None or self.stamps is None:
            command = f"{self.request}\0{os.getcwd()}\0{self.command}"
            self.pack = Pack(self.store, pack_name(command))
            self.stamps = Stamps(self.store.root, self.pack.stamps)
        return self.pack, self.stamps

    def _taken(self, name: str, document: dict[str, Any], path: Path) -> FileResult | None:
        """The result `document` holds, if it is the entry `name` and still true of `path`."""
        if document.get("key") != name:
            return None
        try:
            result = codec.decode(document["result"])
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        if not outside.unchanged(document.get("seen", []), replay.ANSWERS):
            return None
        if result.path != str(path) or (self.write and result.changed):
            return None
        return result

    def __getstate__(self) -> dict[str, object]:
        """What a worker is sent: not the memo of stamps nor the pack, which may be large."""
        return {**self.__dict__, "stamps": None, "pack": None, "missed": {}}

    def _missed(self) -> None:
        self.misses += 1
        return None

    def computed(self, path: Path, data: bytes, options: Options,
                 compute: Callable[[], FileResult]) -> FileResult:
        """`compute()`, kept for the next run with what it saw of other files, unless that
        cannot be replayed or (when writing) it changes the file. A file that cannot be
        parsed is kept with its error, which its bytes decide as they decide any result (the
        Python version is in the key); an error from an exception nobody expected marks the
        computation unrepeatable (`engine.failsafe.not_kept`)."""
        with outside.recording() as seen:
            result = compute()
        if outside.was_unrepeatable() or (self.write and result.changed):
            return result
        name = entry_name(str(path), digest(data), options, self.request)
        document = {"key": name, "result": codec.encode(result)}
        if seen:
            document["seen"] = seen
        self.store.put(name, document)
        if self.pack is not None:  # computed here, not in a worker: no need to read it back
            self.pack.keep(name, document)
        return result

    def merged(self, phases: list[list[Path]], options_of: Callable[[Path], Options],
               compute: Callable[[list[list[Path]]], Iterator[FileResult]]
               ) -> Iterator[FileResult]:
        """Each file's result in order: kept ones from the store, the others from `compute`
        (handed only the files that missed, phase by phase). Once all are computed, the
        entries taken and kept make the run's pack."""
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
        if self.pack is not None and self.stamps is not None and self.store.writable:
            for name in [n for n in self.missed if n not in self.pack.kept]:  # a worker's
                document = self.store.get(name)
                if document is not None and document.get("key") == name:
                    self.pack.keep(name, document)
            self.pack.save(self.stamps.seen)
        if self.misses:
            self.store.trim()
