"""What decides, folder by folder, which paths a walk skips, and why.

Each folder is judged by the configuration nearest to it (`neuron_migrate.config`), with the
command line's options over it, as ruff resolves its file settings:

- `exclude` replaces the default excludes; `extend-exclude` adds to whichever applies
  (the configuration's and `--extend-exclude` both). `--exclude` replaces the configuration's
  `exclude` (and so the defaults) for every configuration.
- The default excludes are output folders (`build/`, `dist/`...) at the project root only:
  the configuration's folder, or the path given when no configuration applies. Ruff skips
  them at any depth; a package named `build` or `dist` deeper in a tree (`src/build/`, a
  `dist/` module for distributed code) is source code, and a build folder elsewhere is
  normally in .gitignore, which is honoured (`respect-gitignore`).
- `ALWAYS_SKIPPED` folders are never entered, at any depth, whatever the options: nothing in
  them is the repository's own code, and `apply` must never write there.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from neuron_migrate.config import Config, ConfigFinder
from neuron_migrate.files.patterns import Patterns, anchored, gitignore_spec, matching_nothing

ALWAYS_SKIPPED = {
    **dict.fromkeys((".git", ".hg", ".svn", ".bzr", ".git-rewrite"), "version control"),
    **dict.fromkeys((".venv", "venv", ".tox", ".nox", ".direnv", ".pyenv"),
                    "virtualenvs or Python installs"),
    **dict.fromkeys(("site-packages", "dist-packages", "node_modules", "__pypackages__",
                     ".eggs"), "installed packages"),
    **dict.fromkeys(("__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".pytype",
                     ".neuron-migrate-cache",
                     ".ipynb_checkpoints", ".pants.d"), "caches and tool state"),
}
"""Folder names skipped at any depth, with the reason `-v` gives. A folder holding
`pyvenv.cfg` (any virtualenv) and `*.egg-info` metadata are skipped too."""
DEFAULT_EXCLUDES = frozenset({"build", "dist", "_build", "buck-out"})
"""Build output folders, skipped at the project root only (the module docstring says why)."""


def always_skipped(name: str, path: str) -> str | None:
    """Why a folder is never entered, or None. `path` is asked for `pyvenv.cfg` only when
    the name says nothing (one stat per folder)."""
    why = ALWAYS_SKIPPED.get(name)
    if why is not None:
        return f"always skipped ({why})"
    if name.endswith(".egg-info"):
        return "always skipped (package metadata)"
    if os.path.exists(os.path.join(path, "pyvenv.cfg")):
        return "always skipped (a virtualenv: it holds pyvenv.cfg)"
    return None


@dataclass(frozen=True)
class Excludes:
    """Groups of gitignore-style patterns, each anchored at its own folder and named for
    the reason it gives."""

    patterns: tuple[Patterns, ...] = ()

    @classmethod
    def of(cls, *groups: tuple[Path, Iterable[str], str]) -> Excludes:
        """Lines that are no pattern were refused with the configuration (`check_patterns`);
        one that can match nothing is left out here (`Scopes` warns of it)."""
        compiled = []
        for base, lines, label in groups:
            lines = list(lines)
            if lines:
                compiled.append(anchored(base.resolve(), lines, label).patterns)
        return cls(tuple(compiled))

    def match(self, real: Path, is_dir: bool) -> str | None:
        """Why `real` is excluded (the option and the pattern), or None."""
        for patterns in self.patterns:
            relative = patterns.relative(real)
            if relative is None:
                continue
            verdict = patterns.deciding(relative + ("/" if is_dir else ""))
            if verdict is not None and verdict[0]:
                return f"{patterns.label} {verdict[1]!r}"
        return None


@dataclass(frozen=True)
class Overrides:
    """The command line's file-selection options, over every configuration."""

    exclude: tuple[str, ...] | None = None  # --exclude: replaces `exclude` and the defaults
    extend_exclude: tuple[str, ...] = ()  # --extend-exclude
    respect_gitignore: bool | None = None  # --respect-gitignore / --no-respect-gitignore
    force_exclude: bool | None = None  # --force-exclude / --no-force-exclude
    default_excludes: bool = True  # --no-default-excludes
    cwd: Path = field(default_factory=lambda: Path.cwd().resolve())  # where CLI patterns start


