"""Runs with the result cache: a warm run reports exactly what a cold one does, in every
format; anything a result depends on, the file's own bytes or not, makes it a miss; runs that
share a cache, are killed, or find it damaged or unwritable still report the truth."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import Run, cli
from neuron_migrate import per_file, runner
from neuron_migrate.cache import key
from neuron_migrate.cache.location import DEFAULT_NAME, ENVIRONMENT, OFF
from neuron_migrate.cache.pack import PREFIX
from neuron_migrate.deps import script_mentions
from neuron_migrate.files import tree_walk
from neuron_migrate.report.formats import RUN_FORMATS

MODEL = """\
import torch
import torch_xla.core.xla_model as xm

device = xm.xla_device()
model = torch.nn.Linear(4, 4).to(device)
print(xm.get_ordinal(), xm.xrt_world_size())
xm.mark_step()
"""
SPAWNING = """\
import torch_xla.distributed.xla_multiprocessing as xmp


def _mp_fn(index):
    print(index)


if __name__ == "__main__":
    xmp.spawn(_mp_fn, args=(), nprocs=2)
"""
NOTEBOOK = {"cells": [{"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {},
                       "outputs": [], "source": ["import torch_xla.core.xla_model as xm\n",
                                                 "device = xm.xla_device()\n"]}],
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                        "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


FILES = 7
"""The files of `_tree`, each kept (run.sh with what its launch line saw of train.py)."""


def _tree(root: Path) -> Path:
    """A small repository with every kind of file the cache keeps (and one it may not)."""
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "model.py").write_text(MODEL)
    (root / "pkg" / "clean.py").write_text("import os\n\nprint(os.sep)\n")
    (root / "train.py").write_text(SPAWNING)
    (root / "run.sh").write_text("#!/bin/sh\npython train.py --epochs 2\n")
    (root / "requirements.txt").write_text("torch-neuronx==2.1.2\ntorch-xla==2.1.2\nnumpy\n")
    (root / "Dockerfile").write_text("FROM python:3.10\nRUN pip install torch-xla==2.1.2\n")
    (root / "explore.ipynb").write_text(json.dumps(NOTEBOOK))
    return root


@pytest.fixture
def cached(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tree in the working directory, the cache turned on (the suite turns it off)."""
    monkeypatch.delenv(OFF, raising=False)
    monkeypatch.delenv(ENVIRONMENT, raising=False)
    return _tree(in_tmp / "repo")


