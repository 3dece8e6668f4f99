"""Control and safety: suppressions, git-aware writes, size limits, and never running the
migrated repository's code."""

from __future__ import annotations

import subprocess
from pathlib import Path

from neuron_migrate import migrate_file
from tests.conftest import cli

OLD = "import torch_xla\ntorch_xla.sync()\nx = 1\n"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _repo(path: Path) -> None:
    _git(path, "init", "-q")
    _git(path, "config", "user.email", "t@example.com")
    _git(path, "config", "user.name", "t")


def test_ignore_file_silences_the_whole_file(in_tmp: Path) -> None:
    source = "# vendored from torch_xla's examples\n# neuron-migrate: ignore-file\n" + OLD
    (in_tmp / "vendored.py").write_text(source)
    run = cli("check", "vendored.py", "--format", "json")
    assert run.exit_code == 0 and run.json()["findings"] == []
    cli("apply", "vendored.py")
    assert (in_tmp / "vendored.py").read_text() == source


def test_ignore_file_below_code_does_not_count(in_tmp: Path) -> None:
    (in_tmp / "late.py").write_text(OLD + "# neuron-migrate: ignore-file\n")
    assert cli("check", "late.py").exit_code == 1


def test_per_file_ignores(in_tmp: Path) -> None:
    (in_tmp / "pyproject.toml").write_text(
        '[tool.neuron-migrate]\nper-file-ignores = {"tests/*" = ["NM110"]}\n')
    (in_tmp / "tests").mkdir()
    (in_tmp / "tests" / "t.py").write_text(OLD)
    (in_tmp / "main.py").write_text(OLD)
    report = cli("check", ".", "--format", "json").json()
    by_path = {(f["path"], f["rule_id"]) for f in report["findings"]}
    assert ("main.py", "NM110") in by_path and ("tests/t.py", "NM110") not in by_path


def test_apply_refuses_files_with_uncommitted_changes(in_tmp: Path) -> None:
    _repo(in_tmp)
    (in_tmp / "clean.py").write_text(OLD)
    (in_tmp / "dirty.py").write_text(OLD)
    _git(in_tmp, "add", ".")
    _git(in_tmp, "commit", "-qm", "start")
    (in_tmp / "dirty.py").write_text(OLD + "y = 2  # the user's work in progress\n")
    run = cli("apply", ".")
    assert run.exit_code == 2 and "dirty.py: has uncommitted changes" in run.stderr
    assert (in_tmp / "clean.py").read_text() == "x = 1\n"
    assert (in_tmp / "dirty.py").read_text().startswith("import torch_xla")
    assert cli("apply", "--force", ".").exit_code == 0
    assert (in_tmp / "dirty.py").read_text() == "x = 1\ny = 2  # the user's work in progress\n"


def test_changed_since_limits_the_run(in_tmp: Path) -> None:
    _repo(in_tmp)
    (in_tmp / "old.py").write_text(OLD)
    _git(in_tmp, "add", ".")
    _git(in_tmp, "commit", "-qm", "start")
    (in_tmp / "new.py").write_text(OLD)
    report = cli("check", ".", "--changed-since", "HEAD", "--format", "json").json()
    assert [f["path"] for f in report["files"]] == ["new.py"]
    bad = cli("check", ".", "--changed-since", "no-such-rev")
    assert bad.exit_code == 2 and "no-such-rev" in bad.stderr


def test_files_over_the_size_limit_are_skipped(in_tmp: Path, monkeypatch) -> None:
    monkeypatch.setattr(migrate_file, "MAX_BYTES", 64)
    (in_tmp / "big.py").write_text(OLD + "#" * 100 + "\n")
    run = cli("apply", "big.py")
    assert run.exit_code == 0 and "larger than" in run.stdout
    assert (in_tmp / "big.py").read_text().startswith("import torch_xla")


def test_setup_py_is_parsed_never_run(in_tmp: Path) -> None:
    marker = in_tmp / "executed"
    (in_tmp / "setup.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\n"
        "from setuptools import setup\n"
        "setup(name='x', install_requires=['torch-neuronx==2.9.0.2.15.32035'])\n")
    run = cli("check", ".", "--format", "json")
    assert "NM801" in {f["rule_id"] for f in run.json()["findings"]}
    cli("apply", ".")
    cli("scan", ".")
    assert not marker.exists()
