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
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    sources: tuple[str, ...] = ()
    rule_ids: frozenset[str] = field(default_factory=frozenset, compare=False)


_LISTS = {"select", "ignore", "exclude"}
_BOOLS = {"compile", "unsafe-fixes", "annotate"}
SOURCES = ("xla", "cuda")
"""What `from` may name: the stacks neuron-migrate migrates code from."""


def find_pyproject(paths: Iterable[Path]) -> Path | None:
    """The nearest pyproject.toml with a [tool.neuron-migrate] table above the first path."""
    for given in paths:
        try:
            start = given.resolve()
        except (OSError, RuntimeError):  # a symlink loop: discovery reports it
            start = given.absolute()
        directory = start if start.is_dir() else start.parent
        for candidate in (directory, *directory.parents):
            pyproject = candidate / "pyproject.toml"
            if pyproject.is_file() and _has_table(pyproject):
                return pyproject
        return None
    return None


def _has_table(pyproject: Path) -> bool:
    try:
        text = pyproject.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return f"[tool.{TABLE}]" in text or f'[tool."{TABLE}"]' in text


def load_config(paths: Iterable[Path], rule_ids: frozenset[str]) -> Config:
    pyproject = find_pyproject(list(paths))
    if pyproject is None:
        return Config()
    try:
        document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{pyproject}: cannot read [tool.{TABLE}]: {error}") from error
    table = document.get("tool", {}).get(TABLE, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: [tool.{TABLE}] must be a table")
    values: dict[str, object] = {}
    for key, value in table.items():
        if key in _LISTS:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{pyproject}: [tool.{TABLE}] {key} must be a list of strings")
            values[key] = tuple(value)
        elif key == "from":
            values["sources"] = check_sources(value, f"{pyproject}: [tool.{TABLE}] from")
        elif key == "per-file-ignores":
            values["per_file_ignores"] = _per_file_ignores(pyproject, value, rule_ids)
        elif key in _BOOLS:
            if not isinstance(value, bool):
                raise ConfigError(f"{pyproject}: [tool.{TABLE}] {key} must be true or false")
            values[key.replace("-", "_")] = value
        else:
            known = ", ".join(sorted(_LISTS | _BOOLS | {"per-file-ignores", "from"}))
            raise ConfigError(f"{pyproject}: unknown key {key!r} in [tool.{TABLE}] "
                              f"(known: {known})")
    for code in (*values.get("select", ()), *values.get("ignore", ())):  # type: ignore[misc]
        check_rule_code(code, rule_ids, where=f"{pyproject}: [tool.{TABLE}]")
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


def _per_file_ignores(pyproject: Path, value: object,
                      rule_ids: frozenset[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    where = f"{pyproject}: [tool.{TABLE}] per-file-ignores"
    if not isinstance(value, dict) or not all(
            isinstance(codes, list) and all(isinstance(c, str) for c in codes)
            for codes in value.values()):
        raise ConfigError(f"{where} must map globs to lists of rule ids")
    for codes in value.values():
        for code in codes:
            check_rule_code(code, rule_ids, where=where)
    return tuple((glob, tuple(c.upper() for c in codes)) for glob, codes in value.items())


def check_rule_code(code: str, rule_ids: frozenset[str], where: str) -> None:
    if not any(rule_id.startswith(code.upper()) for rule_id in rule_ids):
        raise ConfigError(f"{where}: unknown rule id or prefix {code!r}; see "
                          "`neuron-migrate rules`")
