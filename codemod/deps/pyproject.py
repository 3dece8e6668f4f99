"""pyproject.toml: PEP 621 dependencies and optional-dependencies, PEP 735 dependency groups,
PDM and uv dependency arrays (all PEP 508 strings, edited in place), Poetry tables (their
constraint language is not PEP 440, so reported), and the package indexes each tool declares."""

from __future__ import annotations

from typing import Any

from packaging.specifiers import SpecifierSet

from neuron_migrate.deps import check
from neuron_migrate.deps.emit import Emitter
from neuron_migrate.deps.entries import Entry, Index, Manifest
from neuron_migrate.deps.toml_files import TomlFile, lookup
from neuron_migrate.deps.versions import name_of, parse_spec

MAIN = ("project", "dependencies")
GROUP_TABLES = (("project", "optional-dependencies"), ("dependency-groups",),
                ("tool", "pdm", "dev-dependencies"))
ARRAYS = (("tool", "uv", "dev-dependencies"), ("tool", "uv", "constraint-dependencies"),
          ("tool", "uv", "override-dependencies"))
INDEX_TABLES = (("tool", "uv", "index"), ("tool", "poetry", "source"), ("tool", "pdm", "source"))


def scan(text: str, emitter: Emitter, path: str = "") -> None:
    toml = TomlFile(text)
    manifest = Manifest(shared_group="/".join(MAIN))
    toml.requirement_array(MAIN, manifest, manifest.shared_group or "")
    for table in GROUP_TABLES:
        groups = lookup(toml.document, table)
        for name in groups if isinstance(groups, dict) else ():
            toml.requirement_array((*table, name), manifest, "/".join((*table, name)))
    for array in ARRAYS:
        toml.requirement_array(array, manifest, "/".join(array))
    _poetry(toml, manifest)
    _indexes(toml, manifest)
    check.emit(manifest, emitter)


def _poetry(toml: TomlFile, manifest: Manifest) -> None:
    tables = [("tool", "poetry", "dependencies"), ("tool", "poetry", "dev-dependencies")]
    groups = lookup(toml.document, ("tool", "poetry", "group"))
    tables += [("tool", "poetry", "group", g, "dependencies") for g in
               (groups if isinstance(groups, dict) else ())]
    for table in tables:
        packages = lookup(toml.document, table)
        for name, constraint in (packages.items() if isinstance(packages, dict) else ()):
            if name == "python":
                continue
            version = constraint.get("version", "*") if isinstance(constraint, dict) \
                else constraint
            manifest.entries.append(Entry(
                name_of(name), poetry_spec(str(version)), f"{name} = \"{version}\"",
                toml.offset_of((*table, name)), "/".join(table)))


def poetry_spec(constraint: str) -> SpecifierSet | None:
    """A Poetry constraint as PEP 440 where it already is one ("*", "2.9.0", "==2.9.*", ">=2");
    None for Poetry's own `^` and `~` forms, which are reported rather than reinterpreted."""
    constraint = constraint.strip()
    if constraint in ("", "*"):
        return SpecifierSet()
    if constraint[0].isdigit():
        return parse_spec(f"=={constraint}")
    return parse_spec(constraint)


def _indexes(toml: TomlFile, manifest: Manifest) -> None:
    for table in INDEX_TABLES:
        sources: Any = lookup(toml.document, table)
        for i, source in enumerate(sources if isinstance(sources, list) else ()):
            if isinstance(source, dict) and isinstance(source.get("url"), str):
                manifest.indexes.append(Index(source["url"], toml.offset_of((*table, i, "url"))))
    extra = lookup(toml.document, ("tool", "uv", "extra-index-url"))
    for i, url in enumerate(extra if isinstance(extra, list) else ()):
        manifest.indexes.append(Index(url, toml.offset_of(("tool", "uv", "extra-index-url", i))))
