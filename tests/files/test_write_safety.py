"""A migrated file is always exactly its old text or exactly its new one, whatever stops the
write; what the file was (its mode bits, attributes, name length) survives; a report never
lands on a file of the run, and a report destination that cannot take it stops the run
before any file is written."""

from __future__ import annotations

import errno
import os
import resource
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from neuron_migrate.files import temporary
from neuron_migrate.files.fileio import WriteError, write_atomic

from tests.conftest import ROOT, cli

OLD = "import torch_xla\ntorch_xla.sync()\nx = 1\n"
NEW = "x = 1\n"
BODY = "".join(f"value_{i} = {i}\n" for i in range(4000))  # ~60 KB: beyond the limits below
LONG_OLD, LONG_NEW = OLD + BODY, NEW + BODY
LIMIT = 12_288


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".neuron-migrate"))


def _linked_pair(folder: Path, text: str) -> tuple[Path, Path]:
    """A file to migrate and a second name for it outside the walked folder."""
    (folder / "tree").mkdir()
    target, other = folder / "tree" / "train.py", folder / "backup.py"
    target.write_text(text)
    os.link(target, other)
    return target, other


def _apply_in_child(tree: Path, prelude: str = "", limit: int | None = None,
                    keep_sigxfsz: bool = False) -> subprocess.CompletedProcess[str]:
    """`apply tree` in a process of its own, with `prelude` run first and writes past
    `limit` bytes refused by the kernel (RLIMIT_FSIZE): as a full disk refuses them with
    SIGXFSZ ignored (Python ignores it), or killing the process mid-write without."""
    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    restore = "import signal; signal.signal(signal.SIGXFSZ, signal.SIG_DFL)\n" \
        if keep_sigxfsz else ""
    code = (f"{restore}{prelude}\nimport sys\nsys.argv = ['neuron-migrate', 'apply', "
            f"{str(tree)!r}]\nfrom neuron_migrate.entry import main\nmain()\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          timeout=120, preexec_fn=limited, cwd=tree.parent,
                          env={**os.environ, "PYTHONPATH": str(ROOT),
                               "PYTHONDONTWRITEBYTECODE": "1"})


# hard links


def test_a_hard_linked_file_becomes_a_file_of_its_own_and_the_note_says_so(
        tmp_path: Path) -> None:
    target, other = _linked_pair(tmp_path, OLD)
    note = write_atomic(target, NEW.encode(), OLD.encode())
    assert target.read_text() == NEW and other.read_text() == OLD
    assert target.stat().st_ino != other.stat().st_ino
    assert note is not None and str(target) in note and "1 other hard link" in note


def test_apply_names_the_file_whose_hard_link_it_split(in_tmp: Path) -> None:
    _linked_pair(in_tmp, OLD)
    run = cli("apply", "tree")
    assert run.exit_code == 0
    assert "note: tree/train.py: had 1 other hard link" in run.stderr
    assert (in_tmp / "tree" / "train.py").read_text() == NEW
    assert (in_tmp / "backup.py").read_text() == OLD


def test_a_full_disk_leaves_a_hard_linked_file_whole(tmp_path: Path) -> None:
    """The kernel refuses bytes past 12,288 of any file, as a full disk would: written in
    place, the file was left as the first 12,288 bytes of the new text and the old tail."""
    target, other = _linked_pair(tmp_path, LONG_OLD)
    run = _apply_in_child(tmp_path / "tree", limit=LIMIT)
    assert run.returncode == 2, run.stderr
    assert "train.py: cannot write (File too large)" in run.stderr
    assert target.read_text() == LONG_OLD and other.read_text() == LONG_OLD
    assert _temporaries(target.parent) == []


def test_a_run_killed_mid_write_leaves_the_file_whole_and_the_next_run_cleans_up(
        in_tmp: Path) -> None:
    """Killed by the kernel (SIGXFSZ) once 12,288 bytes are written: the hard-linked file
    keeps its old text; the dead run's temporary file is left alone by `check` (which only
    reads) and removed by the next `apply`, which then migrates the file."""
    target, other = _linked_pair(in_tmp, LONG_OLD)
    run = _apply_in_child(in_tmp / "tree", limit=LIMIT, keep_sigxfsz=True)
    assert run.returncode == -signal.SIGXFSZ, run.stderr
    assert target.read_text() == LONG_OLD and other.read_text() == LONG_OLD
    left = _temporaries(target.parent)
    assert len(left) == 1 and (target.parent / left[0]).stat().st_size == LIMIT
    assert cli("check", "tree").exit_code == 1 and _temporaries(target.parent) == left
    applied = cli("apply", "tree")
    assert applied.exit_code == 0
    assert f"note: tree/{left[0]}: removed a temporary file left by an interrupted" \
        in applied.stderr
    assert _temporaries(target.parent) == []
    assert target.read_text() == LONG_NEW and other.read_text() == LONG_OLD


