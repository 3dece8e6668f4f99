"""The configuration: `[tool.neuron-migrate]` in a pyproject.toml, or a file of our own.

Found per file, as ruff finds its configuration: the nearest folder, from the file's own up,
that holds `.neuron-migrate.toml`, `neuron-migrate.toml` (top-level keys, always a
configuration, even empty) or a `pyproject.toml` with a `[tool.neuron-migrate]` table (one
without the table is passed over and the search goes on upwards, as ruff passes over a
pyproject.toml without `[tool.ruff]`). Several in one folder: the first of those three names
wins, as `.ruff.toml` > `ruff.toml` > `pyproject.toml` do. Settings are never merged across
files: the nearest one alone applies. `--config FILE` replaces discovery for every file.

Relative paths in a configuration (exclude, extend-exclude, per-file-ignores) are relative to
its folder; those in a `--config` file to the working directory, as ruff resolves them.
Command-line flags override every configuration. An unknown key, a value of the wrong type or
an unknown rule id is an error that names the file, never silently ignored.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from neuron_migrate.engine_size import parse_size
from neuron_migrate.files.bounded import CONFIG_LIMIT, Refused, read_bounded
from neuron_migrate.model import SOURCES
from neuron_migrate.options import KEYS
from neuron_migrate.target import TARGETS


def _toml() -> ModuleType:
    """The TOML reader, imported only when a configuration is read: most runs find none,
    or a pyproject.toml that cannot hold one (`_table_in`)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    return tomllib


TABLE = "neuron-migrate"
OWN_FILES = (".neuron-migrate.toml", "neuron-migrate.toml")
"""Files of our own, top-level keys; each wins over a pyproject.toml in the same folder."""
CONFIG_FILES = (*OWN_FILES, "pyproject.toml")
"""Every name a configuration may have, the one that wins first."""


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class Config:
    path: Path | None = None
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] | None = None
    """None when not set: the default excludes apply (a list replaces them, as in ruff)."""
    extend_exclude: tuple[str, ...] = ()
    respect_gitignore: bool | None = None
    force_exclude: bool | None = None
    compile: bool | None = None
    unsafe_fixes: bool | None = None
    annotate: bool | None = None
    target: str | None = None
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    sources: tuple[str, ...] = ()
    helpers_module: str | None = None
    """`helpers-module`: the path (relative to the project root) of one module of the user's
    repository that holds the helpers, which migrated files import instead of a copy each."""
    max_engine_size: int | None = None
    cache_dir: str | None = None
    """`cache-dir`: where results are kept between runs, relative to this file's folder
    (`neuron_migrate.cache.location`)."""
    anchor: Path | None = None
    """The project root: where its relative paths and the default excludes start from. Its
    own folder, or the working directory for a `--config` file."""
    rule_ids: frozenset[str] = field(default_factory=frozenset, compare=False)


class ConfigFinder:
    """The configuration of each folder, looked up once per folder: a run over thousands of
    files in a few folders (a pre-commit hook's) reads each configuration file once.

    Folders are real (resolved) paths. `fixed` (a `--config` file) answers for every folder."""

    def __init__(self, rule_ids: frozenset[str], fixed: Config | None = None) -> None:
        self.rule_ids = rule_ids
        self.fixed = fixed
        self._folders: dict[Path, Config | None] = {}
        self._own: dict[Path, Config | None] = {}
        self.warnings: dict[str, None] = {}
        """Configuration files passed over (not regular files, too large), each once."""

    def nearest(self, folder: Path) -> Config | None:
        """The configuration that applies to the files of `folder`: its own, else the
        nearest above it; None when there is none."""
        if self.fixed is not None:
            return self.fixed
        chain: list[Path] = []
        found: Config | None = None
        for candidate in (folder, *folder.parents):
            if candidate in self._folders:
                found = self._folders[candidate]
                break
            chain.append(candidate)
            found = self.own(candidate)
            if found is not None:
                break
        for passed in chain:
            self._folders[passed] = found
        return found

    def own(self, folder: Path, names: Collection[str] | None = None) -> Config | None:
        """The configuration defined in `folder` itself, if any. `names` (the folder's
        entries, when a walk has listed them) spares asking for files that are not there."""
        if self.fixed is not None:
            return None  # --config: no other file counts
        if folder not in self._own:
            self._own[folder] = config_in(folder, self.rule_ids, names,
                                          lambda warning: self.warnings.update({warning: None}))
        return self._own[folder]


