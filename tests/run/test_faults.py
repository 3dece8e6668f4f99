"""Filesystem faults and hostile input: the run never hangs, never loses a user's edit, never
changes who owns a file, and reports each problem as one line naming the file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neuron_migrate.files import fileio
from neuron_migrate.files.fileio import WriteError, write_atomic
from tests.conftest import ROOT, cli

OLD = "import torch_xla\ntorch_xla.sync()\nx = 1\n"
NEW = "x = 1\n"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _commit_all(repo: Path) -> None:
    _git(repo, "add", ".")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "start")


def test_a_fifo_in_the_tree_is_skipped_not_read(in_tmp: Path) -> None:
    os.mkfifo(in_tmp / "pipe.py")
    os.mkfifo(in_tmp / "requirements.txt")
    (in_tmp / "train.py").write_text(OLD)
    run = subprocess.run([sys.executable, "-m", "neuron_migrate", "apply", "."], cwd=in_tmp,
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr
    assert (in_tmp / "train.py").read_text() == NEW


def test_a_fifo_named_on_the_command_line_is_an_error_naming_it(in_tmp: Path) -> None:
    os.mkfifo(in_tmp / "pipe.py")
    run = cli("check", "pipe.py")
    assert run.exit_code == 2 and "pipe.py: not a regular file" in run.stderr


def test_a_symlink_loop_is_reported_and_the_run_goes_on(in_tmp: Path) -> None:
    (in_tmp / "a.py").symlink_to(in_tmp / "b.py")
    (in_tmp / "b.py").symlink_to(in_tmp / "a.py")
    (in_tmp / "train.py").write_text(OLD)
    run = cli("apply", ".")
    assert run.exit_code == 0
    assert (in_tmp / "train.py").read_text() == NEW
    looped = cli("check", "a.py")
    assert looped.exit_code == 2 and "a.py: cannot read" in looped.stderr


def test_a_folder_whose_gitignore_cannot_be_probed_is_reported(in_tmp: Path,
                                                               monkeypatch) -> None:
    """As an unprivileged user, a folder without read permission fails `is_file` on its
    .gitignore with EACCES (root reads everything, so the error is raised here)."""
    (in_tmp / "locked").mkdir()
    (in_tmp / "train.py").write_text(OLD)
    real_is_file = Path.is_file

    def is_file(path: Path) -> bool:
        if path.parent.name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_is_file(path)

    monkeypatch.setattr(Path, "is_file", is_file)
    monkeypatch.setattr(os, "scandir", _refusing_scandir("locked"))
    run = cli("apply", ".")
    assert run.exit_code == 2 and "locked: cannot list (Permission denied)" in run.stderr
    assert (in_tmp / "train.py").read_text() == NEW


def _refusing_scandir(name: str):  # type: ignore[no-untyped-def]
    real = os.scandir

    def scandir(path):  # type: ignore[no-untyped-def]
        if Path(path).name == name:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)
    return scandir


def test_a_non_utf8_file_name_in_a_git_work_tree(in_tmp: Path) -> None:
    _git(in_tmp, "init", "-q")
    odd = os.fsencode(str(in_tmp)) + b"/caf\xe9.py"
    with open(odd, "wb") as handle:
        handle.write(OLD.encode())
    (in_tmp / "train.py").write_text(OLD)
    _commit_all(in_tmp)
    (in_tmp / "train.py").write_text(OLD + "y = 2\n")  # uncommitted: must be protected
    run = cli("apply", ".")
    assert "Traceback" not in run.stderr
    assert "train.py: has uncommitted changes" in run.stderr
    with open(odd, "rb") as handle:
        assert handle.read() == NEW.encode()


def test_uncommitted_edits_in_a_nested_repository_are_protected(in_tmp: Path) -> None:
    _git(in_tmp, "init", "-q")
    (in_tmp / "top.py").write_text(OLD)
    _commit_all(in_tmp)
    nested = in_tmp / "sub"
    nested.mkdir()
    _git(nested, "init", "-q")
    (nested / "s.py").write_text(OLD)
    _commit_all(nested)
    (nested / "s.py").write_text(OLD + "y = 2  # the user's work in progress\n")
    run = cli("apply", ".")
    assert "s.py: has uncommitted changes" in run.stderr
    assert (nested / "s.py").read_text().startswith("import torch_xla")
    assert (in_tmp / "top.py").read_text() == NEW


def test_changed_since_never_reads_the_revision_as_an_option(in_tmp: Path) -> None:
    _git(in_tmp, "init", "-q")
    (in_tmp / "train.py").write_text(OLD)
    _commit_all(in_tmp)
    victim = in_tmp / "victim.txt"
    run = cli("check", f"--changed-since=--output={victim}", ".")
    assert run.exit_code == 2 and "--changed-since" in run.stderr
    assert not victim.exists()


def test_output_to_a_missing_folder_is_a_usage_error_before_any_write(in_tmp: Path) -> None:
    (in_tmp / "train.py").write_text(OLD)
    run = cli("apply", ".", "--output", str(in_tmp / "missing" / "report.json"),
              "--format", "json")
    assert run.exit_code == 2 and "does not exist" in run.stderr
    assert (in_tmp / "train.py").read_text() == OLD


def test_a_report_that_cannot_be_written_is_exit_2(in_tmp: Path, monkeypatch) -> None:
    (in_tmp / "train.py").write_text(OLD)

    from neuron_migrate.files import destination

    def full_disk(fd: int, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(destination, "write_all", full_disk)
    run = cli("check", ".", "--output", "report.txt")
    assert run.exit_code == 2 and "No space left on device" in run.stderr


def test_an_edit_between_the_reread_and_the_rename_is_not_lost(tmp_path: Path,
                                                                monkeypatch) -> None:
    target = tmp_path / "train.py"
    target.write_text(OLD)
    keep_attributes = fileio.keep_attributes

    def user_saves(fd: int, source: str, before: os.stat_result) -> None:
        keep_attributes(fd, source, before)
        target.write_text(OLD + "y = 2  # saved by the user's editor just now\n")

    monkeypatch.setattr(fileio, "keep_attributes", user_saves)
    with pytest.raises(WriteError, match="changed on disk"):
        write_atomic(target, NEW.encode(), OLD.encode())
    assert "saved by the user's editor" in target.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]  # no temporary left


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may give a file to another user")
def test_owner_and_group_are_kept(tmp_path: Path) -> None:
    target = tmp_path / "train.py"
    target.write_text(OLD)
    os.chown(target, 1234, 5678)
    write_atomic(target, NEW.encode(), OLD.encode())
    status = target.stat()
    assert (status.st_uid, status.st_gid) == (1234, 5678)
    assert target.read_text() == NEW


def test_workers_die_with_a_killed_run(tmp_path: Path) -> None:
    """A run killed with SIGKILL leaves no worker behind to go on writing files."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import os, sys, time\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from neuron_migrate.workers import start_worker\n"
        "def pid(_):\n    time.sleep(0.2)\n    return os.getpid()\n"
        "with ProcessPoolExecutor(2, initializer=start_worker, initargs=(None,)) as pool:\n"
        "    print(*set(pool.map(pid, range(4))), flush=True)\n"
        "    time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert parent.stdout is not None
    workers = [int(p) for p in parent.stdout.readline().split()]
    assert workers
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(p) for p in workers):
        time.sleep(0.05)
    assert not any(_alive(p) for p in workers)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_markdown_report_keeps_user_code_inside_its_fences(in_tmp: Path) -> None:
    """A file name with a backtick and a diff line of four backticks stay code; raw HTML from
    the user's code never renders in the pull-request description."""
    from markdown_it import MarkdownIt

    name = "odd`name.py"
    (in_tmp / name).write_text('doc = """\n````\n<img src=x onerror=alert(1)>\n"""\n' + OLD)
    page = cli("check", "--diff", "--format", "markdown", name).stdout
    html = MarkdownIt("commonmark").render(page)
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<code>odd`name.py</code>" in html


def test_sarif_uris_are_relative_and_percent_encoded(in_tmp: Path) -> None:
    (in_tmp / "my file#1.py").write_text(OLD)
    document = cli("check", "--format", "sarif", str(in_tmp / "my file#1.py")).json()
    run = document["runs"][0]
    location = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "my%20file%231.py", "uriBaseId": "%SRCROOT%"}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == in_tmp.resolve().as_uri() + "/"


def test_sarif_uri_of_a_file_outside_the_root_is_an_absolute_file_uri(
        in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `../` reference would climb out of %SRCROOT%, which code scanning cannot place: a file
    outside the folder the run started in keeps its whole path, with no base id."""
    (in_tmp / "elsewhere").mkdir()
    (in_tmp / "root").mkdir()
    outside = in_tmp / "elsewhere" / "my file.py"
    outside.write_text(OLD)
    monkeypatch.chdir(in_tmp / "root")
    document = cli("check", "--format", "sarif", str(outside)).json()
    location = document["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": outside.resolve().as_uri()}
    assert location["artifactLocation"]["uri"].endswith("/elsewhere/my%20file.py")


def test_a_refused_write_is_not_counted_as_changed(in_tmp: Path) -> None:
    _git(in_tmp, "init", "-q")
    (in_tmp / "dirty.py").write_text(OLD)
    run = cli("apply", ".")
    assert "1 file scanned, 0 changed, 1 failed" in run.stdout


def test_jobs_are_capped(in_tmp: Path, monkeypatch) -> None:
    from neuron_migrate import command as cli_module

    asked: list[int] = []
    real_run = cli_module.run

    def run(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        asked.append(kwargs["jobs"])  # type: ignore[arg-type]
        return real_run(*args, **kwargs)

    monkeypatch.setattr(cli_module, "run", run)
    (in_tmp / "train.py").write_text(OLD)
    cli("check", "-j", "1000", ".")
    assert asked == [cli_module.MAX_JOBS_PER_CORE * cli_module.default_jobs()]


def test_read_only_files_and_odd_names(in_tmp: Path) -> None:
    for name in ("-dash.py", "new\nline.py", "ro.py"):
        (in_tmp / name).write_text(OLD)
    (in_tmp / "ro.py").chmod(0o444)
    run = cli("apply", ".")
    assert run.exit_code == 2 and "ro.py: read-only; not written" in run.stderr
    assert (in_tmp / "ro.py").read_text() == OLD
    assert (in_tmp / "-dash.py").read_text() == NEW
    assert (in_tmp / "new\nline.py").read_text() == NEW


@pytest.mark.torch
def test_smoke_runs_a_script_named_like_an_option_as_a_file(in_tmp: Path) -> None:
    (in_tmp / "-c").write_text("open('ran-as-file', 'w').close()\n")
    cli("smoke", "--", "-c", "open('ran-as-code', 'w').close()")
    assert (in_tmp / "ran-as-file").exists() and not (in_tmp / "ran-as-code").exists()


@pytest.mark.parametrize(("jobs", "sent", "group"), [("2", signal.SIGINT, True),
                                                     ("1", signal.SIGINT, False),
                                                     ("2", signal.SIGTERM, True)])
def test_ctrl_c_stops_the_run_and_lists_what_was_written(tmp_path: Path, jobs: str,
                                                         sent: int, group: bool) -> None:
    """Ctrl-C (to the whole process group, as a terminal sends it) or SIGTERM part-way: exit
    128 + the signal at once; each file is fully migrated or untouched, no temporary
    file is left, and the printed list is exactly the files that changed."""
    source = OLD + "".join(f"def f{i}(t):\n    return xm.mark_step()\n" for i in range(40))
    source = "import torch_xla.core.xla_model as xm\n" + source
    for i in range(300):
        (tmp_path / f"m{i:03}.py").write_text(source)
    run = subprocess.Popen([sys.executable, "-m", "neuron_migrate", "apply", "-j", jobs, "."],
                           cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                           start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and \
            sum((tmp_path / f"m{i:03}.py").read_text() != source for i in range(300)) < 3:
        time.sleep(0.05)
    if group:
        os.killpg(run.pid, sent)
    else:
        run.send_signal(sent)
    interrupted = time.monotonic()
    try:
        out, err = run.communicate(timeout=30)
    finally:
        if run.poll() is None:  # timed out: end the run and its workers, not leave them
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    # it stops at once; the bound is loose so that a busy machine does not fail the test,
    # yet far under the minute an unstoppable worker took
    assert time.monotonic() - interrupted < 15
    assert run.returncode == 128 + sent, err
    changed = {p.name for p in tmp_path.iterdir() if p.read_text() != source}
    assert 3 <= len(changed) < 300, "the run was not interrupted part-way"
    migrated = {p.read_text() for p in tmp_path.iterdir() if p.name in changed}
    assert len(migrated) == 1 and "xm" not in migrated.pop()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"m{i:03}.py" for i in range(300)]
    listed = {line.split(":")[0] for line in out.splitlines() if ": " in line and
              line.startswith("m") and "changes" in line}
    assert listed == changed
    assert "interrupted" in err and "Traceback" not in err


def test_carriage_return_only_line_endings_survive(in_tmp: Path) -> None:
    """Old Mac files end every line, the last included, with a lone carriage return."""
    (in_tmp / "cr.py").write_bytes(b"import torch_xla\rtorch_xla.sync()\rx = 1\r")
    (in_tmp / "requirements.txt").write_bytes(b"torch-neuronx==2.1.2\rnumpy\r")
    assert cli("apply", ".").exit_code == 0
    assert (in_tmp / "cr.py").read_bytes() == b"x = 1\r"
    pins = (in_tmp / "requirements.txt").read_bytes()
    assert b"\n" not in pins and pins.endswith(b"numpy\r") and b"torch-neuronx==2.14.*\r" in pins
    assert cli("check", ".").exit_code == 0


def _no_temporary_files(folder: Path) -> bool:
    return not any(p.name.endswith(".neuron-migrate") for p in folder.rglob("*"))


@pytest.mark.parametrize(("target", "error"), [
    ("os.fsync", OSError(28, "No space left on device")),
    ("os.replace", OSError(16, "Device or resource busy")),
    ("tempfile.mkstemp", PermissionError(13, "Permission denied")),
])
def test_a_failed_write_leaves_the_file_whole_and_no_temporary_file(
        in_tmp: Path, monkeypatch, target: str, error: OSError) -> None:
    """A full disk, a busy file, a folder that refuses new files: each file fails on its own
    line, keeps its old content, and nothing is left behind."""
    for name in ("a.py", "b.py"):
        (in_tmp / name).write_text(OLD)

    def fail(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(target, fail)
    run = cli("apply", ".")
    assert run.exit_code == 2
    assert run.stderr.splitlines() == [f"error: {n}: cannot write ({error.strerror})"
                                       for n in ("a.py", "b.py")]
    assert (in_tmp / "a.py").read_text() == OLD and _no_temporary_files(in_tmp)


def test_a_file_that_vanishes_or_changes_kind_mid_run(in_tmp: Path, monkeypatch) -> None:
    from neuron_migrate import migrate_file, per_file

    for name in ("gone.py", "dir.py", "kept.py"):
        (in_tmp / name).write_text(OLD)
    real_read, real_write = migrate_file.read_bounded, per_file.write_atomic

    def read_bounded(path: Path, limit: int) -> bytes:
        if path.name == "gone.py":
            path.unlink()
        return real_read(path, limit)

    def write_atomic(path: Path, data: bytes, original: bytes) -> None:
        if path.name == "dir.py":
            path.unlink()
            path.mkdir()
        real_write(path, data, original)

    monkeypatch.setattr(migrate_file, "read_bounded", read_bounded)
    monkeypatch.setattr(per_file, "write_atomic", write_atomic)
    run = cli("apply", ".")
    assert run.exit_code == 2 and "Traceback" not in run.stderr
    assert "gone.py: cannot read (No such file or directory)" in run.stderr
    assert "dir.py: cannot re-read before writing (Is a directory)" in run.stderr
    assert (in_tmp / "kept.py").read_text() == NEW and _no_temporary_files(in_tmp)


def test_odd_entries_in_the_tree(in_tmp: Path) -> None:
    """A dangling symlink, a folder named like a module, the same file named three times, a
    binary file, one nested too deeply and one too large: each is one line or skipped."""
    (in_tmp / "dangling.py").symlink_to(in_tmp / "nowhere.py")
    (in_tmp / "pkg.py").mkdir()
    (in_tmp / "pkg.py" / "train.py").write_text(OLD)
    (in_tmp / "binary.py").write_bytes(b"import os\n\n\x00torch_xla\xff")
    (in_tmp / "deep.py").write_text("import torch_xla\nx = " + "(" * 5000 + ")" * 5000 + "\n")
    (in_tmp / "big.py").write_text(OLD + "#" * (6 * 2**20) + "\n")
    run = cli("apply", ".", "pkg.py", "pkg.py/train.py")
    assert run.exit_code == 2 and "Traceback" not in run.stderr
    assert sorted(run.stderr.splitlines()) == [
        "error: binary.py:3: cannot parse (source code string cannot contain null bytes); "
        "file skipped",
        "error: deep.py:2: cannot parse (too many nested parentheses); file skipped"]
    assert (in_tmp / "pkg.py" / "train.py").read_text() == NEW
    assert "4 files scanned, 1 changed, 2 failed" in run.stdout
    assert (in_tmp / "big.py").read_text().startswith(OLD)
    for named, problem in (("dangling.py", "no such file or directory"),
                           ("/dev/null", "not a regular file or folder; skipped")):
        assert cli("check", named).stderr == f"error: {named}: {problem}\n"


def test_ctrl_c_before_the_migration_is_exit_130(in_tmp: Path, monkeypatch) -> None:
    """Interrupted while finding files: 130 as well, never 1 ("findings" to `check`)."""
    from neuron_migrate import command

    def discover(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "discover", discover)  # the command finds the files
    (in_tmp / "train.py").write_text(OLD)
    run = cli("check", ".")
    assert run.exit_code == 130 and "interrupted" in run.stderr


def test_sarif_points_a_notebook_finding_at_the_line_of_the_file_that_holds_it(
        in_tmp: Path) -> None:
    import json

    notebook = {"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Training\n"]},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
         "source": ["import torch_xla.core.xla_model as xm\n", "x = 1\n", "xm.mark_step()\n"]},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    text = json.dumps(notebook, indent=1)
    (in_tmp / "train.ipynb").write_text(text)
    document = cli("check", "--format", "sarif", "train.ipynb").json()
    regions = {r["ruleId"]: r["locations"][0]["physicalLocation"]["region"]
               for r in document["runs"][0]["results"]}
    lines = text.splitlines()
    assert "xm.mark_step()" in lines[regions["NM110"]["startLine"] - 1]
    assert "import torch_xla" in lines[regions["NM001"]["startLine"] - 1]


def test_stopped_workers_end_by_themselves_not_killed(tmp_path: Path, monkeypatch) -> None:
    """A worker killed while it sent a result left half a message in the pool's pipe, and the
    run then waited for the rest forever after Ctrl-C. Workers are asked to stop instead:
    each ends with exit code 0. (The grace before a kill is made long here: on a loaded
    machine a worker inside one long parse takes the request late, which is not a failure.)"""
    import multiprocessing

    import neuron_migrate.workers

    monkeypatch.setattr(neuron_migrate.workers, "STOP_GRACE", 120.0)

    from neuron_migrate.model import Options
    from neuron_migrate.registry import Registry
    from neuron_migrate.rules import all_rules
    from neuron_migrate.runner import Job, _map

    source = "import torch_xla.core.xla_model as xm\n" + \
        "".join(f"def f{i}(t):\n    return xm.mark_step()\n" for i in range(400))
    files = []
    for i in range(64):
        (tmp_path / f"m{i:02}.py").write_text(source)
        files.append(tmp_path / f"m{i:02}.py")
    results = _map([files], Job(Registry(all_rules(), Options()), write=False, keep_sources=False), 2)
    assert next(results).path == str(files[0])
    workers = multiprocessing.active_children()
    assert len(workers) == 2
    results.close()
    deadline = time.monotonic() + 60  # ended or ending: wait for that, not for a fixed time
    while any(worker.exitcode is None for worker in workers) and time.monotonic() < deadline:
        time.sleep(0.05)  # exitcode polls the process (it may close its pipes just before)
    assert [worker.exitcode for worker in workers] == [0, 0]