def test_a_run_killed_in_the_rename_window_leaves_a_temporary_file_the_next_run_removes(
        in_tmp: Path) -> None:
    target, other = _linked_pair(in_tmp, OLD)
    kill_at_rename = ("import os, signal\n"
                      "os.replace = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)")
    run = _apply_in_child(in_tmp / "tree", prelude=kill_at_rename)
    assert run.returncode == -signal.SIGKILL
    assert target.read_text() == OLD and other.read_text() == OLD
    [left] = _temporaries(target.parent)
    assert (target.parent / left).read_text() == NEW
    assert "removed a temporary file" in cli("apply", "tree").stderr
    assert _temporaries(target.parent) == [] and target.read_text() == NEW


@pytest.mark.parametrize("linked", [False, True], ids=["plain", "hard-linked"])
@pytest.mark.parametrize("room", [0, 1, 4096, LIMIT, len(LONG_NEW) - 1, None])
def test_a_disk_that_fills_after_n_bytes_leaves_the_file_exactly_old_or_new(
        tmp_path: Path, monkeypatch, linked: bool, room: int | None) -> None:
    """Every write to a file descriptor fails with ENOSPC once `room` bytes are written
    (None: the disk has room)."""
    target = tmp_path / "train.py"
    target.write_text(LONG_OLD)
    if linked:
        os.link(target, tmp_path / "other.py")
    written = 0
    real_write = os.write

    def write(fd: int, data: bytes) -> int:
        nonlocal written
        if room is not None and written + len(data) > room:
            if written >= room:
                raise OSError(errno.ENOSPC, "No space left on device")
            data = data[:room - written]
        written += len(data)
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    if room is None:
        write_atomic(target, LONG_NEW.encode(), LONG_OLD.encode())
        assert target.read_text() == LONG_NEW
    else:
        with pytest.raises(WriteError, match="No space left on device"):
            write_atomic(target, LONG_NEW.encode(), LONG_OLD.encode())
        assert target.read_text() == LONG_OLD
    if linked:
        assert (tmp_path / "other.py").read_text() == LONG_OLD
    assert _temporaries(tmp_path) == []


# leftovers of killed runs


def test_a_temporary_file_another_run_is_writing_is_left_alone(tmp_path: Path) -> None:
    fd, name = temporary.create(tmp_path)
    try:
        assert temporary.remove_leftovers([tmp_path]) == []
        assert Path(name).exists()
    finally:
        os.close(fd)
    assert len(temporary.remove_leftovers([tmp_path])) == 1
    assert not Path(name).exists()


def test_only_our_own_leftovers_are_removed(tmp_path: Path) -> None:
    user_file = tmp_path / "notes.txt"
    user_file.write_text("mine")
    kept = {"nm-abcdefgh.neuron-migrate": "no leading dot",
            ".nm-ABCDEFGH.neuron-migrate": "not mkstemp's letters",
            ".nm-abc.neuron-migrate": "too short",
            ".nm-abcdefgh.neuron-migrate.bak": "another suffix"}
    for name in kept:
        (tmp_path / name).write_text("mine")
    (tmp_path / ".nm-linkname.neuron-migrate").symlink_to(user_file)
    (tmp_path / ".nm-a_folder.neuron-migrate").mkdir()
    (tmp_path / ".nm-abcdefgh.neuron-migrate").write_text("left by a killed run")
    (tmp_path / ".train.py.k2j4h1x9.neuron-migrate").write_text("left by an older release")
    lines = temporary.remove_leftovers([tmp_path])
    assert len(lines) == 2
    assert not (tmp_path / ".nm-abcdefgh.neuron-migrate").exists()
    assert not (tmp_path / ".train.py.k2j4h1x9.neuron-migrate").exists()
    assert all((tmp_path / name).read_text() == "mine" for name in kept)
    assert (tmp_path / ".nm-linkname.neuron-migrate").is_symlink()
    assert user_file.read_text() == "mine" and (tmp_path / ".nm-a_folder.neuron-migrate").is_dir()


# names


def test_a_file_with_the_longest_name_is_written(in_tmp: Path) -> None:
    name = "m" * 252 + ".py"  # 255 bytes, the most a name may have
    (in_tmp / name).write_text(OLD)
    run = cli("apply", name)
    assert run.exit_code == 0, run.stderr
    assert (in_tmp / name).read_text() == NEW and _temporaries(in_tmp) == []


def test_temporary_names_are_short_whatever_the_file(tmp_path: Path) -> None:
    fd, name = temporary.create(tmp_path)
    os.close(fd)
    assert len(os.path.basename(name)) < 32 and temporary.is_ours(os.path.basename(name))


# mode bits and attributes


def test_setuid_setgid_and_sticky_bits_are_kept(tmp_path: Path) -> None:
    target = tmp_path / "train.py"
    target.write_text(OLD)
    os.chmod(target, 0o7755)
    wanted = stat.S_IMODE(target.stat().st_mode)  # what this user may set
    assert wanted & (stat.S_ISUID | stat.S_ISVTX)
    write_atomic(target, NEW.encode(), OLD.encode())
    assert stat.S_IMODE(target.stat().st_mode) == wanted and target.read_text() == NEW


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may give a file to another user")
def test_setuid_survives_keeping_another_owner(tmp_path: Path) -> None:
    """Changing the owner clears setuid and setgid: the mode is set after it."""
    target = tmp_path / "train.py"
    target.write_text(OLD)
    os.chown(target, 1234, 5678)
    os.chmod(target, 0o6755)
    write_atomic(target, NEW.encode(), OLD.encode())
    status = target.stat()
    assert (status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)) == (1234, 5678, 0o6755)


