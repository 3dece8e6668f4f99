"""A whole run: discover, migrate each file (in worker processes with -j), write in apply
mode, collect results in a stable order."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pathspec

from neuron_migrate import deps
from neuron_migrate.files.discover import Discovery, discover
from neuron_migrate.files.bounded import SOURCE_LIMIT
from neuron_migrate.files.fileio import WriteError, read_bytes, write_atomic
from neuron_migrate.files.patterns import gitignore_spec
from neuron_migrate.model import BY_POSITION, FileResult, Finding, Kind, Options
from neuron_migrate.registry import DeferredRegistry, Registry
from neuron_migrate.target import named_instances
from neuron_migrate.wording import as_written

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    from neuron_migrate.cache.results import ResultCache

    from neuron_migrate.settings import FileSettings

Progress = Callable[[int, int], None]
"""Called with (files done, files in all) as the run advances."""


@dataclass(frozen=True)
class RunResult:
    files: tuple[FileResult, ...]
    errors: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    written: bool = False
    strict: bool = False  # after writing, what could not be fixed still fails (scan --fix)
    interrupted: int = 0  # the signal (Ctrl-C, SIGTERM) that stopped the run: `files` are
    # those done (and written) before it

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
        if self.interrupted:
            return 128 + self.interrupted  # as a shell reports a signal: 130 for Ctrl-C
        if self.failed:
            return 2
        if self.written and not self.strict:
            return 0
        if self.written:
            return 1 if any(not f.applied for f in self.findings) else 0
        return 1 if self.needs_attention else 0


@dataclass(frozen=True)
class Job:
    """What every worker needs to process a file; sent once per worker process."""

    registry: Registry
    write: bool
    keep_sources: bool
    per_file_ignores: PerFileIgnores | None = None
    protected: frozenset[Path] = frozenset()  # files with uncommitted changes: not written
    code: bool = True  # Python code migrated too; `scan` reads dependencies only
    audit: bool = False  # `audit`: the readiness rules only, on every file that uses torch
    settings: FileSettings | None = None  # each file's configuration, when they differ
    cache: ResultCache | None = None  # results kept from earlier runs (`neuron_migrate.cache`)

    @property
    def generate(self) -> bool:
        """Whether new files are generated: to write them or show them. A plain check only
        needs the findings."""
        return self.write or self.keep_sources

    def rules_of(self, path: Path) -> tuple[Registry, PerFileIgnores | None]:
        """The registry of the file's configuration, and its per-file-ignores."""
        if self.settings is None:
            return self.registry, self.per_file_ignores
        settings = self.settings.of(path)
        return settings.registry, settings.per_file_ignores

    def options_for(self, path: Path) -> Options:
        """The options `registry_for` migrates the file with, without loading any rule."""
        registry, per_file_ignores = self.rules_of(path)
        codes = per_file_ignores.codes(path) if per_file_ignores is not None else frozenset()
        if not codes:
            return registry.options
        return dataclasses.replace(registry.options, ignore=registry.options.ignore | codes)

    def registry_for(self, path: Path) -> Registry:
        registry, per_file_ignores = self.rules_of(path)
        if per_file_ignores is None:
            return registry
        codes = per_file_ignores.codes(path)
        if not codes:
            return registry
        return _registry_ignoring(registry, codes)


@dataclass(frozen=True)
class PerFileIgnores:
    """`per-file-ignores` globs, anchored at the configuration file's folder."""

    base: Path
    entries: tuple[tuple[pathspec.GitIgnoreSpec, tuple[str, ...]], ...]

    @classmethod
    def of(cls, base: Path, globs: tuple[tuple[str, tuple[str, ...]], ...]) -> PerFileIgnores:
        """Compiled once per run: `codes` is called for every file."""
        return cls(base, tuple((gitignore_spec([glob]).spec, codes) for glob, codes in globs))

    def codes(self, path: Path) -> frozenset[str]:
        try:
            relative = path.resolve().relative_to(self.base).as_posix()
        except ValueError:
            return frozenset()
        return frozenset(code for spec, codes in self.entries if spec.match_file(relative)
                         for code in codes)


@functools.lru_cache(maxsize=64)
def _registry_ignoring(registry: Registry, codes: frozenset[str]) -> Registry:
    options = dataclasses.replace(registry.options, ignore=registry.options.ignore | codes)
    return Registry(registry.all_rules, options)


_JOB: Job | None = None


STOP_SIGNAL: int | None = getattr(signal, "SIGUSR1", None)
"""What the main process sends a worker to make it drop its files. Killing a worker could
cut a result it was sending in half, and the pool's reader would then wait for the rest
forever (a run that never ends after Ctrl-C)."""


class _WorkerStop:
    """A worker's side of a stop: the file being computed is abandoned at once (an exception
    it sends back like any other), and every file handed out after it is refused unread. A
    result being sent is never cut: the signal only raises while a file is computed."""

    requested = False
    computing = False

    @classmethod
    def handle(cls, signum: int, frame: object) -> None:
        cls.requested = True
        if cls.computing:
            cls.computing = False
            raise KeyboardInterrupt

    @classmethod
    @contextlib.contextmanager
    def computing_one(cls) -> Iterator[None]:
        if cls.requested:
            raise KeyboardInterrupt
        cls.computing = True
        try:
            yield
        finally:
            cls.computing = False