def config_in(folder: Path, rule_ids: frozenset[str], names: Collection[str] | None = None,
              warn: Callable[[str], None] | None = None) -> Config | None:
    """The configuration a folder defines, the first of CONFIG_FILES that holds one. A name
    that is not a regular file (a FIFO, a symlink to /dev/zero) or is over the size limit is
    passed over with a warning: reading it would hang the run or fill its memory."""
    for name in CONFIG_FILES:
        if names is not None and name not in names:
            continue
        path = folder / name
        try:
            data = read_bounded(path, CONFIG_LIMIT)
        except Refused as refused:
            if warn is not None and not refused.folder:
                warn(f"{refused}; not read as a configuration")
            continue
        except OSError:  # absent, unreadable: not a configuration
            continue
        table = _own_table(path, data) if name in OWN_FILES else _table_in(path, data)
        if table is not _ABSENT:
            return parse_config(path, table, rule_ids, anchor=folder)
    return None


def read_config(path: Path, rule_ids: frozenset[str], anchor: Path) -> Config:
    """A `--config FILE`: a pyproject.toml (its table, or the defaults when it has none) or
    a file of our own, whatever its name."""
    try:
        data = read_bounded(path, CONFIG_LIMIT)
    except Refused as refused:
        raise ConfigError(f"{refused}; not read as a configuration") from refused
    except OSError as error:
        raise ConfigError(f"{path}: no such configuration file") from error
    table = _table_in(path, data) if path.name == "pyproject.toml" else _own_table(path, data)
    return parse_config(path, {} if table is _ABSENT else table, rule_ids, anchor)


_ABSENT = object()


def _own_table(path: Path, data: bytes) -> object:
    """The whole document of one of our own files."""
    toml = _toml()
    try:
        return toml.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, toml.TOMLDecodeError) as error:
        raise ConfigError(f"{path}: not valid TOML ({error})") from error


def _table_in(pyproject: Path, data: bytes) -> object:
    """`tool.neuron-migrate` of this file, or `_ABSENT`. A file that cannot name the table
    is not parsed: the key can only be spelt with the bare text `neuron-migrate` or with
    \\u/\\U escapes in a quoted key, so a file with neither cannot hold it (this keeps a
    run started deep in a repository from parsing every unrelated pyproject above it).

    Only the parsed document decides whether the table is there: TOML spells it in many ways
    (`[ tool . "neuron-migrate" ]`, a dotted key under `[tool]`, an inline table, a sub-table
    header alone)."""
    if TABLE.encode() not in data and b"\\u" not in data and b"\\U" not in data:
        return _ABSENT
    toml = _toml()
    try:
        document = toml.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, toml.TOMLDecodeError) as error:
        if TABLE.encode() not in data:  # only an escape sequence somewhere: someone else's
            return _ABSENT
        raise ConfigError(f"{pyproject}: cannot read [tool.{TABLE}]: not valid TOML "
                          f"({error})") from error
    tool = document.get("tool")
    if not isinstance(tool, dict) or TABLE not in tool:
        return _ABSENT
    return tool[TABLE]


def load_config(paths: Iterable[Path], rule_ids: frozenset[str]) -> Config:
    """The configuration of the first path (the nearest above it). A run asks a
    `ConfigFinder` for each file's."""
    for given in list(paths)[:1]:
        found = ConfigFinder(rule_ids).nearest(folder_of(given))
        if found is not None:
            return found
    return Config()


def folder_of(given: Path) -> Path:
    """The real folder a path given on the command line is in (or is)."""
    try:
        start = given.resolve()
    except (OSError, RuntimeError):  # a symlink loop: discovery reports it
        start = given.absolute()
    return start if start.is_dir() else start.parent


