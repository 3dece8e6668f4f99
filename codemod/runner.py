"""A whole run: discover the files, migrate each (`neuron_migrate.per_file`, in worker
processes with -j: `neuron_migrate.workers`), write in apply mode, and collect the results
in a stable order (`neuron_migrate.run_result`)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from neuron_migrate import deps
from neuron_migrate.collector import fewer_collections
from neuron_migrate.files.discover import Discovery, discover
from neuron_migrate.interrupts import Interrupts
from neuron_migrate.job import Job, PerFileIgnores
from neuron_migrate.engine import migrate_python
from neuron_migrate.migrate_file import MAX_BYTES, migrate_bytes, migrate_data, migrate_path
from neuron_migrate.model import FileResult
from neuron_migrate.per_file import finish
from neuron_migrate.registry import Registry
from neuron_migrate.run_result import RunResult

if TYPE_CHECKING:
    from neuron_migrate.cache.results import ResultCache
    from neuron_migrate.settings import FileSettings

__all__ = ["MAX_BYTES", "Job", "PerFileIgnores", "Progress", "RunResult", "accept_for",
           "accepts", "default_jobs", "finish", "migrate_bytes", "migrate_data",
           "migrate_path", "migrate_python", "run"]
"""What callers import from here: the run, and the per-file functions they also use."""

Progress = Callable[[int, int], None]
"""Called with (files done, files in all) as the run advances."""


def accepts(job_python: bool) -> Callable[[Path], bool]:
    """What discovery hands to a run: code, notebooks and dependency files, or (for `scan`)
    dependency files and notebooks (for their install lines)."""
    if job_python:
        return lambda path: path.suffix in (".py", ".ipynb") or deps.is_dependency_file(path)
    return lambda path: path.suffix == ".ipynb" or deps.is_dependency_file(path)


def accept_for(python: bool, audit: bool) -> Callable[[Path], bool]:
    """What a run's discovery takes: `audit` reads code, notebooks and the files that settle
    the environment or pin the stack."""
    if audit:
        from neuron_migrate.analysis.readiness_audit import audited

        return audited
    return accepts(python)


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
               else os.cpu_count() or 1)


def run(paths: Iterable[Path], registry: Registry, write: bool,
        excludes: Iterable[str] = (), jobs: int = 1, keep_sources: bool = True,
        progress: Progress | None = None, python: bool = True,
        strict: bool = False,
        per_file_ignores: PerFileIgnores | None = None,
        protected: frozenset[Path] = frozenset(),
        only: frozenset[Path] | None = None, audit: bool = False,
        found: Discovery | None = None, settings: FileSettings | None = None,
        cache: ResultCache | None = None, ends: bool = False) -> RunResult:
    """Migrate every file under `paths`. The result does not depend on `jobs`.

    `protected` files are migrated but not written; with `only`, files outside it are skipped.
    `found`: the files, when the caller has discovered them (with each file's configuration,
    whose rules `settings` hold). `cache`: results kept by earlier runs, and where to keep
    this one's. `ends`: each result says where its findings end (`FileResult.ends`), for a
    report that prints it.
    """
    if found is None:
        found = discover(paths, excludes, accept_for(python, audit))
    if not python:  # named on the command line: taken whatever they are, by `apply`
        found.skipped += [f"{f}: not a file `scan` reads (use `check` for code)"
                          for f in found.files if not accepts(False)(f)]
        found.files = [f for f in found.files if accepts(False)(f)]
    if only is not None:
        found.files = [f for f in found.files if f.resolve() in only]
    job = Job(registry, write, keep_sources, per_file_ignores, protected, python, audit,
              settings, cache, ends)
    results: list[FileResult] = []
    interrupts = Interrupts()
    with fewer_collections(), interrupts.installed(), contextlib.closing(
            _map(_phases(found.files, write), job, jobs)) as migrated:
        try:
            for done, result in enumerate(migrated, start=1):
                with interrupts.held():
                    results.append(finish(result, job))
                if progress is not None:
                    progress(done, len(found.files))
        except KeyboardInterrupt:
            interrupts.received = interrupts.received or signal.SIGINT
    if not audit and not interrupts.received:
        results = _with_helper_modules(results, registry, write, keep_sources, protected)
    results.sort(key=lambda r: r.path)
    return RunResult(tuple(results), tuple(found.errors), tuple(found.skipped), written=write,
                     strict=strict, interrupted=interrupts.received)


def _with_helper_modules(results: list[FileResult], registry: Registry, write: bool,
                         keep_sources: bool, protected: frozenset[Path]) -> list[FileResult]:
    """The results, with the helpers modules (`helpers-module`) the migrated files import
    written or shown, in place of the module's own result if the run read it too. The
    registry's helpers are asked only then: asking loads the rules."""
    if not any(r.helpers_module is not None for r in results):
        return results
    from neuron_migrate.helpers_module import module_results

    modules = module_results(results, registry.helper_table, write, keep_sources, protected)
    if not modules:
        return results
    paths = {Path(m.path).resolve() for m in modules}
    return [r for r in results if Path(r.path).resolve() not in paths] + modules


def _phases(files: list[Path], write: bool) -> list[list[Path]]:
    """In apply mode, every other file is done before any Python file is written: a launch
    line (NM816) is rewritten by what the script it starts says before its migration."""
    if not write:
        return [files]
    phases = ([f for f in files if f.suffix != ".py"], [f for f in files if f.suffix == ".py"])
    return [phase for phase in phases if phase]


def _map(phases: list[list[Path]], job: Job, jobs: int) -> Iterator[FileResult]:
    """Each file migrated, in order. The caller writes a result before it asks for the next,
    and a phase is finished before the next is handed out."""
    if job.cache is not None:
        yield from job.cache.merged(phases, job.options_for,
                                    lambda missing: _migrated(missing, job, jobs))
    else:
        yield from _migrated(phases, job, jobs)


def _migrated(phases: list[list[Path]], job: Job, jobs: int) -> Iterator[FileResult]:
    from neuron_migrate.schedule import migrated

    return migrated(phases, job, jobs)