class Computed:
    """The files whose result was computed (not taken from the cache) in a -j1 run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        original = per_file._computed

        def counting(path: Path, data: bytes, job: runner.Job):
            self.paths.append(Path(path).name)
            return original(path, data, job)

        monkeypatch.setattr(per_file, "_computed", counting)

    def taken(self) -> list[str]:
        taken, self.paths = sorted(self.paths), []
        return taken


def _entries(folder: Path) -> list[Path]:
    """The entries of a cache folder (not its marker files, memo or packs)."""
    return [p for p in folder.iterdir()
            if not p.name.startswith((".", "CACHEDIR", "stamps", PREFIX))]


def _packs(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.startswith(PREFIX)]


def _same(one: Run, other: Run) -> None:
    assert (one.exit_code, one.stdout, one.stderr) == (other.exit_code, other.stdout,
                                                       other.stderr)


@pytest.mark.parametrize("fmt", RUN_FORMATS.names)
@pytest.mark.parametrize("extra", [[], ["--diff"]], ids=["check", "diff"])
def test_a_warm_run_reports_what_a_cold_one_does(cached: Path, fmt: str, extra: list[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    computed = Computed(monkeypatch)
    args = ["check", "repo", "-j", "1", "--format", fmt, *extra]
    uncached = cli(*args, "--no-cache")
    assert not (cached.parent / DEFAULT_NAME).exists()
    assert computed.taken()
    cold = cli(*args)
    assert len(computed.taken()) == FILES
    warm = cli(*args)
    assert computed.taken() == []
    assert uncached.exit_code == 1
    _same(cold, uncached)
    _same(warm, uncached)


def test_a_dry_run_reports_from_the_cache_what_it_computes(cached: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    computed = Computed(monkeypatch)
    uncached = cli("apply", "--dry-run", "repo", "-j", "1", "--no-cache")
    computed.taken()
    cli("apply", "--dry-run", "repo", "-j", "1")
    computed.taken()
    warm = cli("apply", "--dry-run", "repo", "-j", "1")
    assert computed.taken() == []
    _same(warm, uncached)


def test_workers_keep_what_they_compute(cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uncached = cli("check", "repo", "-j", "2", "--format", "json", "--no-cache")
    cold = cli("check", "repo", "-j", "2", "--format", "json")
    computed = Computed(monkeypatch)
    warm = cli("check", "repo", "-j", "2", "--format", "json")
    assert computed.taken() == []  # nothing reached a worker either
    _same(cold, uncached)
    _same(warm, uncached)


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_a_warm_report_takes_where_findings_end_and_what_changed_from_the_cache(
        cached: Path, monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    from neuron_migrate.report import edits

    uncached = cli("check", "repo", "-j", "1", "--format", fmt, "--no-cache")
    cli("check", "repo", "-j", "1", "--format", fmt)
    monkeypatch.setattr(edits.FileEdits, "_starts", property(
        lambda self: pytest.fail(f"{self.file.path} parsed again for its findings' ends")))

    class Refused(edits.LineMatcher):
        def __init__(self, *args: object, **kwargs: object) -> None:
            pytest.fail("a file's rewrite aligned with its original again")

    monkeypatch.setattr(edits, "LineMatcher", Refused)
    warm = cli("check", "repo", "-j", "1", "--format", fmt)
    _same(warm, uncached)
    # the rewrite's edits were reported, from the lines kept with the results
    assert ('"edits": [' if fmt == "json" else '"replacements": [') in warm.stdout


@pytest.mark.parametrize("args", [["--diff"], ["--format", "markdown"]])
def test_a_report_that_does_not_say_where_findings_end_does_not_work_it_out(
        cached: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    from neuron_migrate.report.edits import FileEdits

    monkeypatch.setattr(FileEdits, "ends", lambda self: pytest.fail("ends worked out"))
    assert cli("check", "repo", "-j", "1", *args).exit_code == 1


def test_files_that_cannot_be_parsed_are_kept_with_their_error(
        cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (cached / "broken.py").write_text("import torch_xla\nif True:\nprint(1)\n")
    notebook = json.loads(json.dumps(NOTEBOOK))
    notebook["cells"][0]["source"] = ["import torch_xla\n", "x = = 1\n"]
    (cached / "broken.ipynb").write_text(json.dumps(notebook))
    uncached = cli("check", "repo", "-j", "1", "--no-cache")
    cli("check", "repo", "-j", "1")
    computed = Computed(monkeypatch)
    warm = cli("check", "repo", "-j", "1")
    assert computed.taken() == []
    assert uncached.exit_code == 2 and "broken.py:3: cannot parse" in uncached.stderr
    assert "broken.ipynb" in uncached.stderr
    _same(warm, uncached)


def test_a_file_whose_migration_failed_unexpectedly_is_computed_again(
        cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import neuron_migrate.engine.migrate as migrate

    def failing(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(migrate, "_migrate_tree", failing)
    cli("check", "repo", "-j", "1")
    computed = Computed(monkeypatch)
    warm = cli("check", "repo", "-j", "1")
    assert "internal error (RuntimeError: a bug)" in warm.stderr
    assert computed.taken() == ["explore.ipynb", "model.py", "train.py"]  # reach the engine


def test_apply_writes_from_a_fresh_migration_and_keeps_only_unchanged_files(
        cached: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    reference = _tree(tmp_path / "reference")
    cli("apply", str(reference), "-j", "1", "--no-cache")
    computed = Computed(monkeypatch)
    first = cli("apply", "repo", "-j", "1")
    assert first.exit_code in (0, 1)
    assert "model.py" in computed.taken()
    for name in ("pkg/model.py", "train.py", "requirements.txt", "explore.ipynb"):
        assert (cached / name).read_bytes() == (reference / name).read_bytes()
    (cached / "pkg" / "model.py").write_text(MODEL)  # back to the XLA version
    cli("apply", "repo", "-j", "1")
    taken = computed.taken()
    assert "model.py" in taken and "clean.py" not in taken
    assert (cached / "pkg/model.py").read_bytes() == (reference / "pkg/model.py").read_bytes()


def _findings(run: Run, name: str) -> list[tuple[int, str]]:
    assert run.exit_code in (0, 1), run.stderr
    return sorted((f["line"], f["rule_id"]) for f in run.json()["findings"]
                  if f["path"].endswith(name))


def test_editing_a_file_is_a_miss(cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli("check", "repo", "-j", "1", "--format", "json")
    computed = Computed(monkeypatch)
    (cached / "pkg" / "model.py").write_text(MODEL.replace("xm.mark_step()\n", ""))
    run = cli("check", "repo", "-j", "1", "--format", "json")
    assert computed.taken() == ["model.py"]
    assert "NM110" not in {rule for _, rule in _findings(run, "model.py")}


@pytest.mark.parametrize("setting, gone", [
    ('select = ["NM1"]', "NM2"), ('ignore = ["NM110"]', "NM110"),
    ('[per-file-ignores]\n"pkg/*" = ["NM110"]', "NM110"), ('target = "trn1"', "NM110"),
    ('helpers-module = "pkg/nm_helpers.py"', None), ('from = ["cuda"]', None),
    ('unsafe-fixes = true', None)])
def test_a_configuration_change_is_a_miss(cached: Path, monkeypatch: pytest.MonkeyPatch,
                                          setting: str, gone: str | None) -> None:
    before = _findings(cli("check", "repo", "-j", "1", "--format", "json"), "model.py")
    computed = Computed(monkeypatch)
    (cached / ".neuron-migrate.toml").write_text(setting + "\n")
    after = cli("check", "repo", "-j", "1", "--format", "json")
    assert "model.py" in computed.taken()
    fresh = cli("check", "repo", "-j", "1", "--format", "json", "--no-cache")
    _same(after, fresh)
    if gone is not None:
        assert any(rule.startswith(gone) for _, rule in before)
        assert not any(rule.startswith(gone) for _, rule in _findings(after, "model.py"))


def test_a_command_line_option_is_a_miss(cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli("check", "repo", "-j", "1", "--format", "json")
    computed = Computed(monkeypatch)
    run = cli("check", "repo", "-j", "1", "--format", "json", "--ignore", "NM110")
    assert "model.py" in computed.taken()
    assert "NM110" not in {rule for _, rule in _findings(run, "model.py")}


def test_another_build_of_the_tool_is_a_miss(cached: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    cli("check", "repo", "-j", "1")
    computed = Computed(monkeypatch)
    monkeypatch.setattr(key, "tool_fingerprint", lambda: "a changed rule catalogue")
    cli("check", "repo", "-j", "1")
    assert len(computed.taken()) == FILES


def test_another_working_directory_or_spelling_of_the_path_is_a_miss(
        cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli("check", "repo", "-j", "1")
    computed = Computed(monkeypatch)
    absolute = cli("check", str(cached), "-j", "1", "--format", "json")
    assert len(computed.taken()) == FILES
    assert all(f["path"].startswith(str(cached)) for f in absolute.json()["findings"])
    monkeypatch.chdir(cached)
    (cached / ".neuron-migrate.toml").write_text("")  # the same cache: its root is here now
    monkeypatch.setenv(ENVIRONMENT, str(cached.parent / DEFAULT_NAME))
    cli("check", ".", "-j", "1")
    assert len(computed.taken()) == FILES


def test_a_launched_script_edited_changes_its_launch_line(cached: Path) -> None:
    before = _findings(cli("check", "repo", "-j", "1", "--format", "json"), "run.sh")
    assert ("NM816" in {rule for _, rule in before})  # python train.py: torchrun now
    (cached / "train.py").write_text("print('one process')\n")
    after = cli("check", "repo", "-j", "1", "--format", "json")
    _same(after, cli("check", "repo", "-j", "1", "--format", "json", "--no-cache"))
    assert "NM816" not in {rule for _, rule in _findings(after, "run.sh")}


def test_a_launched_script_appearing_changes_its_launch_line(cached: Path) -> None:
    (cached / "later.sh").write_text("#!/bin/sh\npython later.py\n")
    before = cli("check", "repo", "-j", "1", "--format", "json")
    assert "NM816" not in {rule for _, rule in _findings(before, "later.sh")}
    (cached / "later.py").write_text(SPAWNING)
    after = cli("check", "repo", "-j", "1", "--format", "json")
    assert "NM816" in {rule for _, rule in _findings(after, "later.sh")}
    _same(after, cli("check", "repo", "-j", "1", "--format", "json", "--no-cache"))


def test_a_moved_symlink_changes_what_a_launch_line_starts(cached: Path) -> None:
    (cached / "tools").mkdir()
    (cached / "tools" / "train.py").write_text("print('one process')\n")
    (cached / "current").symlink_to(cached / "tools")
    (cached / "go.sh").write_text("#!/bin/sh\ncd current\npython train.py\n")
    before = cli("check", "repo", "-j", "1", "--format", "json")
    assert "NM816" not in {rule for _, rule in _findings(before, "go.sh")}
    (cached / "current").unlink()
    (cached / "current").symlink_to(cached)  # now the spawning train.py
    after = cli("check", "repo", "-j", "1", "--format", "json")
    _same(after, cli("check", "repo", "-j", "1", "--format", "json", "--no-cache"))
    assert "NM816" in {rule for _, rule in _findings(after, "go.sh")}


SOLO = """\
import torch
import torch_xla.core.xla_model as xm

