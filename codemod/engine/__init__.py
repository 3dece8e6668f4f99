"""The Python rewrite engine: masks what LibCST cannot parse, lets each rule rewrite the
statements it matches, fixes up imports and helpers, then guards the result (it compiles,
every name is still bound) before it may be written."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from neuron_migrate.model import FileResult, Options
    from neuron_migrate.registry import Registry


def migrate_python(path: str, data: bytes, registry: Registry, options: Options | None = None,
                   generate: bool = True) -> FileResult:
    """`neuron_migrate.engine.migrate.migrate_source`, imported on first call: the engine loads
    LibCST, which a run whose files a token search settles never needs. The run and the
    notebooks call the engine through here."""
    from neuron_migrate.engine import migrate

    return migrate.migrate_source(path, data, registry, options, generate)