def _start_worker(job: Job) -> None:
    global _JOB
    _JOB = job
    # Ctrl-C reaches the whole process group: the main process alone decides what happens,
    # and stops its workers itself (or the kernel does, when it dies)
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)
    if STOP_SIGNAL is not None:
        signal.signal(STOP_SIGNAL, _WorkerStop.handle)
    _die_with_parent()


def _die_with_parent() -> None:
    """Once the run that started a worker is gone (killed, even with SIGKILL), the worker
    must stop at once rather than go on using the machine for minutes (only the main process
    writes files). Linux tells the kernel so; elsewhere the pool's own shutdown is all."""
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the request was made
        os._exit(1)


def process(path: Path, job: Job | None = None) -> FileResult:
    """Migrate one file. Runs in a worker process: workers only compute, the main process
    writes (`finish`), so an interrupted run stops its workers and nothing more is written."""
    if job is not None:
        return _process(path, job)
    assert _JOB is not None
    with _WorkerStop.computing_one():
        return _process(path, _JOB)


def _process(path: Path, job: Job) -> FileResult:
    data = _read(path, "not read" if job.audit else "not migrated")
    if isinstance(data, FileResult):
        return data
    if job.cache is None:
        return _computed(path, data, job)
    return job.cache.computed(path, data, job.options_for(path),
                              lambda: _computed(path, data, job))


def _computed(path: Path, data: bytes, job: Job) -> FileResult:
    with _collected_after():
        if job.audit:
            return _audit(path, data, job)
        result = migrate_bytes(str(path), data, job.registry_for(path), job.generate, job.code)
    if not job.keep_sources and (not result.changed or not job.write) and \
            result.original is not None:  # less to send
        result = dataclasses.replace(result, original=None, new_source=None,
                                     modified=result.changed)
    return result


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


class _Interrupts:
    """Ctrl-C (or SIGTERM) during a run: raised as KeyboardInterrupt, except while a file is
    being written and recorded, where it waits until the file is whole (written or not at
    all, its temporary file gone) and listed among the results. A flag rather than a blocked
    signal: the interpreter may take the signal on any thread and still raises it in the
    main one."""

    USUAL = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}

    def __init__(self) -> None:
        self.holding = False
        self.received = 0

    def _handle(self, signum: int, frame: object) -> None:
        self.received = self.received or signum
        if not self.holding:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        main = threading.current_thread() is threading.main_thread()
        # a signal the caller ignores or handles itself is left as it is
        taken = [s for s, usual in self.USUAL.items() if main and signal.getsignal(s) is usual]
        for number in taken:
            signal.signal(number, self._handle)
        try:
            yield
        finally:
            for number in taken:
                signal.signal(number, self.USUAL[number])

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
        if self.received:
            raise KeyboardInterrupt


MAX_BYTES = SOURCE_LIMIT
"""Larger files are generated or data, not code a person wrote: skipped, with a message."""


def migrate_path(path: Path, registry: Registry, generate: bool = True,
                 code: bool = True) -> FileResult:
    """One file, by kind: Python code, a notebook, or a dependency/container file. Without
    `code`, only dependency findings: a notebook's install lines, a setup.py's pins."""
    data = _read(path, "not migrated")
    if isinstance(data, FileResult):
        return data
    return migrate_bytes(str(path), data, registry, generate, code)


