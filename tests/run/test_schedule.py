"""Where a run migrates its files: the files a token search settles are done in the main
process, and worker processes start only once enough files need the engine
(neuron_migrate.schedule). Whichever way, each file is read once and the results are those
of a run with one job."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_migrate import migrate_file, runner, schedule, workers
from neuron_migrate.job import Job
from neuron_migrate.model import Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules

OLD = "import torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\nxm.mark_step()\n"
CLEAN = "import torch\n\nx = torch.ones(2)\n"


def _tree(root: Path, old: int, clean: int) -> None:
    for i in range(old):
        (root / f"old{i}.py").write_text(OLD)
    for i in range(clean):
        (root / f"clean{i}.py").write_text(CLEAN)
    (root / "requirements.txt").write_text("numpy\n")


def _job() -> Job:
    return Job(Registry(all_rules(), Options()), write=False, keep_sources=False)


def _run(root: Path, jobs: int, write: bool = False) -> runner.RunResult:
    return runner.run([root], Registry(all_rules(), Options()), write=write, jobs=jobs,
                      keep_sources=True)


@pytest.fixture
def starts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many workers each pool of the run started with (the pool still starts)."""
    started: list[int] = []
    real = workers.LazyPool.start

    def start(self: workers.LazyPool, most: int) -> None:
        if not self.started:
            started.append(min(self.jobs, most))
        real(self, most)

    monkeypatch.setattr(workers.LazyPool, "start", start)
    return started


def test_a_run_with_one_file_for_the_engine_starts_no_worker(tmp_path: Path,
                                                            starts: list[int]) -> None:
    _tree(tmp_path, old=1, clean=12)
    result = _run(tmp_path, jobs=2)
    assert starts == []
    assert result.files == _run(tmp_path, jobs=1).files
    assert any(r.changed for r in result.files)


def test_enough_files_for_the_engine_start_the_workers_once(tmp_path: Path,
                                                           starts: list[int]) -> None:
    _tree(tmp_path, old=schedule.POOL_FROM + 1, clean=6)
    result = _run(tmp_path, jobs=2)
    assert starts == [2]
    assert result.files == _run(tmp_path, jobs=1).files
    assert sum(r.changed for r in result.files) == schedule.POOL_FROM + 1


def test_files_scanned_line_by_line_weigh_less_than_python_files(tmp_path: Path,
                                                                starts: list[int]) -> None:
    """A launch line makes a shell script a file for the engine, but a cheap one: one XLA-era
    module and a few CI scripts start no pool; enough scripts to weigh `POOL_FROM` do."""
    _tree(tmp_path, old=1, clean=2)
    for i in range(schedule.POOL_FROM + 1):
        (tmp_path / f"run{i}.sh").write_text("python old0.py --epochs 1\n")
    assert all(schedule.needs_engine(p, p.read_bytes(), _job()) for p in tmp_path.glob("*.sh"))
    result = _run(tmp_path, jobs=2)
    assert starts == []
    assert result.files == _run(tmp_path, jobs=1).files
    scripts = int(schedule.POOL_FROM / schedule.OTHER_FILE)
    for i in range(schedule.POOL_FROM + 1, scripts):
        (tmp_path / f"run{i}.sh").write_text("python old0.py --epochs 1\n")
    assert _run(tmp_path, jobs=2).files == _run(tmp_path, jobs=1).files
    assert starts == [2]


def test_each_file_is_read_once_even_by_workers(tmp_path: Path, starts: list[int],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers get the bytes the main process read. Reads are logged to a file, since
    the workers are other processes (forked: they inherit the logging reader)."""
    tree, log = tmp_path / "tree", tmp_path / "reads.log"
    tree.mkdir()
    _tree(tree, old=schedule.POOL_FROM, clean=3)
    real = migrate_file.read_bounded

    def read_bounded(path: Path, limit: int) -> bytes:
        with log.open("a") as reads:
            reads.write(f"{Path(path).name}\n")
        return real(path, limit)

    monkeypatch.setattr(migrate_file, "read_bounded", read_bounded)
    _run(tree, jobs=2)
    assert starts == [2]
    names = log.read_text().split()
    assert sorted(names) == sorted(p.name for p in tree.iterdir())


def test_apply_writes_with_few_files_for_the_engine(tmp_path: Path, starts: list[int]) -> None:
    _tree(tmp_path, old=2, clean=2)
    result = _run(tmp_path, jobs=2, write=True)
    assert starts == [] and not result.failed
    assert "xla_model" not in (tmp_path / "old0.py").read_text()
    assert (tmp_path / "clean0.py").read_text() == CLEAN