def test_extended_attributes_are_kept(tmp_path: Path) -> None:
    target = tmp_path / "train.py"
    target.write_text(OLD)
    try:
        os.setxattr(target, "user.origin", b"checked out by hand")
    except (OSError, AttributeError) as error:
        pytest.skip(f"no user extended attributes here ({error})")
    write_atomic(target, NEW.encode(), OLD.encode())
    assert os.getxattr(target, "user.origin") == b"checked out by hand"
    assert target.read_text() == NEW


def test_a_file_system_without_extended_attributes_is_not_an_error(tmp_path: Path,
                                                                     monkeypatch) -> None:
    def unsupported(*args: object) -> list[str]:
        raise OSError(errno.ENOTSUP, "Operation not supported")

    monkeypatch.setattr(os, "listxattr", unsupported)
    target = tmp_path / "train.py"
    target.write_text(OLD)
    write_atomic(target, NEW.encode(), OLD.encode())
    assert target.read_text() == NEW


# --output


@pytest.mark.parametrize(("args", "output"), [
    (("check", "a.py"), "a.py"),
    (("apply", "a.py", "--format", "json"), "a.py"),
    (("apply", "."), "hard-link.py"),
    (("check", "."), "symlink.txt"),
    (("apply", "."), "sub/b.py"),
    (("apply", "."), "elsewhere.txt"),
    (("check", "-", "--stdin-filename", "a.py"), "a.py"),
])
def test_a_report_is_never_written_over_a_file_of_the_run(in_tmp: Path, args: tuple[str, ...],
                                                          output: str) -> None:
    (in_tmp / "a.py").write_text(OLD)
    (in_tmp / "sub").mkdir()
    (in_tmp / "sub" / "b.py").write_text(OLD)
    os.link(in_tmp / "sub" / "b.py", in_tmp / "elsewhere.txt")
    os.link(in_tmp / "a.py", in_tmp / "hard-link.py")
    (in_tmp / "symlink.txt").symlink_to(in_tmp / "a.py")
    run = cli(*args, "--output", output)
    assert run.exit_code == 2
    assert f"error: --output {output}: is " in run.stderr and "a file this run reads" \
        in run.stderr
    assert (in_tmp / "a.py").read_text() == OLD and (in_tmp / "sub" / "b.py").read_text() == OLD


def test_a_report_beside_the_files_that_is_not_one_of_them_is_written(in_tmp: Path) -> None:
    (in_tmp / "a.py").write_text(OLD)
    (in_tmp / "report.json").write_text("an old, longer report " * 1000)
    run = cli("apply", ".", "--format", "json", "--output", "report.json")
    assert run.exit_code == 0, run.stderr
    assert (in_tmp / "a.py").read_text() == NEW
    assert (in_tmp / "report.json").read_text().startswith("{")
    assert "an old, longer report" not in (in_tmp / "report.json").read_text()


@pytest.mark.parametrize(("output", "why"), [
    ("dangling", "cannot open (No such file or directory)"),
    ("/dev/full", "a device other than a terminal or /dev/null"),
    ("pipe", "a pipe or socket with no reader"),
])
def test_a_destination_that_cannot_take_the_report_stops_apply_before_any_write(
        tmp_path: Path, output: str, why: str) -> None:
    """A symlink into a missing folder and /dev/full failed after the files were written; a
    pipe nobody reads hung after it."""
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "a.py").write_text(OLD)
    (tmp_path / "dangling").symlink_to(tmp_path / "missing" / "report.txt")
    os.mkfifo(tmp_path / "pipe")
    run = subprocess.run([sys.executable, "-m", "neuron_migrate", "apply", "tree", "--output",
                          output], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 2 and f"error: --output {output}: {why}" in run.stderr
    assert (tmp_path / "tree" / "a.py").read_text() == OLD


def test_a_pipe_with_a_reader_takes_the_report(in_tmp: Path) -> None:
    """A reader is there (as for `-o >(jq .)`): the report goes through the pipe (a small
    one, which the pipe holds until it is read)."""
    (in_tmp / "a.py").write_text(OLD)
    os.mkfifo(in_tmp / "pipe")
    reader = os.open(in_tmp / "pipe", os.O_RDONLY | os.O_NONBLOCK)
    try:
        run = cli("check", "a.py", "--format", "json", "--output", "pipe")
        received = os.read(reader, 1 << 20)
    finally:
        os.close(reader)
    assert run.exit_code == 1 and received.startswith(b"{") and b"NM110" in received


def test_dev_null_takes_the_report(in_tmp: Path) -> None:
    (in_tmp / "a.py").write_text(OLD)
    assert cli("apply", "a.py", "--output", os.devnull).exit_code == 0
    assert (in_tmp / "a.py").read_text() == NEW
