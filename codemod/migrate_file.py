"""One file, by kind: Python code, a notebook, or a dependency/container file, from its
bytes to its `FileResult`. Nothing here writes or knows about processes, so the same
functions serve a run's workers, `check -` on standard input, and the tests.

The engine (and LibCST with it) is imported only once a file has an XLA-era token: most
files of a repository are decided by a substring search."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from neuron_migrate import deps
from neuron_migrate.engine import migrate_python
from neuron_migrate.engine_size import over_engine_limit
from neuron_migrate.files.bounded import SOURCE_LIMIT, Refused, read_bounded
from neuron_migrate.files.fileio import cannot_read
from neuron_migrate.model import BY_POSITION, FileResult, Kind
from neuron_migrate.registry import Registry
from neuron_migrate.target import named_instances

MAX_BYTES = SOURCE_LIMIT
"""Larger files are generated or data, not code a person wrote: skipped, with a message."""


def migrate_path(path: Path, registry: Registry, generate: bool = True,
                 code: bool = True) -> FileResult:
    """One file, by kind: Python code, a notebook, or a dependency/container file. Without
    `code`, only dependency findings: a notebook's install lines, a setup.py's pins."""
    data = read_source(path, "not migrated")
    if isinstance(data, FileResult):
        return data
    return migrate_bytes(str(path), data, registry, generate, code)


def read_source(path: Path, skipped: str) -> bytes | FileResult:
    """The file's bytes, or the result that says why there are none: too large (`skipped`
    says what is then not done) or unreadable. Read through the bounded reader, so that a
    file grown past the limit since discovery (or a FIFO put in its place) is never read
    beyond it."""
    name = str(path)
    try:
        return read_bounded(path, MAX_BYTES)
    except Refused as refused:
        if refused.too_large:
            return FileResult(name, skipped=f"{name}: larger than {MAX_BYTES // 2**20} MiB, "
                                            f"{skipped}")
        return FileResult(name, error=str(refused))
    except OSError as error:
        return FileResult(name, error=cannot_read(path, error))


def migrate_bytes(name: str, data: bytes, registry: Registry, generate: bool = True,
                  code: bool = True) -> FileResult:
    """A file's bytes, by the kind its name says, notebooks included: the file read from
    disk, or the source `check -` reads from standard input under `--stdin-filename`."""
    if Path(name).suffix == ".ipynb":
        result = _notebook(name, data, registry, code)
    else:
        result = migrate_data(name, data, registry, generate, code)
    instances = named_instances(data)
    return dataclasses.replace(result, instances=instances) if instances else result


def migrate_data(name: str, data: bytes, registry: Registry, generate: bool = True,
                 code: bool = True) -> FileResult:
    """A file's bytes, by the kind its name says: Python code or a dependency/container
    file (also what a notebook's `%%writefile NAME` cell writes)."""
    kind = deps.kind_of(Path(name))
    if kind is not None and kind != "setup.py":
        return deps.scan_source(name, data, registry, fix=True)
    if kind == "setup.py" and not code:
        return deps.scan_source(name, data, registry, fix=False)
    result = _python(name, data, registry, generate)
    if kind == "setup.py" and not result.error:  # code and a pin list at once
        pins = deps.scan_source(name, data, registry, fix=False)
        # a string both read (NM714 and NM801, NM712 and NM814): the scanner's word is kept
        scanned = {(f.line, f.column) for f in pins.findings}
        code = [f for f in result.findings
                if f.kind is not Kind.REVIEW or (f.line, f.column) not in scanned]
        findings = tuple(sorted((*code, *pins.findings), key=BY_POSITION))
        result = dataclasses.replace(result, findings=findings)
    return result


def _python(name: str, data: bytes, registry: Registry, generate: bool) -> FileResult:
    """Python code, with the review notes `apply` leaves where its rewrite would hide a review
    item, and `check` reports until they are acknowledged (`neuron_migrate.gate.notes`)."""
    result = _migrate_code(name, data, registry, generate)
    leave = generate and result.new_source is not None and any(
        f.kind is Kind.REVIEW for f in result.findings)
    if NOTE_MARK not in data and not leave:
        return result
    from neuron_migrate.gate.notes import settle

    # `check` without a diff needs no note: it reports the item as it is
    return settle(name, data, result, registry,
                  lambda new: _python(name, new, registry, generate=False), leave)


NOTE_MARK = b"neuron-migrate: NM"


def _migrate_code(name: str, data: bytes, registry: Registry, generate: bool) -> FileResult:
    """A file without any XLA-era token is decided before the engine (and LibCST) is loaded:
    the engine would return this same result."""
    if not registry.prefilter(data):
        return FileResult(name, original=data)
    refused = over_engine_limit(name, len(data), registry.options.max_engine_size)
    if refused is not None:
        return FileResult(name, original=data, error=refused)
    return migrate_python(name, data, registry, generate=generate)


def _notebook(name: str, data: bytes, registry: Registry, code: bool) -> FileResult:
    from neuron_migrate.notebooks.migrate import migrate_notebook

    return migrate_notebook(name, data, registry, migrate_data, code)
