"""Lockfiles (Pipfile.lock, poetry.lock, uv.lock, pdm.lock): read, never edited. Every
finding names the command that regenerates the file from its fixed source."""

from __future__ import annotations

import json
import re

from packaging.specifiers import SpecifierSet

from neuron_migrate.deps import check
from neuron_migrate.deps.emit import Emitter
from neuron_migrate.deps.entries import Entry, Manifest, Unparsable, line_at
from neuron_migrate.deps.toml_files import TomlFile
from neuron_migrate.deps.versions import name_of, parse_spec

COMMANDS = {"pipfile.lock": "pipenv lock", "poetry.lock": "poetry lock", "uv.lock": "uv lock",
            "pdm.lock": "pdm lock"}
SOURCES = {"pipfile.lock": "Pipfile"}


def scan(text: str, emitter: Emitter, path: str) -> None:
    kind = path.replace("\\", "/").rsplit("/", 1)[-1].lower()
    manifest = Manifest(lock_command=COMMANDS[kind])
    manifest.entries = _pipfile_lock(text) if kind == "pipfile.lock" else _toml_lock(text)
    check.emit(manifest, emitter, SOURCES.get(kind, "pyproject.toml"))


def _toml_lock(text: str) -> list[Entry]:
    toml = TomlFile(text)
    packages = toml.document.get("package", [])
    entries = []
    if not isinstance(packages, list):
        raise _not_a_lock(toml, ("package",), "`package` is not an array of tables")
    for i, package in enumerate(packages):
        if not isinstance(package, dict):
            raise _not_a_lock(toml, ("package", i), f"`package` item {i + 1} is not a table")
        name, version = package.get("name"), package.get("version")
        if isinstance(name, str) and isinstance(version, str):
            entries.append(Entry(name_of(name), _exact(version), f"{name} {version}",
                                 toml.offset_of(("package", i, "name"))))
    return entries


def _not_a_lock(toml: TomlFile, path: tuple[str | int, ...], problem: str) -> Unparsable:
    return Unparsable(line_at(toml.text, toml.offset_of(path)), f"not a lockfile ({problem})")


def _pipfile_lock(text: str) -> list[Entry]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise Unparsable(error.lineno, f"not valid JSON ({error.msg})") from None
    entries = []
    for section in ("default", "develop"):
        packages = document.get(section, {}) if isinstance(document, dict) else {}
        for name, data in (packages.items() if isinstance(packages, dict) else ()):
            version = data.get("version", "") if isinstance(data, dict) else ""
            match = re.search(rf'"{re.escape(name)}"\s*:', text)
            entries.append(Entry(name_of(name), parse_spec(version), f"{name}{version}",
                                 match.start() + 1 if match else 0))
    return entries


def _exact(version: str) -> SpecifierSet | None:
    return parse_spec(f"=={version}")
