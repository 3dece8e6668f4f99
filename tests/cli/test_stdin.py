"""`check -` and `apply -` with `--stdin-filename`: what an editor sends and reads back. These
run the executable in a process of its own: which stream gets which bytes is the behaviour."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_migrate import entry
from tests.conftest import FIXTURES, ROOT, cli

OLD = b"import torch_xla.core.xla_model as xm\nd = xm.xla_device()\nxm.mark_step()\n"
CLEAN = b"import torch\nprint(torch.ones(2))\n"
CONFIG = ('[tool.neuron-migrate]\nexclude = ["vendored/"]\n\n'
          '[tool.neuron-migrate.per-file-ignores]\n"tests/*" = ["NM110"]\n')


def _run(*args: str, source: bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "neuron_migrate", *args], input=source, cwd=cwd,
                          capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def _applied_to_a_file(source: bytes, name: str, folder: Path) -> bytes:
    """What `apply NAME` writes for this source: what `apply -` must print."""
    folder.mkdir()
    (folder / name).write_bytes(source)
    assert cli("apply", folder / name).exit_code in (0, 2)
    return (folder / name).read_bytes()


@pytest.mark.parametrize("source, name", [
    (OLD, "model.py"),
    ((FIXTURES / "python" / "NM101_xla_device.before.py").read_bytes(), "train.py"),
    ((FIXTURES / "encoding" / "latin1_cookie.before.py").read_bytes(), "latin.py"),
    (b"\xef\xbb\xbf" + OLD.replace(b"\n", b"\r\n"), "crlf_bom.py"),
    (CLEAN, "clean.py"),
    ((FIXTURES / "notebooks" / "xla_training.before.ipynb").read_bytes(), "nb.ipynb"),
    (b"torch-neuronx==2.1.2.2.3.0\ntorch-xla==2.1.2\nnumpy\n", "requirements.txt"),
], ids=["python", "fixture", "latin1", "crlf-bom", "clean", "notebook", "requirements"])
def test_apply_prints_what_apply_would_write_and_nothing_else(tmp_path: Path, source: bytes,
                                                              name: str) -> None:
    expected = _applied_to_a_file(source, name, tmp_path / "as_a_file")
    done = _run("apply", "--stdin-filename", name, "-", source=source, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
    assert (expected == source) == (name == "clean.py")  # the cases do change, but one
    assert not (tmp_path / name).exists()  # nothing written beside the stdout
    if expected != source:
        assert name.encode() in done.stderr  # the report, on stderr


def test_apply_reports_on_stderr_in_any_format(tmp_path: Path) -> None:
    done = _run("apply", "--format", "json", "--stdin-filename", "model.py", "-", source=OLD,
                cwd=tmp_path)
    assert done.returncode == 0
    assert b"torch_xla" in OLD and b"torch_xla" not in done.stdout
    report = json.loads(done.stderr)
    assert report["files"][0]["path"] == "model.py"
    assert {f["rule_id"] for f in report["findings"]} == {"NM001", "NM101", "NM110"}


def test_check_reports_like_a_file_with_the_same_exit_codes(tmp_path: Path) -> None:
    done = _run("check", "--stdin-filename", "src/model.py", "-", source=OLD, cwd=tmp_path)
    assert done.returncode == 1
    assert b"src/model.py: 3 changes" in done.stdout and b"NM110" in done.stdout
    assert _run("check", "--stdin-filename", "src/model.py", "-", source=CLEAN,
                cwd=tmp_path).returncode == 0
    assert list(tmp_path.iterdir()) == []
    unnamed = _run("check", "--format", "json", "-", source=OLD, cwd=tmp_path)
    assert unnamed.returncode == 1 and json.loads(unnamed.stdout)["files"][0]["path"] == "-"


@pytest.mark.parametrize("args", [["check", "--diff"], ["apply", "--dry-run"]])
def test_the_diff_names_the_file_and_applies_to_it(tmp_path: Path, args: list[str]) -> None:
    done = _run(*args, "--stdin-filename", "model.py", "-", source=OLD, cwd=tmp_path)
    assert done.returncode == 1
    assert b"--- a/model.py\n+++ b/model.py\n" in done.stdout
    diff = done.stdout[done.stdout.index(b"--- a/"):done.stdout.index(b"model.py: 3 changes")]
    (tmp_path / "model.py").write_bytes(OLD)
    subprocess.run(["git", "apply", "-"], input=diff, cwd=tmp_path, check=True)
    assert (tmp_path / "model.py").read_bytes() == _applied_to_a_file(OLD, "model.py",
                                                                      tmp_path / "file")


def test_a_source_that_does_not_parse_names_the_file_and_line(tmp_path: Path) -> None:
    broken = b"import torch_xla\n\ndef (:\n"
    checked = _run("check", "--stdin-filename", "pkg/broken.py", "-", source=broken,
                   cwd=tmp_path)
    assert checked.returncode == 2
    assert b"error: pkg/broken.py:3: cannot parse" in checked.stderr
    applied = _run("apply", "--stdin-filename", "pkg/broken.py", "-", source=broken,
                   cwd=tmp_path)
    assert applied.returncode == 2 and b"pkg/broken.py:3:" in applied.stderr
    assert applied.stdout == broken  # the editor's buffer is handed back as it was


def _project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    (tmp_path / "tests").mkdir()
    return tmp_path


def test_an_excluded_name_is_left_alone(tmp_path: Path) -> None:
    project = _project(tmp_path)
    checked = _run("check", "-v", "--stdin-filename", "vendored/lib/x.py", "-", source=OLD,
                   cwd=project)
    assert checked.returncode == 0 and b"NM1" not in checked.stdout
    assert b"vendored/lib/x.py: excluded" in checked.stdout
    applied = _run("apply", "--stdin-filename", "vendored/x.py", "-", source=OLD, cwd=project)
    assert applied.returncode == 0 and applied.stdout == OLD
    flag = _run("apply", "--exclude", "gen_*.py", "--stdin-filename", "gen_1.py", "-",
                source=OLD, cwd=project)
    assert flag.returncode == 0 and flag.stdout == OLD
    # from a subfolder, the name is relative to it, as a path would be
    inside = _run("apply", "--stdin-filename", "x.py", "-", source=OLD,
                  cwd=project / "tests")
    assert inside.stdout != OLD
    (project / "vendored").mkdir()
    below = _run("apply", "--stdin-filename", "x.py", "-", source=OLD,
                 cwd=project / "vendored")
    assert below.stdout == OLD


def test_per_file_ignores_and_the_configuration_follow_the_name(tmp_path: Path) -> None:
    project = _project(tmp_path)

    def rules(name: str, cwd: Path) -> set[str]:
        done = _run("check", "--format", "json", "--stdin-filename", name, "-", source=OLD,
                    cwd=cwd)
        return {f["rule_id"] for f in json.loads(done.stdout)["findings"]}

    assert rules("tests/test_x.py", project) == {"NM101"}
    assert rules("test_x.py", project / "tests") == {"NM101"}
    assert rules(str(project / "tests" / "test_x.py"), ROOT) == {"NM101"}
    assert rules("src/x.py", project) == {"NM001", "NM101", "NM110"}
    (project / "pyproject.toml").write_text('[tool.neuron-migrate]\nselect = ["NM2"]\n')
    assert rules("src/x.py", project) == set()  # the configuration is NAME's


@pytest.mark.parametrize("args, blamed", [
    (["check", "-", "other.py"], b"PATH"),
    (["check", "-", "-"], b"PATH"),
    (["apply", "--stdin-filename", "x.py", "other.py"], b"--stdin-filename"),
    (["check", "--stdin-filename", "", "-"], b"--stdin-filename"),
    (["check", "--changed-since", "HEAD", "-"], b"--changed-since"),
    (["scan", "-"], b"--stdin-filename NAME"),
])
def test_stdin_mixed_with_paths_is_a_usage_error(tmp_path: Path, args: list[str],
                                                 blamed: bytes) -> None:
    (tmp_path / "other.py").write_bytes(OLD)
    done = _run(*args, source=OLD, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == b""
    assert blamed in done.stderr and b"Usage: neuron-migrate" in done.stderr
    assert (tmp_path / "other.py").read_bytes() == OLD


def test_scan_reads_the_named_dependency_file(tmp_path: Path) -> None:
    pins = b"torch-neuronx==2.1.2.2.3.0\nnumpy\n"
    found = _run("scan", "--stdin-filename", "requirements.txt", "-", source=pins, cwd=tmp_path)
    assert found.returncode == 1 and b"requirements.txt" in found.stdout
    fixed = _run("scan", "--fix", "--stdin-filename", "requirements.txt", "-", source=pins,
                 cwd=tmp_path)
    assert fixed.returncode == 0
    assert fixed.stdout == _applied_to_a_file(pins, "requirements.txt", tmp_path / "file")
    code = _run("scan", "-v", "--stdin-filename", "train.py", "-", source=OLD, cwd=tmp_path)
    assert code.returncode == 0 and b"train.py: not a file `scan` reads" in code.stdout


def test_a_file_named_dash_is_still_a_file(tmp_path: Path) -> None:
    (tmp_path / "-").write_bytes(OLD)
    done = _run("check", "./-", source=b"", cwd=tmp_path)
    assert done.returncode == 1 and b"NM110" in done.stdout


def test_typer_reads_stdin_too(tmp_path: Path) -> None:
    """`-qv` is typer's to parse (the lean entry point leaves it): the same behaviour."""
    done = _run("apply", "-qv", "--stdin-filename", "model.py", "-", source=OLD, cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout == _applied_to_a_file(OLD, "model.py", tmp_path / "file")
    assert entry.lean_request(["apply", "-qv", "--stdin-filename", "model.py", "-"]) is None


def test_the_example_through_stdin_matches_the_file_run(tmp_path: Path) -> None:
    example = ROOT / "examples" / "xla_mnist" / "train.py"
    shutil.copyfile(example, tmp_path / "as_a_file.py")
    done = _run("apply", "--stdin-filename", "train.py", "-", source=example.read_bytes(),
                cwd=tmp_path)
    assert done.returncode == 0
    assert cli("apply", tmp_path / "as_a_file.py").exit_code == 0
    assert done.stdout == (tmp_path / "as_a_file.py").read_bytes()
