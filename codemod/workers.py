"""The worker processes of a run with several jobs: how they start (forked once the rules
and the engine are loaded, so each inherits them), how they take files, and how they are
stopped without losing or cutting a result. Workers only compute; the main process writes."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from neuron_migrate.job import Job
from neuron_migrate.model import FileResult
from neuron_migrate.per_file import process_data
from neuron_migrate.registry import DeferredRegistry

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

_JOB: Job | None = None


STOP_SIGNAL: int | None = getattr(signal, "SIGUSR1", None)
"""What the main process sends a worker to make it drop its files. Killing a worker could
cut a result it was sending in half, and the pool's reader would then wait for the rest
forever (a run that never ends after Ctrl-C)."""


class WorkerStop:
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


def start_worker(job: Job) -> None:
    global _JOB
    _JOB = job
    # Ctrl-C reaches the whole process group: the main process alone decides what happens,
    # and stops its workers itself (or the kernel does, when it dies)
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)
    if STOP_SIGNAL is not None:
        signal.signal(STOP_SIGNAL, WorkerStop.handle)
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


def work(path: Path, data: bytes) -> FileResult:
    """One file, in a worker: with the job the worker was started with, abandoned at once
    if the run stops."""
    assert _JOB is not None
    with WorkerStop.computing_one():
        return process_data(path, data, _JOB)


class LazyPool:
    """The run's workers, started only once the run has enough files for them
    (`neuron_migrate.schedule`): a run whose files are all settled by a token search never
    forks one."""

    def __init__(self, job: Job, jobs: int) -> None:
        self.job = job
        self.jobs = jobs
        self.pool: ProcessPoolExecutor | None = None

    @property
    def started(self) -> bool:
        return self.pool is not None

    def start(self, most: int) -> None:
        """Start the workers, no more than `most` (the files left for them), if not yet."""
        if self.pool is not None:
            return
        from concurrent.futures import ProcessPoolExecutor  # only a run over files loads it

        preload(self.job)
        self.pool = ProcessPoolExecutor(max_workers=max(1, min(self.jobs, most)),
                                        initializer=start_worker, initargs=(self.job,))

    def submit(self, path: Path, data: bytes) -> Future[FileResult]:
        """The file handed to a worker with the bytes this process read: never read twice."""
        assert self.pool is not None
        return self.pool.submit(work, path, data)

    def stop(self) -> None:
        if self.pool is not None:
            _stop(self.pool)

    def shutdown(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def preload(job: Job) -> None:
    """Load the rules and the engine (LibCST) here, before the workers start: forked, they
    inherit them instead of each importing them again, and the report, which reads the
    rules' texts, would otherwise load them in this process once the workers are done, a
    pause at the end of every run. Objects that exist now are kept out of collections, as at
    the start of the run (`neuron_migrate.collector.fewer_collections`)."""
    from neuron_migrate.engine import migrate  # noqa: F401  (LibCST, the engine)

    if isinstance(job.registry, DeferredRegistry):
        job.registry.loaded
    if job.settings is not None:
        job.settings.preload()
    gc.freeze()


def _stop(pool: ProcessPoolExecutor) -> None:
    """Stop the workers now rather than after their current chunk of files (a shutdown
    waits for it): nothing they hold is worth keeping. They are asked (`WorkerStop`), not
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