def parse_config(path: Path, table: object, rule_ids: frozenset[str], anchor: Path) -> Config:
    """Every key checked, the file and the key named in each error."""
    where = f"{path}: [tool.{TABLE}]" if path.name == "pyproject.toml" else f"{path}:"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    values: dict[str, object] = {}
    for key, value in table.items():
        option = KEYS.get(key)
        if option is None or option.key is None:
            inside = f" in [tool.{TABLE}]" if path.name == "pyproject.toml" else ""
            raise ConfigError(f"{path}: unknown key {key!r}{inside} (known: "
                              f"{', '.join(sorted(KEYS))})")
        values[option.field] = READERS[option.key.check](f"{where} {key}", value, rule_ids)
    return Config(path=path, anchor=anchor, rule_ids=rule_ids, **values)  # type: ignore[arg-type]


def _strings(where: str, value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings")
    return value


def _rule_codes(where: str, value: object, rule_ids: frozenset[str]) -> tuple[str, ...]:
    for code in _strings(where, value):
        check_rule_code(code, rule_ids, where=where)
    return tuple(value)  # type: ignore[arg-type]


def _patterns(where: str, value: object, rule_ids: frozenset[str]) -> tuple[str, ...]:
    check_patterns(_strings(where, value), where=where)
    return tuple(value)  # type: ignore[arg-type]


def _bool(where: str, value: object, rule_ids: frozenset[str]) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where} must be true or false")
    return value


def _target(where: str, value: object, rule_ids: frozenset[str]) -> str:
    if not isinstance(value, str) or value.lower() not in TARGETS:
        raise ConfigError(f"{where} must be one of {', '.join(TARGETS)}")
    return value.lower()


def _size(where: str, value: object, rule_ids: frozenset[str]) -> int:
    size = parse_size(value)
    if size is None:
        raise ConfigError(f"{where} must be a size in bytes, or with a unit (512KiB, 1MiB)")
    return size


def _folder(where: str, value: object, rule_ids: frozenset[str]) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where} must be the path of a folder")
    return value


def _helpers_module(where: str, value: object, rule_ids: frozenset[str]) -> str:
    if not isinstance(value, str) or not value.endswith(".py") or \
            not all(p.isidentifier() for p in Path(value[:-3]).parts):
        raise ConfigError(f"{where} must be the path of a Python module whose folders and "
                          "name are identifiers, such as \"myproj/neuron_helpers.py\"")
    return value


def check_sources(value: object, where: str) -> tuple[str, ...]:
    """`from = ["xla", "cuda"]`, or `--from cuda`: the stacks to migrate from."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings")
    for source in value:
        if source not in SOURCES:
            raise ConfigError(f"{where}: unknown source {source!r} (known: "
                              f"{', '.join(SOURCES)})")
    return tuple(value)


def _per_file_ignores(where: str, value: object,
                      rule_ids: frozenset[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must map globs to lists of rule ids")
    check_patterns(list(value), where)
    for glob, codes in value.items():
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            raise ConfigError(f"{where} {glob!r} must be a list of rule ids")
        for code in codes:
            check_rule_code(code, rule_ids, where=f"{where} {glob!r}")
    return tuple((glob, tuple(c.upper() for c in codes)) for glob, codes in value.items())


def check_patterns(patterns: list[str], where: str) -> None:
    """Exclude globs are gitignore patterns: one git cannot read (`!` alone) is an error
    that names it, not a traceback later."""
    from neuron_migrate.files.patterns import bad_lines

    for _, pattern in bad_lines(patterns)[:1]:
        raise ConfigError(f"{where}: {pattern!r} is not a gitignore pattern")


def check_rule_code(code: str, rule_ids: frozenset[str], where: str) -> None:
    if not code.strip() or not any(rule_id.startswith(code.upper()) for rule_id in rule_ids):
        raise ConfigError(f"{where}: unknown rule id or prefix {code!r}; see "
                          "`neuron-migrate rules`")


READERS: dict[str, Callable[[str, object, frozenset[str]], object]] = {
    "rules": _rule_codes, "patterns": _patterns, "bool": _bool, "target": _target,
    "sources": lambda where, value, rule_ids: check_sources(value, where),
    "per-file-ignores": _per_file_ignores,
    "helpers-module": _helpers_module, "folder": _folder, "size": _size,
}
"""How the value of each kind of key (`neuron_migrate.options.Key.check`) is checked and
read: each names the file and the key when it refuses a value."""
