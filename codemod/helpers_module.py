"""The user's helpers module (`helpers-module`): written by a run whose migrated files import
their helpers from it, as one more file of the run's results.

It holds every helper the files of the run import, with the ones those call, in the catalogue's
order (each after the helpers it calls), so its text depends only on the set of names. A
helper already in the module stays: files migrated by an earlier run import it, and they no
longer hold the XLA calls that would ask for it again. So the module is rewritten only when a
helper is missing, and a second `apply` leaves it as it is. A module that is not the text this
run would write for the helpers it holds (edited by hand, or by another version) is not
regenerated: the missing helpers, and the imports they read, are added at its end.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from neuron_migrate.files.fileio import WriteError, write_atomic
from neuron_migrate.helper_code import Helper
from neuron_migrate.model import FileResult, Finding, Kind
from neuron_migrate.registry import HELPERS_MODULE
from neuron_migrate.wording import as_written

Table = Mapping[str, Helper]
"""The helpers' code by name, in the catalogue's order (`Registry.helper_table`)."""

_HEADER = '''"""Plain-PyTorch helpers shared by the files migrated from torch_xla.

neuron-migrate writes this module (`helpers-module` in its configuration) and adds the
helpers a migration needs; each migrated file imports the ones it calls."""
'''


def ordered(names: Iterable[str], table: Table) -> list[str]:
    """`names` and the helpers they call, each after those it calls, in catalogue order."""
    wanted = set(names)
    for name in list(wanted):
        wanted.update(table[name].requires)
    done: list[str] = []
    for name in table:
        if name in wanted:
            for needed in (*table[name].requires, name):
                if needed not in done:
                    done.append(needed)
    return done


def module_text(names: Iterable[str], table: Table) -> str:
    """The whole module for these helpers."""
    helpers = ordered(names, table)
    return _HEADER + _imports(helpers, table) + "".join(
        "\n\n" + table[name].source for name in helpers)


def _imports(helpers: Sequence[str], table: Table) -> str:
    from neuron_migrate.engine.placement import _STDLIB
    modules = sorted({m for name in helpers for m in table[name].imports})
    sections = [[m for m in modules if m.split(".")[0] in _STDLIB],
                [m for m in modules if m.split(".")[0] not in _STDLIB]]
    blocks = ["".join(f"import {m}\n" for m in section) for section in sections if section]
    return "\n" + "\n".join(blocks) if blocks else ""


def defined(text: str) -> list[str] | None:
    """The top-level functions and classes of the module, or None if it does not parse."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    return [s.name for s in tree.body
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def updated(existing: str | None, wanted: Iterable[str], table: Table) -> str | None:
    """The module's new text with the helpers `wanted`, or None when it has them all."""
    if existing is None:
        return module_text(wanted, table)
    present = defined(existing)
    if present is None:
        return None  # the run reports the module itself; nothing is appended to a broken file
    missing = [n for n in ordered(wanted, table) if n not in present]
    if not missing:
        return None
    ours = [n for n in present if n in table]
    if existing == module_text(ours, table) and len(ours) == len(present):
        return module_text([*ours, *missing], table)
    imports = "".join(f"import {m}\n" for m in sorted(
        {m for n in missing for m in table[n].imports}))
    added = "".join("\n\n" + table[n].source for n in missing)
    return existing.rstrip("\n") + "\n\n" + imports + added


def missing(module: Path, names: Iterable[str], table: Table) -> list[str]:
    """Of `names` (with the helpers they call), those the module at `module` does not define."""
    try:
        present = defined(module.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        present = None
    return [n for n in ordered(names, table) if n not in (present or ())]


def module_results(results: Sequence[FileResult], table: Table, write: bool,
                   keep_sources: bool, protected: frozenset[Path] = frozenset()
                   ) -> list[FileResult]:
    """The helpers modules the run's files import from, as results: written in apply mode
    (atomically; a new module is created without replacing a file made meanwhile)."""
    wanted: dict[str, set[str]] = {}
    for result in results:
        if result.helpers_module is not None and result.error is None:
            wanted.setdefault(result.helpers_module, set()).update(result.helpers)
    found = []
    for module, names in sorted(wanted.items()):
        found.append(_module_result(Path(module), names, table, write, keep_sources,
                                    protected))
    return [r for r in found if r is not None]


def _module_result(path: Path, names: set[str], table: Table, write: bool,
                   keep_sources: bool, protected: frozenset[Path]) -> FileResult | None:
    shown = _shown(path)
    try:
        original = path.read_bytes() if path.exists() else None
    except OSError as error:
        return FileResult(shown, error=f"{shown}: cannot read the helpers module ({error})")
    try:
        text = original.decode("utf-8") if original is not None else None
    except UnicodeDecodeError:
        return FileResult(shown, error=f"{shown}: the helpers module is not UTF-8; not written")
    new = updated(text, names, table)
    if new is None:
        if text is not None and defined(text) is None:
            return FileResult(shown, error=f"{shown}: the helpers module does not parse; the "
                                           "migrated files that import it will fail")
        return None
    what = "add the helpers" if original is not None else "write the helpers"
    count = len(ordered(names, table))
    finding = Finding(shown, 1, 1, HELPERS_MODULE, Kind.FIX,
                      f"{what} the migrated files import ({count}: "
                      f"{', '.join(sorted(names))}) to this module (helpers-module)", True)
    result = FileResult(shown, findings=(finding,), original=original or b"",
                        new_source=new.encode("utf-8"))
    if write:
        if path.resolve() in protected:
            return FileResult(shown, error=f"{shown}: has uncommitted changes, so the helpers "
                                           "the migrated files import were not added (commit "
                                           "them first, or pass --force)")
        try:
            _write(path, result.new_source, original)  # type: ignore[arg-type]
        except (OSError, WriteError) as error:
            return FileResult(shown, error=f"{shown}: the helpers module was not written "
                                           f"({error})")
    if write:
        result = as_written(result)
    if not keep_sources:
        return dataclasses.replace(result, original=None, new_source=None, modified=True)
    return result


def _write(path: Path, data: bytes, original: bytes | None) -> None:
    if original is not None:
        write_atomic(path, data, original)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.neuron-migrate.tmp")
    with open(temporary, "xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(temporary, path)  # fails if the file appeared meanwhile: never replaced
    finally:
        temporary.unlink()


def _shown(path: Path) -> str:
    """The module's path as the report shows files: relative to the working directory when
    it is below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
