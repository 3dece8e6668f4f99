"""Each file's settings: the options of its own configuration under the command line's, as
the rules (a registry) and the per-file-ignores it is migrated with.

Files under different configurations get different rules, so `check a b` and `check b a` see
the same thing. Configurations with the same options share one registry, so a repository with
one configuration (the usual case) loads the catalogue once and sends workers one registry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from neuron_migrate import catalogue, target
from neuron_migrate.config import Config
from neuron_migrate.model import Options
from neuron_migrate.registry import DeferredRegistry, Registry
from neuron_migrate.runner import PerFileIgnores

if TYPE_CHECKING:
    from neuron_migrate.files.discover import Discovery
    from neuron_migrate.rule import Rule


@dataclass(frozen=True)
class Settings:
    """What one configuration (under the command line) migrates a file with."""

    registry: Registry
    per_file_ignores: PerFileIgnores | None = None


@dataclass(frozen=True)
class FileSettings:
    """Each file's settings, sent once to every worker: files are looked up by the path
    discovery gave them (the one the worker is handed); any other file, such as standard
    input's, gets `default`."""

    default: Settings
    by_file: dict[str, Settings] = dataclasses.field(default_factory=dict)

    def of(self, path: Path) -> Settings:
        return self.by_file.get(str(path), self.default) if self.by_file else self.default

    def preload(self) -> None:
        """Load every registry before worker processes start (they inherit it)."""
        for settings in {id(s): s for s in (self.default, *self.by_file.values())}.values():
            if isinstance(settings.registry, DeferredRegistry):
                settings.registry.loaded


class Configurations:
    """The settings of each configuration a run meets, made once per configuration."""

    def __init__(self, options_for: Callable[[Config], Options],
                 load_rules: Callable[[], Iterable[Rule]], target_given: bool) -> None:
        self._options_for = options_for
        self._load_rules = _once(load_rules)
        self._target_given = target_given
        self._settings: dict[Config, Settings] = {}
        self._registries: dict[Options, Registry] = {}
        self.notices: dict[str, None] = {}
        """What a Trn1/Inf2 target says (nothing is rewritten), once per configuration."""

    def of(self, config: Config) -> Settings:
        if config not in self._settings:
            options = self._options_for(config)
            if not target.native(options.target):  # Trn1/Inf2: nothing moves to TorchNeuron
                self.notices[target.legacy_notice(options.target,
                                                  self.where(config, options) or "")] = None
                options = dataclasses.replace(options, select=frozenset(),
                                              ignore=frozenset({"NM"}))
            ignores = None if config.anchor is None or not config.per_file_ignores else \
                PerFileIgnores.of(config.anchor.resolve(), config.per_file_ignores)
            self._settings[config] = Settings(self._registry(options), ignores)
        return self._settings[config]

    def _registry(self, options: Options) -> Registry:
        if options not in self._registries:
            self._registries[options] = DeferredRegistry(
                self._load_rules, catalogue.tokens(options.sources), options)
        return self._registries[options]

    def where(self, config: Config, options: Options) -> str | None:
        """Where the target came from, when one was given."""
        if options.target is None:
            return None
        return "--target" if self._target_given else f"target in {config.path}"

    def files(self, found: Discovery, default: Config) -> FileSettings:
        """Each file found with its configuration's settings."""
        configs = {scope.config for scope in found.scopes.values()}
        if len(configs) <= 1:  # the usual run: one configuration, nothing to look up per file
            return FileSettings(self.of(configs.pop() if configs else default))
        return FileSettings(self.of(default), {str(path): self.of(scope.config)
                                               for path, scope in found.scopes.items()})

    def for_report(self, found: Discovery | None, default: Config) -> tuple[Registry, str | None]:
        """The registry the report reads rules from, and where the target came from: the
        files' one configuration, or (when they have several) every rule any of them may
        report, with the target they all share, if any. Never the order of the paths."""
        configs = {scope.config for scope in found.scopes.values()} if found else set()
        configs = configs or {default}
        if len(configs) == 1:
            config = next(iter(configs))
            registry = self.of(config).registry
            return registry, self.where(config, registry.options)
        chosen = {self.of(c).registry.options for c in configs}
        wheres = {self.where(c, self.of(c).registry.options) for c in configs}
        targets = {o.target for o in chosen}
        sources = frozenset(s for o in chosen for s in o.sources)
        options = Options(sources=sources, target=targets.pop() if len(targets) == 1 else None)
        where = wheres.pop() if len(wheres) == 1 and options.target is not None else None
        return self._registry(options), where


def _once(load: Callable[[], Iterable[Rule]]) -> Callable[[], tuple[Rule, ...]]:
    """The catalogue, instantiated once however many registries a run makes."""
    loaded: list[tuple[Rule, ...]] = []

    def rules() -> tuple[Rule, ...]:
        if not loaded:
            loaded.append(tuple(load()))
        return loaded[0]

    return rules
