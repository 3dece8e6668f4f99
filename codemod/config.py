"""`[tool.neuron-migrate]` in the migrated repository's pyproject.toml.

Found by walking up from the paths given, like ruff's configuration; command-line flags
override it. An unknown key, a value of the wrong type or an unknown rule id is an error that
names the file, never silently ignored.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from neuron_migrate.target import TARGETS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

TABLE = "neuron-migrate"


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class Config:
    path: Path | None = None
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    compile: bool | None = None
    unsafe_fixes: bool | None = None
    annotate: bool | None = None
    target: str | None = None
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    sources: tuple[str, ...] = ()
    rule_ids: frozenset[str] = field(default_factory=frozenset, compare=False)


_LISTS = {"select", "ignore", "exclude"}
_BOOLS = {"compile", "unsafe-fixes", "annotate"}
SOURCES = ("xla", "cuda")
"""What `from` may name: the stacks neuron-migrate migrates code from."""


def find_pyproject(paths: Iterable[Path]) -> Path | None:
    """The nearest pyproject.toml with a [tool.neuron-migrate] table above the first path."""
    found = _find(list(paths))
    return found[0] if found else None


def _find(paths: list[Path]) -> tuple[Path, object] | None:
    """The nearest pyproject.toml whose parsed TOML has `tool.neuron-migrate`, and its value.

    Only the parsed document decides: TOML spells the table in many ways (`[ tool . "neuron-
    migrate" ]`, a dotted key under `[tool]`, an inline table, a sub-table header alone)."""
    for given in paths[:1]:
        try:
            start = given.resolve()
        except (OSError, RuntimeError):  # a symlink loop: discovery reports it
            start = given.absolute()
        directory = start if start.is_dir() else start.parent
        for candidate in (directory, *directory.parents):
            pyproject = candidate / "pyproject.toml"
            table = _table_in(pyproject)
            if table is not _ABSENT:
                return pyproject, table
    return None


_ABSENT = object()


def _table_in(pyproject: Path) -> object:
    """`tool.neuron-migrate` of this file, or `_ABSENT`. A file that cannot name the table
    is not parsed: the key can only be spelt with the bare text `neuron-migrate` or with
    \\u/\\U escapes in a quoted key, so a file with neither cannot hold it (this keeps a
    run started deep in a repository from parsing every unrelated pyproject above it)."""
    try:
        data = pyproject.read_bytes()
    except OSError:  # absent, a folder, unreadable: not a configuration
        return _ABSENT
    if TABLE.encode() not in data and b"\\u" not in data and b"\\U" not in data:
        return _ABSENT
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        if TABLE.encode() not in data:  # only an escape sequence somewhere: someone else's
            return _ABSENT
        raise ConfigError(f"{pyproject}: cannot read [tool.{TABLE}]: not valid TOML "
                          f"({error})") from error
    tool = document.get("tool")
    if not isinstance(tool, dict) or TABLE not in tool:
        return _ABSENT
    return tool[TABLE]


def load_config(paths: Iterable[Path], rule_ids: frozenset[str]) -> Config:
    found = _find(list(paths))
    if found is None:
        return Config()
    pyproject, table = found
    where = f"{pyproject}: [tool.{TABLE}]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    values: dict[str, object] = {}
    for key, value in table.items():
        if key in _LISTS:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{where} {key} must be a list of strings")
            if key != "exclude":
                for code in value:
                    check_rule_code(code, rule_ids, where=f"{where} {key}")
            else:
                check_patterns(value, where=f"{where} {key}")
            values[key] = tuple(value)
        elif key == "from":
            values["sources"] = check_sources(value, f"{pyproject}: [tool.{TABLE}] from")
        elif key == "per-file-ignores":
            values["per_file_ignores"] = _per_file_ignores(f"{where} {key}", value, rule_ids)
        elif key == "target":
            if not isinstance(value, str) or value.lower() not in TARGETS:
                raise ConfigError(f"{where} target must be one of {', '.join(TARGETS)}")
            values["target"] = value.lower()
        elif key in _BOOLS:
            if not isinstance(value, bool):
                raise ConfigError(f"{where} {key} must be true or false")
            values[key.replace("-", "_")] = value
        else:
            known = ", ".join(sorted(_LISTS | _BOOLS | {"per-file-ignores", "from", "target"}))
            raise ConfigError(f"{pyproject}: unknown key {key!r} in [tool.{TABLE}] "
                              f"(known: {known})")
    return Config(path=pyproject, rule_ids=rule_ids, **values)  # type: ignore[arg-type]


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
    from neuron_migrate.files.discover import gitignore_spec

    for _, pattern in gitignore_spec(patterns)[1][:1]:
        raise ConfigError(f"{where}: {pattern!r} is not a gitignore pattern")


def check_rule_code(code: str, rule_ids: frozenset[str], where: str) -> None:
    if not code.strip() or not any(rule_id.startswith(code.upper()) for rule_id in rule_ids):
        raise ConfigError(f"{where}: unknown rule id or prefix {code!r}; see "
                          "`neuron-migrate rules`")
