"""Lockfiles (Pipfile.lock, poetry.lock, uv.lock, pdm.lock): read, never edited. Every
finding names the command that regenerates the file from its fixed source."""

from __future__ import annotations

import json
import re

from packaging.specifiers import SpecifierSet

from codemod.deps import check
from codemod.deps.emit import Emitter
from codemod.deps.entries import Entry, Manifest, Unparsable
from codemod.deps.toml_files import TomlFile
from codemod.deps.versions import name_of, parse_spec

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
    for i, package in enumerate(packages if isinstance(packages, list) else ()):
        name, version = package.get("name"), package.get("version")
        if isinstance(name, str) and isinstance(version, str):
            entries.append(Entry(name_of(name), _exact(version), f"{name} {version}",
                                 toml.offset_of(("package", i, "name"))))
    return entries


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
