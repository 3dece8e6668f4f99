"""The cyclic collector during a run: off while one file is migrated, and the cycles that
file left collected once it is done (neuron_migrate.collector.collected_after), so memory does not
grow with the number of files."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from pathlib import Path

import pytest

from neuron_migrate import collector, per_file
from neuron_migrate.model import FileResult, Options
from neuron_migrate.registry import Registry
from neuron_migrate.job import Job


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None
        self.payload: list[list[int]] = []


def _job(audit: bool = False) -> Job:
    return Job(Registry([], Options()), write=False, keep_sources=False, audit=audit)


def _cyclic_migration(seen: dict[str, object], garbage: int = 5_000
                      ) -> Callable[..., FileResult]:
    """A stand-in for `migrate_bytes` that records whether the collector ran while it worked
    and leaves a cycle behind it, holding more objects than a collection waits for."""

    def migrate(path: Path, *_: object) -> FileResult:
        seen["enabled"] = gc.isenabled()
        before = gc.get_stats()[0]["collections"]
        first = _Node()
        first.other = second = _Node()
        second.other = first
        first.payload = [[] for _ in range(collector.YOUNG + 1_000)]  # freed with the cycle
        seen["cycle"] = weakref.ref(first)
        del first, second
        _ = [[] for _ in range(garbage)]  # enough young objects to trigger a collection
        seen["collections"] = gc.get_stats()[0]["collections"] - before
        return FileResult(str(path))

    return migrate


def _process_with_thresholds(tmp_path: Path, thresholds: tuple[int, int, int],
                             audit: bool = False) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    saved = gc.get_threshold()
    gc.set_threshold(*thresholds)
    try:
        per_file.process(tmp_path / "a.py", _job(audit))
    finally:
        gc.set_threshold(*saved)


@pytest.mark.parametrize("audit", [False, True], ids=["migrate", "audit"])
def test_no_collection_while_a_file_is_migrated(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path, audit: bool) -> None:
    seen: dict[str, object] = {}
    monkeypatch.setattr(per_file, "_audit" if audit else "migrate_bytes",
                        _cyclic_migration(seen, garbage=60_000))
    _process_with_thresholds(tmp_path, (1_000, 10, 10), audit)  # would collect many times
    assert seen["enabled"] is False
    assert seen["collections"] == 0
    assert gc.isenabled()


def test_the_cycles_a_file_left_are_freed_once_it_is_done(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    seen: dict[str, object] = {}
    monkeypatch.setattr(per_file, "migrate_bytes", _cyclic_migration(seen))
    _process_with_thresholds(tmp_path, (10**9, 10**6, 10**6))  # never on its own
    assert seen["cycle"]() is None  # type: ignore[operator]


def test_a_collector_the_caller_turned_off_stays_off(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    seen: dict[str, object] = {}
    monkeypatch.setattr(per_file, "migrate_bytes", _cyclic_migration(seen))
    (tmp_path / "a.py").write_text("x = 1\n")
    gc.disable()
    try:
        per_file.process(tmp_path / "a.py", _job())
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.collect()
