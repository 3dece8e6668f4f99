"""Where each file of a run is migrated: in this process, or in worker processes.

Most files of a repository are decided by a substring search (no XLA-era token, nothing to
migrate), which costs less than sending the file to a worker and its result back. So this
process reads every file once and settles those itself; only the files that need the
engine go to workers, and the workers start only once there are enough of them to be worth
a pool (`POOL_FROM`). A small repository, or a hook's run over a few files, is then over
before a pool would have started, and no file is read twice. The results, and their order,
are the same whichever way a file went."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Union

from neuron_migrate import deps
from neuron_migrate.job import Job
from neuron_migrate.model import FileResult
from neuron_migrate.per_file import process_data, read

if TYPE_CHECKING:
    from concurrent.futures import Future

    from neuron_migrate.workers import LazyPool

POOL_FROM = 4
"""Files needing the engine from which a run with several jobs starts its workers. Below
it, starting and feeding a pool costs about what the files' share of a second core would
save (a Python file or notebook that needs the engine takes tens of milliseconds; forking the
workers, sending them files and reading their results back, about as much)."""
OTHER_FILE = 1 / 8
"""What a dependency file (`deps.is_dependency_file`) counts for towards `POOL_FROM`: a
requirements file, a shell script, a Dockerfile or a YAML file is scanned line by line in a
few milliseconds, so a repository whose only such files are a handful of CI scripts and one
XLA-era module is done before a pool would have started."""

Slot = Union[FileResult, "Future[FileResult]", tuple[Path, bytes]]
"""A file's place in the order: its result, a worker's result to come, or a file that
needs the engine and has not been handed out yet."""


def migrated(phases: list[list[Path]], job: Job, jobs: int) -> Iterator[FileResult]:
    """Each file migrated, in order. The caller writes a result before it asks for the next,
    and a phase is finished before the next is handed out."""
    from neuron_migrate.workers import LazyPool

    pool = LazyPool(job, jobs) if jobs > 1 else None
    try:
        for phase in phases:
            yield from _phase(phase, job, pool)
    except BaseException:  # Ctrl-C, or the caller stopped: workers only compute, stop them
        if pool is not None:
            pool.stop()
        raise
    if pool is not None:
        pool.shutdown()


def _phase(phase: list[Path], job: Job, pool: LazyPool | None) -> Iterator[FileResult]:
    slots: list[Slot] = []
    waiting: list[int] = []  # the slots of files that need the engine, not handed out yet
    work = 0.0  # what they weigh together (`OTHER_FILE`)
    for position, path in enumerate(phase):
        data = read(path, job)
        if isinstance(data, FileResult):
            slots.append(data)
        elif not needs_engine(path, data, job):
            slots.append(process_data(path, data, job))
        else:
            waiting.append(len(slots))
            slots.append((path, data))
            work += OTHER_FILE if deps.is_dependency_file(path) else 1
            if pool is not None and (pool.started or work >= POOL_FROM):
                pool.start(most=len(waiting) + len(phase) - position - 1)
                for index in waiting:
                    slots[index] = pool.submit(*slots[index])  # type: ignore[misc]
                waiting.clear()
    for slot in slots:
        if isinstance(slot, FileResult):
            yield slot
        elif isinstance(slot, tuple):
            yield process_data(*slot, job)
        else:
            yield slot.result()


def needs_engine(path: Path, data: bytes, job: Job) -> bool:
    """Whether a file may need more than a token search (the results are the same either
    way: this only decides where it is migrated)."""
    # a launch line (NM816) is read; a notebook names python in its metadata, not so
    launches = b"python " in data if path.suffix == ".ipynb" else \
        path.suffix != ".py" and b"python" in data
    if job.audit:
        from neuron_migrate.analysis.readiness import mentions_torch

        return mentions_torch(data)
    registry = job.rules_of(path)[0]
    cuda = "cuda" in registry.options.sources
    return registry.prefilter(data) or deps.mentions_neuron(data, cuda) or launches