model = torch.nn.Linear(2, 2)

if __name__ == "__main__":
    xm.save(model.state_dict(), "model.pt")
"""


def test_a_new_launcher_elsewhere_changes_a_script_it_starts(
        cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (cached / "solo.py").write_text(SOLO)
    monkeypatch.setattr(tree_walk, "SETTLED", -1.0)  # files written just now count
    alone = _findings(cli("check", "repo", "-j", "1", "--format", "json"), "solo.py")
    computed = Computed(monkeypatch)
    again = _findings(cli("check", "repo", "-j", "1", "--format", "json"), "solo.py")
    assert computed.taken() == []  # kept with the stamps of the tree it searched
    assert alone == again and "NM221" not in {rule for _, rule in alone}
    (cached / "go.sh").write_text("#!/bin/sh\ntorchrun --nproc-per-node=2 solo.py\n")
    script_mentions._tree.cache_clear()  # read once per process: a new run reads it again
    several = cli("check", "repo", "-j", "1", "--format", "json")
    assert "solo.py" in computed.taken()
    assert "NM221" in {rule for _, rule in _findings(several, "solo.py")}
    _same(several, cli("check", "repo", "-j", "1", "--format", "json", "--no-cache"))


def test_a_folder_that_stops_being_a_package_changes_a_helpers_import(cached: Path) -> None:
    (cached / "pkg" / "__init__.py").write_text("")
    (cached / "pkg" / "sub").mkdir()
    (cached / "pkg" / "sub" / "__init__.py").write_text("")
    (cached / "pkg" / "sub" / "saver.py").write_text(
        "import torch_xla.core.xla_model as xm\n\n\ndef save(m):\n"
        "    xm.save(m.state_dict(), 'm.pt')\n")
    (cached / ".neuron-migrate.toml").write_text('helpers-module = "pkg/nm_helpers.py"\n')
    assert cli("check", "repo", "-j", "1").exit_code == 1
    assert cli("check", "repo", "-j", "1").exit_code == 1
    (cached / "pkg" / "sub" / "__init__.py").unlink()
    after = cli("check", "repo", "-j", "1")
    assert after.exit_code == 2 and "cannot import from where it is" in after.stderr


def test_damaged_entries_are_misses(cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uncached = cli("check", "repo", "-j", "1", "--format", "json", "--no-cache")
    cli("check", "repo", "-j", "1", "--format", "json")
    entries = _entries(cached.parent / DEFAULT_NAME)
    assert len(entries) == FILES
    damage = [b"", b"{", b"\0" * 10, b'{"key": "x"}', b"[]", b'{"key": 1, "result": 2}', None]
    for entry, content in zip(entries, damage):
        if content is None:  # the right key, a result that is not one
            document = json.loads(entry.read_bytes())
            document["result"]["findings"] = [{"line": "x"}]
            content = json.dumps(document).encode()
        entry.write_bytes(content)
    for pack in _packs(cached.parent / DEFAULT_NAME):
        pack.unlink()  # else its copies of the entries are taken (tests/run/test_cache_pack.py)
    computed = Computed(monkeypatch)
    _same(cli("check", "repo", "-j", "1", "--format", "json"), uncached)
    assert len(computed.taken()) == FILES
    _same(cli("check", "repo", "-j", "1", "--format", "json"), uncached)  # rewritten
    assert computed.taken() == []


def test_no_cache_neither_reads_nor_writes(cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli("check", "repo", "-j", "1")
    folder = cached.parent / DEFAULT_NAME
    before = {p.name: p.read_bytes() for p in _entries(folder)}
    computed = Computed(monkeypatch)
    cli("check", "repo", "-j", "1", "--no-cache")
    assert len(computed.taken()) == FILES
    (cached / "pkg" / "model.py").write_text(MODEL + "# edited\n")
    cli("check", "repo", "-j", "1", "--no-cache")
    assert {p.name: p.read_bytes() for p in _entries(folder)} == before


def test_the_environment_turns_it_off(cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OFF, "1")
    cli("check", "repo", "-j", "1")
    assert not (cached.parent / DEFAULT_NAME).exists()


def test_the_environment_and_the_configuration_move_it(cached: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    (cached.parent / ".neuron-migrate.toml").write_text('cache-dir = "build/nm-cache"\n')
    cli("check", "repo", "-j", "1")
    assert len(_entries(cached.parent / "build" / "nm-cache")) == FILES
    assert not (cached.parent / DEFAULT_NAME).exists()
    monkeypatch.setenv(ENVIRONMENT, str(tmp_path / "ci-cache"))
    computed = Computed(monkeypatch)
    cli("check", "repo", "-j", "1")
    assert len(computed.taken()) == FILES
    assert len(_entries(tmp_path / "ci-cache")) == FILES


def test_an_unknown_cache_dir_value_is_a_configuration_error(cached: Path) -> None:
    (cached.parent / ".neuron-migrate.toml").write_text("cache-dir = 3\n")
    run = cli("check", "repo", "-j", "1")
    assert run.exit_code == 2 and "cache-dir must be the path of a folder" in run.stderr


def test_no_folder_for_a_cache_is_no_error(cached: Path, monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    uncached = cli("check", "repo", "-j", "1", "--no-cache")
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(ENVIRONMENT, str(tmp_path / "a-file" / "cache"))
    _same(cli("check", "repo", "-j", "1"), uncached)
    _same(cli("check", "repo", "-j", "1"), uncached)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_project_is_checked_as_usual(cached: Path) -> None:
    uncached = cli("check", "repo", "-j", "1", "--no-cache")
    os.chmod(cached.parent, 0o555)
    try:
        _same(cli("check", "repo", "-j", "1"), uncached)
    finally:
        os.chmod(cached.parent, 0o755)


def test_discovery_never_reads_the_cache(cached: Path) -> None:
    cli("check", "repo", "-j", "1")
    folder = cached.parent / DEFAULT_NAME
    (folder / "stray.py").write_text(MODEL)
    run = cli("check", ".", "-j", "1", "--no-respect-gitignore", "--format", "json")
    assert not any(DEFAULT_NAME in f["path"] for f in run.json()["findings"])


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "neuron_migrate", *args]


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in (OFF, ENVIRONMENT)}


def _many(root: Path, count: int) -> None:
    for number in range(count):
        (root / "pkg" / f"model_{number}.py").write_text(MODEL + f"print({number})\n")


@pytest.mark.slow
def test_two_runs_at_once_share_one_cache(cached: Path) -> None:
    _many(cached, 30)
    args = _command("check", "repo", "--format", "json", "-j", "1")
    uncached = subprocess.run([*args, "--no-cache"], capture_output=True, env=_environment())
    runs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=_environment()) for _ in range(2)]
    for run in runs:
        out, err = run.communicate(timeout=600)
        assert (run.returncode, out, err) == (1, uncached.stdout, uncached.stderr)
    warm = subprocess.run(args, capture_output=True, env=_environment())
    assert (warm.returncode, warm.stdout) == (1, uncached.stdout)
    assert not [p for p in (cached.parent / DEFAULT_NAME).iterdir() if p.suffix == ".tmp"]


@pytest.mark.slow
def test_a_run_killed_midway_leaves_a_cache_that_tells_the_truth(cached: Path) -> None:
    _many(cached, 60)
    folder = cached.parent / DEFAULT_NAME
    args = _command("check", "repo", "--format", "json", "-j", "1")
    uncached = subprocess.run([*args, "--no-cache"], capture_output=True, env=_environment())
    run = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env=_environment())
    deadline = time.monotonic() + 300
    while run.poll() is None and time.monotonic() < deadline and \
            (not folder.is_dir() or len(_entries(folder)) < 5):
        time.sleep(0.01)
    run.send_signal(signal.SIGKILL)
    run.wait()
    for entry in [*_entries(folder), *_packs(folder)]:
        if entry.suffix != ".tmp":
            json.loads(entry.read_bytes())  # whole, or not there at all
    warm = subprocess.run(args, capture_output=True, env=_environment())
    assert (warm.returncode, warm.stdout, warm.stderr) == (1, uncached.stdout, uncached.stderr)
    shutil.rmtree(folder)