@dataclass(frozen=True)
class Scope:
    """How the folders under one configuration (or under a path given without one) are
    walked."""

    config: Config
    root: Path
    excludes: Excludes
    defaults: frozenset[str]  # DEFAULT_EXCLUDES, unless `exclude` or an option replaced them
    gitignore: bool
    force_exclude: bool

    def excluded(self, real: Path, is_dir: bool, parent: Path) -> str | None:
        """Why a path met in a walk (in the real folder `parent`) is excluded, or None."""
        if is_dir and real.name in self.defaults and parent == self.root:
            return f"default exclude '{real.name}/' at the project root {self.root}"
        return self.excludes.match(real, is_dir)

    def named_excluded(self, real: Path, is_dir: bool) -> str | None:
        """Why a path named on the command line is excluded under `--force-exclude`: the
        patterns, a default-excluded folder at the project root above it, or an always
        skipped folder between the project root and it (as ruff asks of its ancestors)."""
        try:
            parts = real.relative_to(self.root).parts
        except ValueError:
            parts = ()
        if real == self.root:
            return None  # the project root itself is what the excludes are relative to
        if parts and parts[0] in self.defaults and (len(parts) > 1 or is_dir):
            return f"default exclude '{parts[0]}/' at the project root {self.root}"
        folders = parts if is_dir else parts[:-1]
        for name in folders:
            if name in ALWAYS_SKIPPED or name.endswith(".egg-info"):
                return always_skipped(name, "")
        return self.excludes.match(real, is_dir)


class Scopes:
    """The scope of every folder a run meets, built once per configuration."""

    def __init__(self, finder: ConfigFinder, overrides: Overrides) -> None:
        self.finder = finder
        self.overrides = overrides
        self._built: dict[tuple[Config, Path], Scope] = {}
        self._compiled: dict[tuple[Path, tuple[str, ...], str], Patterns] = {}
        self.warnings: dict[str, None] = finder.warnings
        """Patterns of the options and configurations that can match nothing, and the
        configuration files passed over, each once (the finder's own warnings, shared)."""

    def nearest(self, folder: Path, root: Path) -> Scope:
        """The scope of a real folder a path given is in (or is); `root` is the project
        root when no configuration applies (the path given)."""
        return self._scope(self.finder.nearest(folder), root)

    def own(self, folder: Path, names: Collection[str]) -> Scope | None:
        """The scope a folder met in a walk starts, when it holds a configuration."""
        config = self.finder.own(folder, names)
        return None if config is None else self._scope(config, folder)

    def _scope(self, config: Config | None, root: Path) -> Scope:
        config = config or Config()
        root = config.anchor or root
        key = (config, root)
        if key not in self._built:
            self._built[key] = self._build(config, root)
        return self._built[key]

    def _build(self, config: Config, root: Path) -> Scope:
        given = self.overrides
        anchor = config.anchor or given.cwd
        groups: list[tuple[Path, Iterable[str], str]] = []
        if given.exclude is not None:
            groups.append((given.cwd, given.exclude, "--exclude"))
        elif config.exclude is not None:
            groups.append((anchor, config.exclude, f"exclude in {config.path}"))
        defaults = DEFAULT_EXCLUDES if given.exclude is None and config.exclude is None and \
            given.default_excludes else frozenset()
        groups.append((anchor, config.extend_exclude, f"extend-exclude in {config.path}"))
        groups.append((given.cwd, given.extend_exclude, "--extend-exclude"))
        if config.per_file_ignores:
            self._warn(matching_nothing(f"per-file-ignores in {config.path}", gitignore_spec(
                glob for glob, _ in config.per_file_ignores), numbered=False))
        return Scope(config, root, self._excludes(groups), defaults,
                     gitignore=_first(given.respect_gitignore, config.respect_gitignore, True),
                     force_exclude=_first(given.force_exclude, config.force_exclude, False))

    def _excludes(self, groups: list[tuple[Path, Iterable[str], str]]) -> Excludes:
        """Each group compiled once per run: the command line's patterns are the same in
        every scope."""
        compiled = []
        for base, lines, label in groups:
            key = (base, tuple(lines), label)
            if not key[1]:
                continue
            if key not in self._compiled:
                read = anchored(base.resolve(), key[1], label)
                self._compiled[key] = read.patterns
                self._warn(matching_nothing(label, read, numbered=False))
            compiled.append(self._compiled[key])
        return Excludes(tuple(compiled))


    def _warn(self, warnings: list[str]) -> None:
        self.warnings.update(dict.fromkeys(warnings))

def _first(*values: bool | None) -> bool:
    return next(v for v in values if v is not None)  # type: ignore[return-value]
