"""The writer, called in this process: a file is replaced through a temporary file beside it
and a rename, so that it is only ever its old text or its new one; what the file was (mode
bits, owner, links, a symlink in front of it) is kept or said; an edit saved while the run
worked is never overwritten; and every failure is one line naming the file, with nothing
left behind. (The same promises seen through the command line are in test_write_safety.py.)"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest
from neuron_migrate.files import fileio, temporary
from neuron_migrate.files.fileio import (
    WriteError,
    cannot_read,
    read_bytes,
    write_all,
    write_atomic,
)

OLD = b"import torch_xla\ntorch_xla.sync()\nx = 1\n"
NEW = b"x = 1\n"
SAVED = b"import torch_xla\ntorch_xla.sync()\nx = 2\n"  # an editor's save: as long as OLD


def _file(folder: Path, data: bytes = OLD, name: str = "train.py") -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _during_the_write(monkeypatch: pytest.MonkeyPatch, action) -> None:
    """Run `action()` once the temporary file is written and given the file's attributes,
    just before the last check and the rename."""
    keep = fileio.keep_attributes

    def then_act(fd: int, source: str, before: os.stat_result) -> None:
        keep(fd, source, before)
        action()

    monkeypatch.setattr(fileio, "keep_attributes", then_act)


# reading


def test_read_bytes_returns_the_file_s_bytes_as_they_are(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbfx = 1\r\n\xff\n"
    assert read_bytes(_file(tmp_path, data)) == data


def test_a_file_that_cannot_be_read_is_one_line_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "gone.py"
    with pytest.raises(WriteError) as raised:
        read_bytes(missing)
    assert str(raised.value) == f"{missing}: cannot read (No such file or directory)"
    assert isinstance(raised.value.__cause__, FileNotFoundError)


def test_cannot_read_says_permission_denied_in_plain_words() -> None:
    denied = PermissionError(errno.EACCES, "Permission denied")
    assert cannot_read(Path("a.py"), denied) == "a.py: cannot read (permission denied)"
    assert cannot_read(Path("a.py"), OSError(errno.EIO, "Input/output error")) == \
        "a.py: cannot read (Input/output error)"
    assert cannot_read(Path("a.py"), OSError("no errno")) == "a.py: cannot read (no errno)"


# the write itself


def test_the_file_is_replaced_by_a_rename_not_rewritten_in_place(tmp_path: Path) -> None:
    """A reader that opened the file before keeps the whole old text: the new text went into
    another file (the temporary one), which took the name."""
    target = _file(tmp_path)
    inode = target.stat().st_ino
    with target.open("rb") as before:
        assert write_atomic(target, NEW, OLD) is None
        assert before.read() == OLD
    assert target.read_bytes() == NEW and target.stat().st_ino != inode
    assert _names(tmp_path) == ["train.py"]


def test_the_temporary_file_is_beside_the_file_short_named_and_locked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beside it, so that the rename stays on one file system; a short name whatever the
    file's (a 255-byte name is written too); locked while written, so that a run cleaning up
    leftovers at that moment leaves it alone."""
    target = _file(tmp_path, name="m" * 252 + ".py")
    seen: list[tuple[str, list[str]]] = []

    def look() -> None:
        [name] = [n for n in _names(tmp_path) if n != target.name]
        seen.append((name, temporary.remove_leftovers([tmp_path])))

    _during_the_write(monkeypatch, look)
    write_atomic(target, NEW, OLD)
    [(name, removed)] = seen
    assert name.startswith(".nm-") and name.endswith(".neuron-migrate") and len(name) < 32
    assert removed == []
    assert target.read_bytes() == NEW and _names(tmp_path) == [target.name]


