"""A run's work on one file: computed (in a worker process or in the main one), then, in the
main process only, written in apply mode. Workers only compute, so a run that is
interrupted stops its workers and nothing more is written."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from neuron_migrate.collector import collected_after
from neuron_migrate.files.fileio import WriteError, write_atomic
from neuron_migrate.job import Job
from neuron_migrate.migrate_file import migrate_bytes, read_source
from neuron_migrate.model import FileResult
from neuron_migrate.wording import as_written


def process(path: Path, job: Job) -> FileResult:
    """Migrate one file, keeping its sources only where the run will use them (less to send
    back from a worker), from the cache when an earlier run kept it."""
    data = read(path, job)
    if isinstance(data, FileResult):
        return data
    return process_data(path, data, job)


def read(path: Path, job: Job) -> bytes | FileResult:
    """The file's bytes, or the result that says why there are none."""
    return read_source(path, "not read" if job.audit else "not migrated")


def process_data(path: Path, data: bytes, job: Job) -> FileResult:
    """`process` of a file already read: the run reads each file once, to decide where it
    is migrated, and hands its bytes on."""
    if job.cache is None:
        return _computed(path, data, job)
    return job.cache.computed(path, data, job.options_for(path),
                              lambda: _computed(path, data, job))


def _computed(path: Path, data: bytes, job: Job) -> FileResult:
    with collected_after():
        if job.audit:
            return _audit(path, data, job)
        result = migrate_bytes(str(path), data, job.registry_for(path), job.generate, job.code)
    if not job.keep_sources and (not result.changed or not job.write) and \
            result.original is not None:  # less to send
        result = dataclasses.replace(result, original=None, new_source=None,
                                     modified=result.changed)
    elif job.ends and result.findings and result.original is not None:
        result = _with_ends(result)
    return result


def _with_ends(result: FileResult) -> FileResult:
    """Where each finding's code ends, and which lines the rewrite changes, for the reports
    that say them (which keep the sources): worked out here, where the file is migrated (in
    a worker, beside the others), and kept with the result, rather than by parsing the file
    and aligning it with its rewrite again in every run's report."""
    from neuron_migrate.report.edits import FileEdits

    edits = FileEdits(result)
    ends, changes = edits.ends(), edits.changes()
    if not ends and not changes:
        return result
    return dataclasses.replace(result, ends=ends, changes=changes)


def _audit(path: Path, data: bytes, job: Job) -> FileResult:
    """`audit` of one file: the readiness rules, the environment findings, and what the
    migration still holds for it (`neuron_migrate.analysis.readiness_audit`)."""
    from neuron_migrate.analysis.readiness_audit import audit_file

    result = audit_file(str(path), data, job.registry_for(path), migrate_bytes)
    return result if job.keep_sources else dataclasses.replace(result, original=None)


def finish(result: FileResult, job: Job) -> FileResult:
    """In apply mode, write one migrated file; then drop the sources nobody will show."""
    path = Path(result.path)
    if job.write and result.changed and path.resolve() in job.protected:
        result = dataclasses.replace(
            result, error=f"{path}: has uncommitted changes, so it was not written (commit or "
                          "stash them first so the migration's diff stays separate from your "
                          "work, or pass --force)")
    elif job.write:
        result = _write(result)
    if not job.keep_sources and result.original is not None:
        result = dataclasses.replace(result, original=None, new_source=None,
                                     modified=result.changed)
    return result


def _write(result: FileResult) -> FileResult:
    if not result.changed or result.error:
        return result
    assert result.new_source is not None and result.original is not None
    try:
        note = write_atomic(Path(result.path), result.new_source, result.original)
    except WriteError as error:
        return dataclasses.replace(result, error=str(error))
    written = as_written(result)  # its messages now tell the changes as done
    return dataclasses.replace(written, note=note) if note else written
