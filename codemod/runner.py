"""A whole run: discover, migrate each file, write (in apply mode), collect results."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from codemod.discover import discover
from codemod.fileio import WriteError, read_bytes, write_atomic
from codemod.migrate import migrate_source
from codemod.model import FileResult, Finding, Kind
from codemod.registry import Registry


@dataclass(frozen=True)
class RunResult:
    files: tuple[FileResult, ...]
    errors: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    written: bool = False

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(f for r in self.files for f in r.findings)

    @property
    def failed(self) -> bool:
        return bool(self.errors) or any(r.error for r in self.files)

    @property
    def changed(self) -> tuple[FileResult, ...]:
        return tuple(r for r in self.files if r.changed)

    @property
    def needs_attention(self) -> bool:
        """Something would change, or something needs a person to look at it."""
        return bool(self.changed) or any(
            f.kind is Kind.REVIEW or not f.applied for f in self.findings)

    def exit_code(self) -> int:
        if self.failed:
            return 2
        if self.written:
            return 0
        return 1 if self.needs_attention else 0


def migrate_path(path: Path, registry: Registry) -> FileResult:
    name = str(path)
    try:
        data = read_bytes(path)
    except WriteError as error:
        return FileResult(name, error=str(error))
    return migrate_source(name, data, registry)


def run(paths: Iterable[Path], registry: Registry, write: bool,
        excludes: Iterable[str] = ()) -> RunResult:
    found = discover(paths, excludes)
    results = [migrate_path(path, registry) for path in found.files]
    if write:
        results = [_write(result) for result in results]
    results.sort(key=lambda r: r.path)
    return RunResult(tuple(results), tuple(found.errors), tuple(found.skipped), written=write)


def _write(result: FileResult) -> FileResult:
    if not result.changed or result.error:
        return result
    assert result.new_source is not None and result.original is not None
    try:
        write_atomic(Path(result.path), result.new_source, result.original)
    except WriteError as error:
        return dataclasses.replace(result, error=str(error))
    return result
