"""The result cache's packs: one file per command holding the entries and stamps its last run
took, read instead of one file per entry. A pack is only a copy of entries, so whatever is
wrong with it (damaged, edited, outdated, raced by another run) costs reads, never a result
the key would not give."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import cli
from neuron_migrate.cache import stamps as stamps_module
from neuron_migrate.cache.location import DEFAULT_NAME
from neuron_migrate.cache.pack import FORMAT, Pack, pack_name
from neuron_migrate.cache.store import Store
from test_cache_runs import (FILES, MODEL, Computed, _entries, _findings, _packs, _same,
                             cached)

__all__ = ["cached"]  # the fixture, shared


@pytest.fixture
def settled(cached: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Stamps remembered at once (a real run waits until they are a few seconds old)."""
    monkeypatch.setattr(stamps_module, "SETTLED", -1.0)
    return cached


def _folder(tree: Path) -> Path:
    return tree.parent / DEFAULT_NAME


def _json(run_args: tuple[str, ...] = ()) -> tuple[str, ...]:
    return ("check", "repo", "-j", "1", "--format", "json", *run_args)


def test_a_warm_run_takes_everything_from_its_pack(settled: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    uncached = cli(*_json(), "--no-cache")
    cli(*_json())
    [pack] = _packs(_folder(settled))
    document = json.loads(pack.read_bytes())
    assert document["format"] == FORMAT and len(document["entries"]) == FILES
    assert str(settled / "pkg" / "model.py") in document["stamps"]
    for entry in _entries(_folder(settled)):
        entry.unlink()  # the pack alone answers
    computed = Computed(monkeypatch)
    _same(cli(*_json()), uncached)
    assert computed.taken() == []


def test_an_unchanged_run_leaves_its_pack_as_it_was(settled: Path) -> None:
    cli(*_json())
    [pack] = _packs(_folder(settled))
    before = pack.read_bytes()
    os.utime(pack, (1_000_000, 1_000_000))  # an hour old and more: the run marks it used
    cli(*_json())
    assert pack.read_bytes() == before
    assert pack.stat().st_mtime > 1_000_000


@pytest.mark.parametrize("content", [b"", b"{", b"\0" * 10, b"[]", b'{"format": 999}',
                                     b'{"format": 1, "entries": [], "stamps": {}}',
                                     b'{"format": 1, "entries": {"ab": 3}, "stamps": 4}'])
def test_a_damaged_pack_is_no_pack(settled: Path, monkeypatch: pytest.MonkeyPatch,
                                   content: bytes) -> None:
    uncached = cli(*_json(), "--no-cache")
    cli(*_json())
    [pack] = _packs(_folder(settled))
    pack.write_bytes(content)
    computed = Computed(monkeypatch)
    _same(cli(*_json()), uncached)
    assert computed.taken() == []  # each entry read from its own file
    assert json.loads(pack.read_bytes())["format"] == FORMAT  # and the pack written again


def test_a_pack_document_that_is_not_its_entry_is_a_miss(settled: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The pack's copy of model.py's entry is given clean.py's result, and train.py's copy
    a result with findings it never had: both are recomputed, and the pack mended."""
    uncached = cli(*_json(), "--no-cache")
    cli(*_json())
    [pack] = _packs(_folder(settled))
    document = json.loads(pack.read_bytes())
    by_path = {entry["result"]["path"]: name for name, entry in document["entries"].items()}
    model, clean, train = (by_path[os.path.join("repo", *name.split("/"))]
                           for name in ("pkg/model.py", "pkg/clean.py", "train.py"))
    document["entries"][model] = {**document["entries"][clean], "key": model}
    document["entries"][train]["result"]["findings"] = [[None, 1, 1, "NM101", "fix", "x"]]
    document["entries"][train]["key"] = "another key"
    pack.write_text(json.dumps(document))
    computed = Computed(monkeypatch)
    _same(cli(*_json()), uncached)
    assert computed.taken() == ["model.py", "train.py"]
    _same(cli(*_json()), uncached)
    assert computed.taken() == []


def test_an_edited_file_misses_and_its_pack_follows(settled: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    cli(*_json())
    computed = Computed(monkeypatch)
    (settled / "pkg" / "model.py").write_text(MODEL.replace("xm.mark_step()\n", ""))
    after = cli(*_json())
    assert computed.taken() == ["model.py"]
    assert "NM110" not in {rule for _, rule in _findings(after, "model.py")}
    [pack] = _packs(_folder(settled))
    document = json.loads(pack.read_bytes())
    assert len(document["entries"]) == FILES  # the new entry in place of the old one
    _same(cli(*_json()), after)
    assert computed.taken() == []
    _same(after, cli(*_json(), "--no-cache"))


def test_a_changed_stamp_is_read_again(settled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file rewritten with the same size and modification time is read (its stamp's
    status-change time moved), whatever the pack remembers of it."""
    cli(*_json())
    model = settled / "pkg" / "model.py"
    status = model.stat()
    model.write_text(MODEL.replace("xm.mark_step()", "xm.mark_step  "))
    os.utime(model, ns=(status.st_atime_ns, status.st_mtime_ns))
    computed = Computed(monkeypatch)
    cli(*_json())
    assert computed.taken() == ["model.py"]


def test_each_command_keeps_a_pack_of_its_own(settled: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    cli(*_json())
    cli("check", "repo/pkg/model.py", "-j", "1", "--format", "json")
    cli("check", "repo", "-j", "1")
    assert len(_packs(_folder(settled))) == 3
    computed = Computed(monkeypatch)
    for run in (_json(), ("check", "repo/pkg/model.py", "-j", "1", "--format", "json")):
        cli(*run)
    assert computed.taken() == []


def test_two_writers_of_one_pack_leave_a_whole_one(tmp_path: Path) -> None:
    """Two runs of the same command finishing together: each pack is written whole and
    renamed into place, so the one left is one run's, readable, and no temporary remains."""
    store = Store.opened(tmp_path)
    assert store is not None
    name = pack_name("mode=check\0/here\0repo")
    first, second = Pack(store, name), Pack(store, name)
    first.keep("ab", {"key": "ab", "result": {"path": "a.py"}})
    second.keep("cd", {"key": "cd", "result": {"path": "c.py"}})
    first.save({"/here/repo/a.py": [1, 2, 3, 4, "d"]})
    second.save({})
    again = Pack(store, name)
    assert again.entries == {"cd": {"key": "cd", "result": {"path": "c.py"}}}
    assert again.document("ab") is None and again.stamps == {}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("pack")] == [name]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_pack_is_written_only_when_it_changes(tmp_path: Path) -> None:
    store = Store.opened(tmp_path)
    assert store is not None
    name = pack_name("mode=check\0/here\0repo")
    document = {"key": "ab", "result": {"path": "a.py"}}
    first = Pack(store, name)
    first.keep("ab", document)
    first.save({})
    assert store.added == 1
    again = Pack(store, name)
    again.keep("ab", again.document("ab"))  # type: ignore[arg-type]
    again.save({})
    assert store.added == 1  # the same entries and stamps: nothing written
    changed = Pack(store, name)
    changed.keep("ab", {**document})  # an entry read from its file, not the pack's copy
    changed.save({})
    assert store.added == 2


def test_a_cold_run_packs_what_it_computed_without_reading_it_back(
        settled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a worker's results are read back from their entries: the main process hands the
    pack each document it writes (each file is then read once, by its look-up)."""
    reads: list[str] = []
    original = Store.get

    def counted(store: Store, name: str) -> object:
        reads.append(name)
        return original(store, name)

    monkeypatch.setattr(Store, "get", counted)
    cli(*_json())
    [pack] = _packs(_folder(settled))
    assert len(json.loads(pack.read_bytes())["entries"]) == FILES
    entries = [name for name in reads if not name.startswith("pack-")]
    assert len(entries) == len(set(entries)) == FILES