def test_no_descriptor_is_left_open_written_or_refused(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc/self/fd here")
    target = _file(tmp_path)
    before = _open_descriptors()
    write_atomic(target, NEW, OLD)
    assert _open_descriptors() == before

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(WriteError):
        write_atomic(target, OLD, NEW)
    assert _open_descriptors() == before


def test_a_write_that_takes_part_of_the_bytes_is_carried_on(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """`os.write` may take fewer bytes than given (a signal, a nearly full disk)."""
    real_write = os.write
    calls = []

    def a_few_bytes(fd: int, data: bytes) -> int:
        calls.append(len(data))
        return real_write(fd, bytes(data[:7]))

    monkeypatch.setattr(os, "write", a_few_bytes)
    data = b"".join(b"value_%d = %d\n" % (i, i) for i in range(50))
    target = _file(tmp_path)
    write_atomic(target, data, OLD)
    assert target.read_bytes() == data
    assert len(calls) == -(-len(data) // 7)


def test_write_all_writes_everything_and_nothing_for_no_bytes(tmp_path: Path) -> None:
    path = tmp_path / "out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        write_all(fd, b"")
        write_all(fd, b"abc" * 10_000)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"abc" * 10_000


@pytest.mark.parametrize("failing", ["write", "fsync", "fchmod", "replace"])
def test_a_full_disk_at_any_step_leaves_the_old_text_and_no_temporary_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str) -> None:
    target = _file(tmp_path)

    def full(*args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, failing, full)
    with pytest.raises(WriteError) as raised:
        write_atomic(target, NEW, OLD)
    assert str(raised.value) == f"{target}: cannot write (No space left on device)"
    assert isinstance(raised.value.__cause__, OSError)
    assert target.read_bytes() == OLD and _names(tmp_path) == ["train.py"]


def test_a_temporary_file_that_cannot_be_removed_does_not_hide_the_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = _file(tmp_path)

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def refused(path: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "fsync", full)
    monkeypatch.setattr(os, "unlink", refused)
    with pytest.raises(WriteError, match=r"cannot write \(No space left on device\)$"):
        write_atomic(target, NEW, OLD)
    assert target.read_bytes() == OLD


def test_a_folder_where_no_temporary_file_can_be_made_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = _file(tmp_path)

    def refused(folder: Path) -> tuple[int, str]:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(temporary, "create", refused)
    with pytest.raises(WriteError) as raised:
        write_atomic(target, NEW, OLD)
    assert str(raised.value) == f"{target}: cannot write (Permission denied)"
    assert isinstance(raised.value.__cause__, PermissionError)
    assert target.read_bytes() == OLD


# what the file was


@pytest.mark.parametrize("mode", [0o644, 0o600, 0o640, 0o755, 0o4755, 0o2755, 0o6755, 0o1777])
def test_every_mode_bit_is_kept(tmp_path: Path, mode: int) -> None:
    """mkstemp makes 0600 files: the mode is the original's, setuid and setgid included."""
    target = _file(tmp_path)
    os.chmod(target, mode)
    wanted = stat.S_IMODE(target.stat().st_mode)  # what this user may set
    write_atomic(target, NEW, OLD)
    assert stat.S_IMODE(target.stat().st_mode) == wanted
    assert target.read_bytes() == NEW


def test_extended_attributes_are_the_file_s_own(in_tmp: Path) -> None:
    """Copied from the file written, whatever folder the run is in (one of the working
    folder's own would be a wrong one)."""
    (in_tmp / "sub").mkdir()
    target = _file(in_tmp / "sub")
    try:
        os.setxattr(in_tmp, "user.folder", b"the working folder's")
        os.setxattr(target, "user.origin", b"checked out by hand")
    except (OSError, AttributeError) as error:
        pytest.skip(f"no user extended attributes here ({error})")
    write_atomic(target, NEW, OLD)
    assert os.listxattr(target) == ["user.origin"]
    assert os.getxattr(target, "user.origin") == b"checked out by hand"


@pytest.mark.parametrize("mode", [0o444, 0o400, 0o000, 0o4555])
def test_a_read_only_file_is_never_replaced_even_by_root(tmp_path: Path, mode: int) -> None:
    target = _file(tmp_path)
    os.chmod(target, mode)
    with pytest.raises(WriteError) as raised:
        write_atomic(target, NEW, OLD)
    assert str(raised.value) == f"{target}: read-only; not written"
    assert target.read_bytes() == OLD and _names(tmp_path) == ["train.py"]


@pytest.mark.parametrize("mode", [0o644, 0o464, 0o446, 0o200])
def test_one_write_bit_for_anyone_is_enough_when_this_process_may_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: int) -> None:
    """Who may write is the system's answer (`os.access`); the mode bits only stop a file
    that nobody may write (which a rename would replace even for root)."""
    asked = []

    def may(path: object, how: int) -> bool:
        asked.append((Path(path), how))
        return True

    monkeypatch.setattr(os, "access", may)
    target = _file(tmp_path)
    os.chmod(target, mode)
    assert write_atomic(target, NEW, OLD) is None
    assert target.read_bytes() == NEW
    assert asked == [(target.resolve(), os.W_OK)]


def test_a_file_this_process_may_not_write_is_not_replaced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the owner, no group write: renaming over it would still succeed in a folder this
    process may write."""
    monkeypatch.setattr(os, "access", lambda path, how: how != os.W_OK)
    target = _file(tmp_path)
    with pytest.raises(WriteError, match="read-only; not written"):
        write_atomic(target, NEW, OLD)
    assert target.read_bytes() == OLD


@pytest.mark.parametrize("others", [1, 2, 3])
def test_a_hard_linked_file_becomes_its_own_and_its_other_names_keep_the_old_text(
        tmp_path: Path, others: int) -> None:
    target = _file(tmp_path)
    names = [tmp_path / f"link{i}.py" for i in range(others)]
    for name in names:
        os.link(target, name)
    note = write_atomic(target, NEW, OLD)
    plural = "s" if others > 1 else ""
    assert note == (f"{target}: had {others} other hard link{plural}; written as a file of "
                    "its own, so a name this run does not migrate keeps the old text")
    assert target.read_bytes() == NEW and target.stat().st_nlink == 1
    assert all(name.read_bytes() == OLD and name.stat().st_nlink == others for name in names)


def test_a_symlink_is_written_through_and_stays_a_symlink(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The link may be in another folder than its target: the temporary file goes beside
    the target, where the rename happens."""
    (tmp_path / "real").mkdir()
    (tmp_path / "links").mkdir()
    real = _file(tmp_path / "real")
    os.chmod(real, 0o640)
    link = tmp_path / "links" / "train.py"
    link.symlink_to(real)
    folders = []
    create = temporary.create

    def recorded(folder: Path) -> tuple[int, str]:
        folders.append(folder)
        return create(folder)

    monkeypatch.setattr(temporary, "create", recorded)
    assert write_atomic(link, NEW, OLD) is None
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_bytes() == NEW and stat.S_IMODE(real.stat().st_mode) == 0o640
    assert folders == [tmp_path / "real"]
    assert _names(tmp_path / "real") == ["train.py"] and _names(tmp_path / "links") == \
        ["train.py"]


def test_a_symlinked_hard_link_is_counted_on_its_target(tmp_path: Path) -> None:
    real = _file(tmp_path, name="real.py")
    os.link(real, tmp_path / "other.py")
    link = tmp_path / "train.py"
    link.symlink_to(real)
    note = write_atomic(link, NEW, OLD)
    assert note is not None and note.startswith(f"{link}: had 1 other hard link;")
    assert real.read_bytes() == NEW and (tmp_path / "other.py").read_bytes() == OLD


# edits saved while the run worked


def test_a_file_edited_since_it_was_read_is_not_written(tmp_path: Path) -> None:
    target = _file(tmp_path, SAVED)
    with pytest.raises(WriteError) as raised:
        write_atomic(target, NEW, OLD)
    assert str(raised.value) == (f"{target}: changed on disk while neuron-migrate was "
                                 "working; not written, run again")
    assert target.read_bytes() == SAVED and _names(tmp_path) == ["train.py"]


def test_a_file_gone_since_it_was_read_is_one_line(tmp_path: Path) -> None:
    target = tmp_path / "train.py"
    with pytest.raises(WriteError) as raised:
        write_atomic(target, NEW, OLD)
    assert str(raised.value) == \
        f"{target}: cannot re-read before writing (No such file or directory)"
    assert isinstance(raised.value.__cause__, FileNotFoundError)
    assert _names(tmp_path) == []


def _same_times(path: Path, status: os.stat_result) -> None:
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))


