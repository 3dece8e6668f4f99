"""Pipfile: `[packages]` / `[dev-packages]` and `[[source]]` indexes. Reported, not edited:
a Pipfile change only takes effect through `pipenv lock`, which the message names."""

from __future__ import annotations

from neuron_migrate.deps import check
from neuron_migrate.deps.emit import Emitter
from neuron_migrate.deps.entries import Entry, Index, Manifest
from neuron_migrate.deps.pyproject import poetry_spec
from neuron_migrate.deps.toml_files import TomlFile, lookup
from neuron_migrate.deps.versions import name_of

NOT_EDITED = "Pipfile is not edited: change it, then run `pipenv lock`"


def scan(text: str, emitter: Emitter, path: str = "") -> None:
    toml = TomlFile(text)
    manifest = Manifest(not_edited=NOT_EDITED, shared_group="packages")
    for table in ("packages", "dev-packages"):
        packages = lookup(toml.document, (table,))
        for name, constraint in (packages.items() if isinstance(packages, dict) else ()):
            version = constraint.get("version", "*") if isinstance(constraint, dict) \
                else constraint
            manifest.entries.append(Entry(name_of(name), poetry_spec(str(version)),
                                          f"{name} = \"{version}\"",
                                          toml.offset_of((table, name)), table))
    sources = lookup(toml.document, ("source",))
    for i, source in enumerate(sources if isinstance(sources, list) else ()):
        if isinstance(source, dict) and isinstance(source.get("url"), str):
            manifest.indexes.append(Index(source["url"], toml.offset_of(("source", i, "url"))))
    check.emit(manifest, emitter)
