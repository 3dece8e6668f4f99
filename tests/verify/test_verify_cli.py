"""verify's command line and reference environment: what it says when it cannot compare
(exit 2), without running anything under torch_xla."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neuron_migrate.cli import app
from neuron_migrate.verify import reference_env

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / "fixtures" / "verify"


def invoke(*args: str):
    return CliRunner().invoke(app, ["verify", *args])


def test_an_interpreter_that_does_not_exist_cannot_compare(tmp_path):
    result = invoke(str(PAIRS / "single_device.py"), str(PAIRS / "single_device.migrated.py"),
                    "--reference-python", str(tmp_path / "no-python"))
    assert result.exit_code == 2
    assert "CANNOT COMPARE" in result.output and "no such interpreter" in result.output


def test_an_interpreter_without_torch_xla_cannot_compare(tmp_path):
    result = invoke(str(PAIRS / "single_device.py"), str(PAIRS / "single_device.migrated.py"),
                    "--reference-python", sys.executable, "--format", "json")
    if "torch_xla" in sys.modules:  # pragma: no cover - a dev venv with torch_xla
        pytest.skip("this interpreter has torch_xla")
    assert result.exit_code == 2
    assert "cannot import torch and torch_xla" in result.output


def test_an_out_of_scope_original_is_said_so_before_anything_runs(tmp_path):
    original = tmp_path / "fsdp.py"
    original.write_text(
        "import torch\n"
        "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n"
        "model = FSDP(torch.nn.Linear(2, 2))\n")
    result = invoke(str(original), str(original), "--reference-python", str(tmp_path / "none"))
    assert result.exit_code == 2
    assert "out of scope: FSDP" in result.output


def test_unknown_format_is_a_usage_error():
    result = invoke(str(PAIRS / "single_device.py"), str(PAIRS / "single_device.migrated.py"),
                    "--format", "sarif")
    assert result.exit_code == 2 and "unknown format" in result.output


def test_the_help_lists_verify():
    assert "verify" in CliRunner().invoke(app, ["--help"]).output


def test_the_cache_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert reference_env.cache_folder() == tmp_path / "neuron-migrate" / "verify-xla-2.1"


def test_no_python_old_enough_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(sys, "version_info", (3, 13, 0))
    monkeypatch.setattr(reference_env.shutil, "which", lambda name: None)
    monkeypatch.setattr(reference_env.os.path, "exists", lambda path: False)
    with pytest.raises(reference_env.ReferenceUnavailable, match="Python 3.11 or older"):
        reference_env.base_python()


def test_an_environment_that_cannot_be_made_is_removed_and_explained(monkeypatch, tmp_path):
    failing = tmp_path / "python3.11"
    failing.write_text("#!/bin/sh\necho 'ERROR: no network' >&2\nexit 1\n")
    failing.chmod(failing.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(reference_env, "base_python", lambda: str(failing))
    said: list[str] = []
    folder = tmp_path / "cache" / "env"
    with pytest.raises(reference_env.ReferenceUnavailable, match="no network"):
        reference_env.create(folder, said.append)
    assert not folder.exists()
    assert said and "making the reference environment" in said[0]


def test_the_original_can_come_from_git_with_its_local_modules(tmp_path):
    import subprocess

    from neuron_migrate.verify.command import _original_path

    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "train.py").write_text("import model\nprint('before')\n")
    (repo / "src" / "model.py").write_text("SIZE = 1\n")
    for command in (["init", "-q"], ["add", "."],
                    ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x"]):
        subprocess.run(["git", "-C", str(repo), *command], check=True)
    (repo / "src" / "train.py").write_text("print('after the migration')\n")
    exported = tmp_path / "exported"
    exported.mkdir()
    path = _original_path(repo / "src" / "train.py", "HEAD", exported)
    assert path.read_text() == "import model\nprint('before')\n"
    assert (path.parent / "model.py").read_text() == "SIZE = 1\n"
    result = invoke(str(repo / "src" / "train.py"), str(repo / "src" / "train.py"),
                    "--original-rev", "no-such-rev")
    assert result.exit_code == 2


def test_an_original_that_fails_is_named_by_its_exception_line():
    from neuron_migrate.verify.runs import _exception_line

    tail = ("Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n"
            "TypeError: broadcast(): incompatible function arguments. Supported:\n"
            "    1. (self, tensor: Tensor, root: int)\n"
            "Invoked with: [tensor([[0.1, 0.2]], requires_grad=True)], 0\n")
    assert _exception_line(tail).startswith("TypeError: broadcast(): incompatible")
    assert _exception_line("") == "exited with no error line"