def _saved_in_place_same_size_new_time(target: Path) -> None:
    status = target.stat()
    target.write_bytes(SAVED)
    os.utime(target, ns=(status.st_atime_ns, status.st_mtime_ns + 1_000_000_000))


def _touched_only(target: Path) -> None:
    status = target.stat()
    os.utime(target, ns=(status.st_atime_ns, status.st_mtime_ns + 1))


def _saved_in_place_same_time_new_size(target: Path) -> None:
    status = target.stat()
    target.write_bytes(OLD + b"y = 2\n")
    _same_times(target, status)


def _saved_by_rename_same_size_and_time(target: Path) -> None:
    """As an editor saves: a new file renamed over the old; only the inode tells."""
    status = target.stat()
    saved = target.with_name("saved.tmp")
    saved.write_bytes(SAVED)
    _same_times(saved, status)
    os.replace(saved, target)


@pytest.mark.parametrize("edit", [_saved_in_place_same_size_new_time, _touched_only,
                                  _saved_in_place_same_time_new_size,
                                  _saved_by_rename_same_size_and_time])
def test_an_edit_just_before_the_rename_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 edit) -> None:
    """Each part of the file's signature (modification time, size, inode) tells an edit
    alone."""
    target = _file(tmp_path)
    edited = []

    def save() -> None:
        edit(target)
        edited.append(target.read_bytes())

    _during_the_write(monkeypatch, save)
    with pytest.raises(WriteError) as raised:
        write_atomic(target, NEW, OLD)
    assert str(raised.value) == (f"{target}: changed on disk while neuron-migrate was "
                                 "working; not written, run again")
    assert target.read_bytes() == edited[0] != NEW
    assert _names(tmp_path) == ["train.py"]
