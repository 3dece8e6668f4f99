"""What every file of a run is migrated with: the rules of its configuration, and what the
run does with the result. Plain immutable data, so that it is sent once to each worker
process and a file's result depends on nothing else."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from neuron_migrate.files.patterns import gitignore_spec
from neuron_migrate.model import Options
from neuron_migrate.registry import Registry

if TYPE_CHECKING:
    import pathspec

    from neuron_migrate.cache.results import ResultCache
    from neuron_migrate.settings import FileSettings


@dataclass(frozen=True)
class Job:
    """What every worker needs to process a file; sent once per worker process."""

    registry: Registry
    write: bool
    keep_sources: bool
    per_file_ignores: PerFileIgnores | None = None
    protected: frozenset[Path] = frozenset()  # files with uncommitted changes: not written
    code: bool = True  # Python code migrated too; `scan` reads dependencies only
    audit: bool = False  # `audit`: the readiness rules only, on every file that uses torch
    settings: FileSettings | None = None  # each file's configuration, when they differ
    cache: ResultCache | None = None  # results kept from earlier runs (`neuron_migrate.cache`)
    ends: bool = False  # where each finding ends, for a report that says it (JSON, SARIF)

    @property
    def generate(self) -> bool:
        """Whether new files are generated: to write them or show them. A plain check only
        needs the findings."""
        return self.write or self.keep_sources

    def rules_of(self, path: Path) -> tuple[Registry, PerFileIgnores | None]:
        """The registry of the file's configuration, and its per-file-ignores."""
        if self.settings is None:
            return self.registry, self.per_file_ignores
        settings = self.settings.of(path)
        return settings.registry, settings.per_file_ignores

    def options_for(self, path: Path) -> Options:
        """The options `registry_for` migrates the file with, without loading any rule."""
        registry, per_file_ignores = self.rules_of(path)
        codes = per_file_ignores.codes(path) if per_file_ignores is not None else frozenset()
        if not codes:
            return registry.options
        return dataclasses.replace(registry.options, ignore=registry.options.ignore | codes)

    def registry_for(self, path: Path) -> Registry:
        registry, per_file_ignores = self.rules_of(path)
        if per_file_ignores is None:
            return registry
        codes = per_file_ignores.codes(path)
        if not codes:
            return registry
        return _registry_ignoring(registry, codes)


@dataclass(frozen=True)
class PerFileIgnores:
    """`per-file-ignores` globs, anchored at the configuration file's folder."""

    base: Path
    entries: tuple[tuple[pathspec.GitIgnoreSpec, tuple[str, ...]], ...]

    @classmethod
    def of(cls, base: Path, globs: tuple[tuple[str, tuple[str, ...]], ...]) -> PerFileIgnores:
        """Compiled once per run: `codes` is called for every file."""
        return cls(base, tuple((gitignore_spec([glob]).spec, codes) for glob, codes in globs))

    def codes(self, path: Path) -> frozenset[str]:
        try:
            relative = path.resolve().relative_to(self.base).as_posix()
        except ValueError:
            return frozenset()
        return frozenset(code for spec, codes in self.entries if spec.match_file(relative)
                         for code in codes)


@functools.lru_cache(maxsize=64)
def _registry_ignoring(registry: Registry, codes: frozenset[str]) -> Registry:
    options = dataclasses.replace(registry.options, ignore=registry.options.ignore | codes)
    return Registry(registry.all_rules, options)
