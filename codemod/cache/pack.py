"""One file holding what a run took from the cache (its entries and the stamps of its files),
so that the next run of the same command reads one file instead of one per file.

A warm re-check of a large repository spends more on opening hundreds of small entries than
on anything else it does; reading them all at once, in one JSON document, costs a fraction of
that. The pack is only a copy: every document in it is the entry of the same name (the digest
of the whole key, `neuron_migrate.cache.key`), checked as an entry is, so a pack can never
hold a result the key would not give. A document the pack lacks is read from its entry, and a
pack that cannot be read or is not one (damaged, another version, edited) is no pack: the run
reads the entries, as it would without one.

A pack is named for the command that wrote it (what the run asks for, the working directory
and the paths given), so that a hook's run over a few files and a full run of the same tree
keep packs of their own rather than replacing each other's. A run writes its pack again only
when what it took differs from what the pack held; written whole through a temporary file and
renamed (`store.write_whole`), so concurrent runs each leave a whole pack (the last one's)
and a killed run leaves the previous one. Packs are trimmed with the entries, least recently
used first.
"""

from __future__ import annotations

from typing import Any

from neuron_migrate.files.digests import blake2b
from neuron_migrate.cache.store import Store

PREFIX = "pack-"
FORMAT = 1
"""The layout of a pack's document; a pack of another layout is no pack."""


def pack_name(command: str) -> str:
    """The pack of a command (its spelling: what the run asks for, where, on which paths)."""
    digest = blake2b(command.encode("utf-8", "surrogatepass"), digest_size=16)
    return PREFIX + digest.hexdigest()


class Pack:
    """The documents and stamps a pack held when the run began, and the ones this run took
    (`keep`), which are the next pack."""

    def __init__(self, store: Store, name: str) -> None:
        self.store = store
        self.name = name
        self.entries: dict[str, dict[str, Any]] = {}
        self.stamps: dict[str, list[Any]] = {}
        self.kept: dict[str, dict[str, Any]] = {}
        self.fresh = False
        """Whether some document kept is not the pack's own copy."""
        document = store.get(name)
        if document is not None and document.get("format") == FORMAT:
            entries, stamps = document.get("entries"), document.get("stamps")
            if isinstance(entries, dict) and isinstance(stamps, dict):
                self.entries, self.stamps = entries, stamps

    def document(self, name: str) -> dict[str, Any] | None:
        """The document of the entry `name`: the pack's copy, else the entry's own."""
        document = self.entries.get(name)
        if isinstance(document, dict):
            return document
        return self.store.get(name)

    def keep(self, name: str, document: dict[str, Any]) -> None:
        """`document` is the entry `name` this run took or computed."""
        if self.entries.get(name) is not document:
            self.fresh = True
        self.kept[name] = document

    def save(self, stamps: dict[str, list[Any]]) -> None:
        """Write the pack of this run (its documents and the settled `stamps` of its files)
        if it differs from the one read; best effort, as every write to the cache."""
        if not self.fresh and self.kept.keys() == self.entries.keys() and \
                stamps == self.stamps:
            return
        self.store.put(self.name, {"format": FORMAT, "stamps": stamps, "entries": self.kept})