def _read(path: Path, skipped: str) -> bytes | FileResult:
    """The file's bytes, or the result that says why there are none: too large (`skipped`
    says what is then not done) or unreadable."""
    name = str(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            return FileResult(name, skipped=f"{name}: larger than {MAX_BYTES // 2**20} MiB, "
                                            f"{skipped}")
    except OSError:
        pass  # reading it reports the problem
    try:
        return read_bytes(path)
    except WriteError as error:
        return FileResult(name, error=str(error))


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
    `migrate_source` would return this same result."""
    if not registry.prefilter(data):
        return FileResult(name, original=data)
    return migrate_source(name, data, registry, generate=generate)


def migrate_source(path: str, data: bytes, registry: Registry, options: Options | None = None,
                   generate: bool = True) -> FileResult:
    """`neuron_migrate.engine.migrate.migrate_source`, imported on first use: it loads LibCST."""
    from neuron_migrate.engine import migrate

    return migrate.migrate_source(path, data, registry, options, generate)


def _notebook(name: str, data: bytes, registry: Registry, code: bool) -> FileResult:
    from neuron_migrate.notebooks.migrate import migrate_notebook

    return migrate_notebook(name, data, registry, migrate_data, code)


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
        cache: ResultCache | None = None) -> RunResult:
    """Migrate every file under `paths`. The result does not depend on `jobs`.

    `protected` files are migrated but not written; with `only`, files outside it are skipped.
    `found`: the files, when the caller has discovered them (with each file's configuration,
    whose rules `settings` hold). `cache`: results kept by earlier runs, and where to keep
    this one's.
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
              settings, cache)
    results: list[FileResult] = []
    interrupts = _Interrupts()
    with _fewer_collections(), interrupts.installed(), contextlib.closing(
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
        results = _with_helper_modules(results, write, keep_sources, protected)
    results.sort(key=lambda r: r.path)
    return RunResult(tuple(results), tuple(found.errors), tuple(found.skipped), written=write,
                     strict=strict, interrupted=interrupts.received)


def _with_helper_modules(results: list[FileResult], write: bool, keep_sources: bool,
                         protected: frozenset[Path]) -> list[FileResult]:
    """The results, with the helpers modules (`helpers-module`) the migrated files import
    written or shown, in place of the module's own result if the run read it too."""
    from neuron_migrate.helpers_module import module_results

    modules = module_results(results, write, keep_sources, protected)
    if not modules:
        return results
    paths = {Path(m.path).resolve() for m in modules}
    return [r for r in results if Path(r.path).resolve() not in paths] + modules


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """Each full collection walked every object imported at start-up: objects that exist now
    are frozen out of collections (worker processes inherit that). Files are migrated with the
    collector off (`_collected_after`); between them (results arriving, the report) young
    objects are collected less often. Memory stays flat: files are still processed one at a
    time."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


@contextlib.contextmanager
def _collected_after() -> Iterator[None]:
    """No cyclic collection while one file is migrated; the young generations are collected
    once it is done. A file's syntax trees stay alive until the end of its migration, so
    every collection during it walked them again to find nothing (tens of thousands of nodes
    in a long file, each collection); the few cycles a file leaves are freed at its end, so
    memory still does not grow with the tree."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        if gc.get_count()[0] > _YOUNG:
            gc.collect(1)


_YOUNG = 2_000
"""Objects allocated (and not freed) during a file above which it is worth a collection: a
file no rule reads leaves a handful."""


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
    total = sum(len(phase) for phase in phases)
    if jobs <= 1 or total < 2 or not any(_needs_engine(path, job)
                                         for phase in phases for path in phase):
        for phase in phases:
            for path in phase:
                yield process(path, job)
        return
    from concurrent.futures import ProcessPoolExecutor  # only a run over files loads it

    _preload(job)
    workers = min(jobs, total)
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_start_worker, initargs=(job,))
    try:
        for phase in phases:
            chunk = max(1, min(16, len(phase) // (workers * 8)))
            yield from pool.map(process, phase, chunksize=chunk)
    except BaseException:  # Ctrl-C, or the caller stopped: workers only compute, stop them
        _stop(pool)
        raise
    pool.shutdown()


def _preload(job: Job) -> None:
    """Load the rules and the engine (LibCST) here, before the workers start: forked, they
    inherit them instead of each importing them again, and the report, which reads the
    rules' texts, would otherwise load them in this process once the workers are done, a
    pause at the end of every run. Objects that exist now are kept out of collections, as at
    the start of the run (`_fewer_collections`)."""
    from neuron_migrate.engine import migrate  # noqa: F401  (LibCST, the engine)

    if isinstance(job.registry, DeferredRegistry):
        job.registry.loaded
    if job.settings is not None:
        job.settings.preload()
    gc.freeze()


def _stop(pool: ProcessPoolExecutor) -> None:
    """Stop the workers now rather than after their current chunk of files (a shutdown
    waits for it): nothing they hold is worth keeping. They are asked (`_WorkerStop`), not
    killed, so that no result is cut half-way through the pipe; but a worker inside one long
    call into C (a parser, a regular expression) takes the request only once that call
    returns, minutes later maybe, and is killed once `STOP_GRACE` has passed: it is not
    sending anything then."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    if STOP_SIGNAL is not None:
        for worker in processes:
            with contextlib.suppress(OSError, TypeError):
                os.kill(worker.pid, STOP_SIGNAL)
    pool.shutdown(wait=False, cancel_futures=True)
    deadline = time.monotonic() + STOP_GRACE
    for worker in processes:
        worker.join(max(0.0, deadline - time.monotonic()))
    for worker in processes:
        if worker.is_alive():
            with contextlib.suppress(OSError):
                worker.kill()
    pool.shutdown(wait=True)


STOP_GRACE = 1.0
"""Seconds stopped workers have to end by themselves before they are killed."""


def _needs_engine(path: Path, job: Job) -> bool:
    """Whether a file may need more than a token search. A hook's run over a few files with
    nothing XLA-era in them is over before worker processes would have started, so the
    workers start only once a file needs them (the results are the same either way)."""
    try:
        if path.stat().st_size > MAX_BYTES:
            return False
        data = path.read_bytes()
    except OSError:
        return False  # reading it again reports the problem
    # a launch line (NM816) is read; a notebook names python in its metadata, not so
    launches = b"python " in data if path.suffix == ".ipynb" else \
        path.suffix != ".py" and b"python" in data
    if job.audit:
        from neuron_migrate.analysis.readiness import mentions_torch

        return mentions_torch(data)
    registry = job.rules_of(path)[0]
    cuda = "cuda" in registry.options.sources
    return registry.prefilter(data) or deps.mentions_neuron(data, cuda) or launches


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
