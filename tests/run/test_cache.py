"""The result cache's parts: the store (atomic entries, defensive reads, its size bound, its
marker files), the codec (a result comes back as it went in) and the key."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from neuron_migrate.cache import codec, key, replay
from neuron_migrate.cache.store import STALE_TEMPORARY, Store
from neuron_migrate.model import FileResult, Finding, Kind, Options


def _result() -> FileResult:
    return FileResult(
        "pkg/train.py",
        findings=(Finding("pkg/train.py", 3, 5, "NM101", Kind.FIX, "`xm.xla_device()` → x",
                          applied=True),
                  Finding("pkg/train.py", 9, 1, "NM701", Kind.REVIEW, "look", cell=2,
                          cell_id="abc", file_line=40, suggestion="y = 1\n")),
        original=b"a = 1\r\n\xff\x00", new_source=b"b = 2\n", encoding="latin-1",
        instances=((4, "trn2.48xlarge"),), modified=False, note=None,
        helpers=("_neuron_save",), helpers_module="/abs/helpers.py",
        ends=((3, 5, 3, 20), (9, 1, 11, 4)))


def test_a_result_comes_back_equal_field_by_field() -> None:
    result = _result()
    document = json.loads(json.dumps(codec.encode(result)))
    assert codec.decode(document) == result
    plain = FileResult("x.py", modified=True, skipped=None)
    assert codec.decode(json.loads(json.dumps(codec.encode(plain)))) == plain


@pytest.mark.parametrize("document", [
    {"findings": [{"line": 1}]}, {"path": 3}, {"original": "not base64!"},
    {"path": "x.py", "unknown": 1}, {"path": "x.py", "findings": [{"path": "x.py", "line": 1,
     "column": 1, "rule_id": "NM1", "kind": "nonsense", "message": "m"}]},
    {"path": "x.py", "findings": [[None, 1, 1, "NM1", "nonsense", "m"]]},
    {"path": "x.py", "findings": [[None, 1, 1, "NM1", ["fix"], "m"]]},
    {"path": "x.py", "findings": [[None, 1, 1, "NM1", "fix"]]},
    {"path": "x.py", "ends": [[1, 1, 2]]}, {"path": "x.py", "ends": [[1, 1, 2, "3"]]}])
def test_a_document_it_did_not_write_is_refused(document: dict) -> None:
    with pytest.raises((KeyError, TypeError, ValueError)):
        codec.decode(document)


def test_the_store_marks_its_folder_for_git_and_backups(tmp_path: Path) -> None:
    store = Store.opened(tmp_path / "deep" / "cache")
    assert store is not None and store.writable
    assert (tmp_path / "deep/cache/.gitignore").read_text().splitlines()[-1] == "*"
    assert (tmp_path / "deep/cache/CACHEDIR.TAG").read_text().startswith(
        "Signature: 8a477f597d28d172789f06886806bc55")


def test_entries_are_written_whole_and_read_back(tmp_path: Path) -> None:
    store = Store.opened(tmp_path)
    assert store is not None
    store.put("ab12", {"key": "ab12", "result": {"path": "x"}})
    assert store.get("ab12") == {"key": "ab12", "result": {"path": "x"}}
    assert store.get("cd34") is None
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("content", [b"", b'{"key": "ab', b"\xff\xfe", b"[1, 2]", b"null",
                                     b"[" * 100_000])
def test_a_damaged_entry_is_a_miss(tmp_path: Path, content: bytes) -> None:
    store = Store.opened(tmp_path)
    assert store is not None
    (tmp_path / "ab12").write_bytes(content)
    assert store.get("ab12") is None


def test_a_folder_that_cannot_be_made_is_no_cache(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert Store.opened(blocker / "cache") is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_read_but_never_written(tmp_path: Path) -> None:
    store = Store.opened(tmp_path / "cache")
    assert store is not None
    store.put("ab12", {"key": "ab12"})
    (tmp_path / "cache").chmod(0o555)
    try:
        again = Store.opened(tmp_path / "cache")
        assert again is not None and not again.writable
        assert again.get("ab12") == {"key": "ab12"}
        again.put("cd34", {"key": "cd34"})  # no error
        assert again.get("cd34") is None
    finally:
        (tmp_path / "cache").chmod(0o755)


def test_past_its_limit_the_least_recently_used_entries_go(tmp_path: Path) -> None:
    store = Store.opened(tmp_path, limit=10_000)
    assert store is not None
    for number in range(40):
        store.put(f"{number:04x}", {"key": "x" * 1000})
        os.utime(tmp_path / f"{number:04x}", (1_000_000 + number, 1_000_000 + number))
    store.trim()
    kept = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith((".", "C")))
    assert sum((tmp_path / name).stat().st_size for name in kept) <= 10_000
    assert kept and kept == [f"{n:04x}" for n in range(40 - len(kept), 40)]  # the newest
    assert (tmp_path / ".gitignore").exists() and (tmp_path / "CACHEDIR.TAG").exists()


def test_a_run_that_only_read_does_not_trim(tmp_path: Path) -> None:
    store = Store.opened(tmp_path, limit=10)
    assert store is not None
    (tmp_path / "ab12").write_text(json.dumps({"key": "x" * 100}))
    store.trim()
    assert (tmp_path / "ab12").exists()


def test_temporary_files_of_killed_runs_are_removed_once_old(tmp_path: Path) -> None:
    store = Store.opened(tmp_path)
    assert store is not None
    old, recent = tmp_path / "ab12.99.0000.tmp", tmp_path / "cd34.98.0000.tmp"
    old.write_bytes(b'{"key": "ab')  # what a killed writer leaves: never read as an entry
    recent.write_bytes(b'{"key": "cd')
    os.utime(old, (1_000_000, 1_000_000))
    assert store.get("ab12") is None
    store.put("ef56", {"key": "ef56"})
    store.trim()
    assert not old.exists() and recent.exists()
    assert STALE_TEMPORARY > 60  # a slow run's file in the middle of its write is kept


def test_every_part_of_the_key_changes_the_entry(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    base = ("a.py", "digest of x = 1", Options(), "mode=check")
    name = key.entry_name(*base)
    assert key.entry_name(*base) == name
    changed = [
        key.entry_name("b.py", *base[1:]),
        key.entry_name(base[0], "digest of x = 2", *base[2:]),
        key.entry_name(*base[:2], Options(select=frozenset({"NM1"})), base[3]),
        key.entry_name(*base[:2], Options(ignore=frozenset({"NM1"})), base[3]),
        key.entry_name(*base[:2], Options(target="trn1"), base[3]),
        key.entry_name(*base[:2], Options(sources=frozenset({"xla", "cuda"})), base[3]),
        key.entry_name(*base[:2], Options(helpers_module="/h.py"), base[3]),
        key.entry_name(*base[:2], Options(unsafe_fixes=True), base[3]),
        key.entry_name(*base[:2], Options(max_engine_size=512 * 1024), base[3]),
        key.entry_name(*base[:3], "mode=check;keep=True"),
    ]
    monkeypatch.chdir(tmp_path)
    changed.append(key.entry_name(*base))
    monkeypatch.undo()
    monkeypatch.setattr(key, "tool_fingerprint", lambda: "another build")
    changed.append(key.entry_name(*base))
    assert len({name, *changed}) == len(changed) + 1


def test_sets_in_options_are_spelt_in_one_order() -> None:
    one = Options(select=frozenset(["NM1", "NM2", "NM30", "NM4"]))
    other = Options(select=frozenset(["NM4", "NM30", "NM2", "NM1"]))
    assert key.options_text(one) == key.options_text(other)
    assert "NM1', 'NM2', 'NM30', 'NM4" in key.options_text(one)


def test_the_tool_is_taken_by_its_own_files_and_libraries() -> None:
    fingerprint = key.tool_fingerprint()
    assert len(fingerprint) == 32
    assert any(name.startswith("libcst") for name in key._library_metadata())
    folders = key._own_folders()
    assert any(Path(f, "runner.py").is_file() for f in folders)  # the engine
    assert any(Path(f, "device.py").is_file() for f in folders)  # the catalogue


def test_what_a_result_saw_elsewhere_is_replayed(tmp_path: Path) -> None:
    from neuron_migrate.deps.launch_paths import roots_of
    from neuron_migrate.files import outside

    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "link").symlink_to(tmp_path)
    with outside.recording() as seen:
        assert outside.is_file(tmp_path / "a.py") and not outside.is_file(tmp_path / "b.py")
        assert not outside.is_dir(tmp_path / "sub")
        outside.stamp(tmp_path / "a.py")
        outside.resolved(tmp_path / "link")
        roots_of(tmp_path / "nested" / "run.sh")
    assert {question for question, _, _ in seen} == {"file", "dir", "stamp", "resolve", "roots"}
    assert outside.unchanged(seen, replay.ANSWERS) and not outside.was_unrepeatable()
    changes = [lambda: (tmp_path / "b.py").write_text(""),
               lambda: (tmp_path / "sub").mkdir(),
               lambda: (tmp_path / "a.py").write_text("x = 22\n"),
               lambda: ((tmp_path / "link").unlink(), (tmp_path / "link").symlink_to("/")),
               lambda: (tmp_path / ".git").mkdir()]
    for change in changes:
        change()
        replay.forget()  # as each run does before its look-ups
        assert not outside.unchanged(seen, replay.ANSWERS)
        seen = [s for s in seen if outside.unchanged([s], replay.ANSWERS)]  # the next change alone
    assert seen == [["file", str(tmp_path / "a.py"), True]]  # the one answer still the same
    assert not outside.unchanged([["no such question", "x", 1]])
    assert not outside.unchanged([["file"]])  # type: ignore[list-item]


def test_a_reader_too_wide_to_replay_is_never_kept() -> None:
    from neuron_migrate.files import outside

    with outside.recording():
        outside.unrepeatable()
    assert outside.was_unrepeatable()
    with outside.recording():
        pass
    assert not outside.was_unrepeatable()


def test_a_digest_is_remembered_by_a_stamp_no_tool_can_forge(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from neuron_migrate.cache import stamps

    monkeypatch.setattr(stamps, "SETTLED", -1.0)  # remember even a stamp of this instant
    source = tmp_path / "a.py"
    source.write_bytes(b"x = 1\n")
    memo = stamps.Stamps(tmp_path)
    first = memo.digest_of(source)
    assert first == stamps.digest(b"x = 1\n")
    memo.save()
    status = source.stat()
    source.write_bytes(b"x = 2\n")  # the same size, and the old modification time put back
    os.utime(source, ns=(status.st_atime_ns, status.st_mtime_ns))
    again = stamps.Stamps(tmp_path)
    assert again.known  # the memo was saved and read
    assert again.digest_of(source) == stamps.digest(b"x = 2\n")
    (tmp_path / stamps.FILE).write_bytes(b"{damaged")
    assert stamps.Stamps(tmp_path).digest_of(source) == stamps.digest(b"x = 2\n")


def test_a_fresh_stamp_is_not_remembered(tmp_path: Path) -> None:
    from neuron_migrate.cache import stamps

    source = tmp_path / "a.py"
    source.write_bytes(b"x = 1\n")
    memo = stamps.Stamps(tmp_path)
    memo.digest_of(source)
    assert not memo.learnt  # written just now: a coarse clock could hide the next write


def test_a_stamp_reads_as_the_runner_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that grows past the limit between the look at it and the read is not read
    whole: its digest is not taken (the run then reports it as too large)."""
    from neuron_migrate.cache import stamps

    source = tmp_path / "grows.py"
    source.write_bytes(b"x = 1\n")
    real_stat = os.stat

    def stat_then_grow(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        status = real_stat(path, *args, **kwargs)
        if Path(path) == source:
            source.write_bytes(b"x = 1\n" * 100)
        return status

    monkeypatch.setattr(stamps, "SOURCE_LIMIT", 64)
    monkeypatch.setattr(os, "stat", stat_then_grow)
    assert stamps.Stamps(tmp_path / "cache").digest_of(source) is None
